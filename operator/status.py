"""Status from what was observed: pure functions, so every reason and message is unit-tested.

Conditions follow the Kubernetes API conventions: one per aspect (SpecValid,
VectorStoreReady, ServiceReady) plus Ready; `lastTransitionTime` changes only when a
condition's status changes; `phase` is a one-word summary for `kubectl get`. Every reason is
a `ConditionReason` (documented in the CRD, so `kubectl explain` lists them all).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from memorystore.spec import (
    Condition,
    ConditionReason,
    ConditionStatus,
    EmbedderMigrationStatus,
    MemoryStoreStatus,
    MigrationPhase,
    Phase,
    ServiceKeyStatus,
)

R = ConditionReason

READY = "Ready"
SPEC_VALID = "SpecValid"
VECTOR_STORE_READY = "VectorStoreReady"
SERVICE_READY = "ServiceReady"
# False when another store in the namespace would admit the same agent pods (a warning:
# Ready and the phase do not depend on it).
AGENT_PODS_ISOLATED = "AgentPodsIsolated"
# With spec.backup: whether the backup target's claim exists and is mounted (a warning too).
BACKUP_READY = "BackupReady"
# With spec.restore: whether the store was restored from its backup.
RESTORED = "Restored"
# Once the service reported an embedder migration: whether reads are served by the index of
# spec.embedder alone (False while the new index is built; Ready does not depend on it).
EMBEDDER_CURRENT = "EmbedderCurrent"


@dataclass(frozen=True)
class Workload:
    """A StatefulSet or Deployment the store needs, as observed (None: not found)."""

    kind: str
    name: str
    obj: dict[str, Any] | None


@dataclass(frozen=True)
class Observed:
    generation: int
    suspended: bool
    spec_error: str | None = None  # a spec the operator cannot realise
    vector_store: Workload | None = None  # None for an external or embedded Qdrant
    embedded_vector_store: bool = False  # the engine runs inside the memory service
    # spec.vectorStore.postgres: the operator does not reach the database itself (no
    # credentials, maybe no route); the service's /readyz queries it.
    postgres_vector_store: bool = False
    # Its URL, when external. Never requested by the operator (a tenant wrote it): the
    # service's /readyz reaches it, so it is seen through the service like the two above.
    external_vector_store: str | None = None
    service: Workload | None = None
    # Why a pod of the service is not ready, in its /readyz's words (readiness.py).
    service_not_ready: str | None = None
    pending_claims: list[str] = field(default_factory=list)  # PVCs not Bound
    missing_secrets: list[str] = field(default_factory=list)  # user secretKeyRefs not found
    # (reason, message) while the serving certificate's Secret cannot exist yet
    # (CertManagerMissing, CertificatePending): the pods cannot mount it and start.
    tls_pending: tuple[str, str] | None = None
    # metadata.deletionTimestamp is set: nothing more is applied, garbage collection runs.
    deleting: bool = False
    endpoint: str | None = None
    client_config_map: str | None = None
    client_secret: str | None = None
    agent_pod_label: str | None = None
    shared_agent_pods: str | None = None  # why another store admits the same pods, if one does
    service_key: ServiceKeyStatus | None = None  # generation and grace deadline, never a key
    # The condition reason of `spec_error` (InvalidSpec unless e.g. RestoreMismatch).
    spec_error_reason: ConditionReason = ConditionReason.INVALID_SPEC
    # spec.backup.volume's claim: (claim, exists); None without spec.backup.
    backup_target: tuple[str, bool] | None = None
    # spec.restore.fromBackup (None without spec.restore), and while the service is held back
    # for it (reason, message); a failed restore init container's message.
    restore_from: str | None = None
    restore_waiting: tuple[ConditionReason, str] | None = None
    restore_failure: str | None = None
    # what a ready pod's /readyz says of an embedder migration (readiness.migration_progress)
    embedder_migration: EmbedderMigrationStatus | None = None


DELETING_MESSAGE = (
    "metadata.deletionTimestamp is set: the operator applies nothing more; Kubernetes garbage "
    "collection removes the children (data per spec.deletionPolicy)"
)


def workload_state(workload: Workload) -> tuple[bool, ConditionReason, str]:
    """(ready, reason, message) for one workload, from its status as the controllers report.

    A workload scaled to 0 serves nothing, so it is not ready (while the store is suspended
    the Ready condition says so instead)."""
    obj = workload.obj
    what = f"{workload.kind} {workload.name}"
    if obj is None:
        return False, R.NOT_FOUND, f"{what} does not exist yet"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    want = int(spec.get("replicas", 1))
    ready = int(status.get("readyReplicas") or 0)
    generation = (obj.get("metadata") or {}).get("generation")
    if generation is not None and (status.get("observedGeneration") or 0) < generation:
        return False, R.ROLLING_OUT, f"{what} is applying a new revision"
    if want == 0:
        return False, R.SCALED_TO_ZERO, f"{what} is scaled to 0 replicas"
    updated = int(status.get("updatedReplicas") or 0)
    if ready >= want and updated >= want:
        return True, R.READY, f"{what}: {ready}/{want} replicas ready"
    return False, R.NOT_READY, f"{what}: {ready}/{want} replicas ready"


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: ConditionStatus,
    reason: ConditionReason,
    message: str,
    now: str,
    generation: int,
) -> list[Condition]:
    """Replace `type_` in `conditions`, keeping lastTransitionTime when status is unchanged."""
    previous = next((c for c in conditions if c.type == type_), None)
    since = previous.last_transition_time if previous and previous.status == status else now
    updated = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=since,
        observed_generation=generation,
    )
    return [c for c in conditions if c.type != type_] + [updated]


def _flag(ok: bool) -> ConditionStatus:
    return ConditionStatus.TRUE if ok else ConditionStatus.FALSE


def compute_status(observed: Observed, previous: MemoryStoreStatus, now: str) -> MemoryStoreStatus:
    """The next status: conditions per aspect, then Ready and the phase that summarise them."""
    gen = observed.generation
    conds = list(previous.conditions)

    if observed.deleting:
        # Nothing is applied or observed any more: the other conditions, the endpoint and the
        # names keep what they said.
        conds = set_condition(
            conds, READY, ConditionStatus.FALSE, R.DELETING, DELETING_MESSAGE, now, gen
        )
        status = _status(observed, conds, Phase.DELETING)
        kept = {k: v for k, v in previous if v is not None and getattr(status, k) is None}
        return status.model_copy(update=kept)
    if observed.spec_error:
        why = observed.spec_error_reason
        conds = set_condition(
            conds, SPEC_VALID, ConditionStatus.FALSE, why, observed.spec_error, now, gen
        )
        conds = set_condition(
            conds, READY, ConditionStatus.FALSE, why, observed.spec_error, now, gen
        )
        return _status(observed, conds, Phase.FAILED)
    conds = set_condition(conds, SPEC_VALID, ConditionStatus.TRUE, R.VALID, "", now, gen)

    svc_ok, svc_reason, svc_msg = (
        workload_state(observed.service)
        if observed.service
        else (False, R.NOT_FOUND, "memory service not created yet")
    )
    if not svc_ok and svc_reason == R.NOT_READY and observed.service_not_ready:
        svc_msg = f"{svc_msg}; {observed.service_not_ready}"
    vs_ok: bool
    vs_reason: ConditionReason
    vs_ok, vs_reason, vs_msg = (
        workload_state(observed.vector_store)
        if observed.vector_store is not None
        else (svc_ok, R.EXTERNAL, "")
    )
    if observed.restore_waiting:  # no Deployment until the backup to restore is there
        svc_ok, (svc_reason, svc_msg) = False, observed.restore_waiting
    elif observed.restore_failure:
        svc_ok, svc_reason, svc_msg = False, R.RESTORE_FAILED, observed.restore_failure
    elif observed.tls_pending:  # no certificate to mount: the pods cannot start either
        pending, svc_msg = observed.tls_pending
        svc_ok, svc_reason = False, ConditionReason(pending)
    elif observed.missing_secrets:  # the pods cannot start on a real node, whatever they report
        svc_ok, svc_reason = False, R.SECRET_MISSING
        svc_msg = "; ".join(observed.missing_secrets)
    elif observed.pending_claims and not svc_ok and svc_reason != R.SCALED_TO_ZERO:
        # (with no pod, a WaitForFirstConsumer claim stays Pending: that is not the problem)
        svc_reason = R.VOLUME_PENDING
        svc_msg = (
            f"waiting for PersistentVolumeClaim {', '.join(observed.pending_claims)} "
            "to be bound (is there a default StorageClass?)"
        )
    through_service = observed.vector_store is None
    if through_service:
        # Ready with the service's pods, whose /readyz queries the engine, the database or
        # the external Qdrant.
        if observed.embedded_vector_store:
            vs_reason, vs_msg = R.EMBEDDED, "embedded in the memory service"
        elif observed.postgres_vector_store:
            vs_reason = R.POSTGRES
            vs_msg = "in PostgreSQL (spec.vectorStore.postgres), queried by the memory service"
        else:
            vs_reason = R.EXTERNAL
            vs_msg = (
                f"external Qdrant at {observed.external_vector_store}, reached by the memory "
                "service"
            )
        vs_ok = svc_ok
        if not svc_ok:
            vs_reason, vs_msg = R.SERVICE_NOT_READY, f"{vs_msg}, which is not ready: {svc_msg}"
    conds = set_condition(conds, VECTOR_STORE_READY, _flag(vs_ok), vs_reason, vs_msg, now, gen)
    conds = set_condition(conds, SERVICE_READY, _flag(svc_ok), svc_reason, svc_msg, now, gen)
    if observed.shared_agent_pods:
        conds = set_condition(
            conds,
            AGENT_PODS_ISOLATED,
            ConditionStatus.FALSE,
            R.SHARED_AGENT_PODS,
            observed.shared_agent_pods,
            now,
            gen,
        )
    else:
        conds = set_condition(
            conds,
            AGENT_PODS_ISOLATED,
            ConditionStatus.TRUE,
            R.ISOLATED,
            "no other store in the namespace admits the same agent pods",
            now,
            gen,
        )

    conds = _backup_conditions(observed, conds, svc_ok, svc_reason, svc_msg, now)
    migration = observed.embedder_migration or previous.embedder_migration
    conds = _migration_condition(migration, conds, now, gen)
    observed = replace(observed, embedder_migration=migration)

    if observed.suspended:
        conds = set_condition(
            conds,
            READY,
            ConditionStatus.FALSE,
            R.SUSPENDED,
            "spec.suspend is true: scaled to zero, data kept",
            now,
            gen,
        )
        return _status(observed, conds, Phase.SUSPENDED)
    ready = vs_ok and svc_ok
    if ready:
        conds = set_condition(
            conds,
            READY,
            ConditionStatus.TRUE,
            R.READY,
            f"memory service at {observed.endpoint}",
            now,
            gen,
        )
        return _status(observed, conds, Phase.READY)
    # An embedded engine or PostgreSQL vectors wait on the service: Ready names its reason.
    own = vs_ok or through_service
    blocking = svc_msg if own else vs_msg
    reason = svc_reason if own else vs_reason
    conds = set_condition(conds, READY, ConditionStatus.FALSE, reason, blocking, now, gen)
    was_ready = previous.phase in (Phase.READY, Phase.DEGRADED)
    return _status(observed, conds, Phase.DEGRADED if was_ready else Phase.PENDING)


def _backup_conditions(
    observed: Observed,
    conds: list[Condition],
    svc_ok: bool,
    svc_reason: ConditionReason,
    svc_msg: str,
    now: str,
) -> list[Condition]:
    """BackupReady (with spec.backup) and Restored (with spec.restore); absent otherwise."""
    gen = observed.generation
    if observed.backup_target is None:
        conds = [c for c in conds if c.type != BACKUP_READY]
    else:
        claim, exists = observed.backup_target
        if exists:
            conds = set_condition(
                conds,
                BACKUP_READY,
                ConditionStatus.TRUE,
                R.BACKUP_TARGET_READY,
                f"the memory service mounts PersistentVolumeClaim {claim} at /backups",
                now,
                gen,
            )
        else:
            conds = set_condition(
                conds,
                BACKUP_READY,
                ConditionStatus.FALSE,
                R.BACKUP_TARGET_MISSING,
                f"PersistentVolumeClaim {claim} (spec.backup.volume.claimName) does not exist: "
                "the memory service runs without it and backups fail until it is created",
                now,
                gen,
            )
    if observed.restore_from is None:
        return [c for c in conds if c.type != RESTORED]
    before = next((c for c in conds if c.type == RESTORED), None)
    source = f"MemoryStoreBackup {observed.restore_from}"
    if before is not None and before.status == ConditionStatus.TRUE:
        return conds  # restored once: that stays true
    if svc_ok:
        return set_condition(
            conds,
            RESTORED,
            ConditionStatus.TRUE,
            R.RESTORED,
            f"restored from {source}; the memory service is ready",
            now,
            gen,
        )
    reason: ConditionReason
    if svc_reason in (R.BACKUP_NOT_FOUND, R.BACKUP_NOT_READY, R.RESTORE_FAILED):
        reason, message = svc_reason, svc_msg
    else:
        reason, message = R.RESTORING, f"restoring from {source}: {svc_msg}"
    return set_condition(conds, RESTORED, ConditionStatus.FALSE, reason, message, now, gen)


def _migration_condition(
    migration: EmbedderMigrationStatus | None, conds: list[Condition], now: str, gen: int
) -> list[Condition]:
    """EmbedderCurrent, from the last migration the service reported (absent before one)."""
    if migration is None:
        return conds
    if migration.phase == MigrationPhase.BUILDING:
        share = ""
        if migration.total:
            share = f" ({100 * (migration.done or 0) // migration.total} %)"
        progress = f"{migration.done or 0}/{migration.total or 0} memories{share}"
        if migration.rate_per_second:
            progress += f", {migration.rate_per_second}/s"
        if migration.eta_seconds is not None:
            progress += f", about {migration.eta_seconds} s left"
        message = (
            f"building the {migration.other} index beside {migration.live}: {progress}; "
            f"reads are served by {migration.live} meanwhile"
        )
        return set_condition(
            conds, EMBEDDER_CURRENT, ConditionStatus.FALSE, R.MIGRATING, message, now, gen
        )
    if migration.phase == MigrationPhase.SWITCHED:
        message = (
            f"reads are served by {migration.live}; {migration.other} is kept until the grace "
            "period ends (setting the old embedder back moves reads back at once)"
        )
        return set_condition(
            conds, EMBEDDER_CURRENT, ConditionStatus.TRUE, R.MIGRATION_SWITCHED, message, now, gen
        )
    message = f"reads are served by {migration.live}"
    return set_condition(
        conds, EMBEDDER_CURRENT, ConditionStatus.TRUE, R.EMBEDDER_CURRENT, message, now, gen
    )


def restored(previous: MemoryStoreStatus) -> bool:
    """The store already reported Restored=True (its restore is done)."""
    return any(c.type == RESTORED and c.status == ConditionStatus.TRUE for c in previous.conditions)


def _status(observed: Observed, conds: list[Condition], phase: Phase) -> MemoryStoreStatus:
    order = {
        READY: 0,
        SPEC_VALID: 1,
        VECTOR_STORE_READY: 2,
        SERVICE_READY: 3,
        AGENT_PODS_ISOLATED: 4,
        BACKUP_READY: 5,
        RESTORED: 6,
        EMBEDDER_CURRENT: 7,
    }
    return MemoryStoreStatus(
        observed_generation=observed.generation,
        phase=phase,
        conditions=sorted(conds, key=lambda c: order.get(c.type, 9)),
        endpoint=observed.endpoint,
        client_config_map=observed.client_config_map,
        client_secret=observed.client_secret,
        agent_pod_label=observed.agent_pod_label,
        service_key=observed.service_key,
        embedder_migration=observed.embedder_migration,
    )
