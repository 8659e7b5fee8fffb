"""The reconcile of one MemoryStore, and the `Reconciler` every request for one goes through.

Parse the spec, build the desired children (pure: `builders`), apply what is not already as
desired (`apply`, the `ledger`), observe, and write the status (`status`).

Three things ask for a store's reconcile: kopf (create / update / resume: `handlers.py`), the
children watch (`watch.py`: a child changed, was deleted, or a workload's status moved) and
the resync loop (`resync.py`: a safety net). All go through one `Reconciler`: one reconcile
per store at a time, each from the live object read first, so a stale spec is never applied
over a newer one and `observedGeneration` never goes backwards; a request for a store that
already has one waiting is dropped (the waiting one reads the live object anyway). A store
being deleted is never re-applied: its status says `Deleting`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import replace
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType
from pydantic import ValidationError

from memorystore.config import format_validation_error
from memorystore.keyed_locks import KeyedLocks
from memorystore.operator import apply, backup_plan, backups, isolation, ledger, names, readiness
from memorystore.operator.builders import desired_children, expected_workloads, pod_monitor
from memorystore.operator.builders.common import owns_data
from memorystore.operator.builders.memory_service import RESTORE_CONTAINER
from memorystore.operator.builders.model import Keys, Owner
from memorystore.operator.builders.validate import SpecError, check_spec
from memorystore.operator.keys import Change, ServiceKeyState, describe
from memorystore.operator.metrics import (
    API_WRITES,
    DURATION,
    IN_FLIGHT,
    KEY_CHANGES,
    QUEUED,
    RECONCILES,
    STORE_READY,
    STORE_SUSPENDED,
)
from memorystore.operator.resources import MemoryStoreResource, as_body
from memorystore.operator.settings import OperatorSettings
from memorystore.operator.status import (
    AGENT_PODS_ISOLATED,
    Observed,
    Workload,
    compute_status,
    restored,
    workload_state,
)
from memorystore.operator.store_index import StoreIndex
from memorystore.spec import (
    KIND,
    ConditionReason,
    MemoryStoreSpec,
    MemoryStoreStatus,
    Phase,
)

__all__ = ["CONCURRENCY", "Reconciler", "reconcile", "secret_refs"]

log = logging.getLogger("memorystore.operator")
# Reconciles running at once (a resync asks for every store together).
CONCURRENCY = 8


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Reconciler:
    """One reconcile per store at a time, each from the live object; see the module doc.
    Made once at start-up with the operator's settings: the default images and the
    operator's own pods reach every store's children from them."""

    def __init__(
        self, client: AsyncClient, settings: OperatorSettings, concurrency: int = CONCURRENCY
    ) -> None:
        self.client = client
        self.settings = settings
        self.book = ledger.Ledger()
        self.index = StoreIndex()
        self._locks = KeyedLocks()
        self._waiting: set[tuple[str, str]] = set()
        self._limit = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()

    def request(self, namespace: str, name: str) -> None:
        """Ask for a reconcile without waiting for it (the watch's callback)."""
        task = asyncio.get_running_loop().create_task(self.run_logged(namespace, name))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run_logged(self, namespace: str, name: str) -> None:
        """`run`, with a failure logged rather than raised (one store must not stop others)."""
        try:
            await self.run(namespace, name)
        except ApiError as exc:
            if exc.status.code != 404:  # deleted meanwhile: nothing to do
                log.warning("reconcile of %s/%s failed: %s", namespace, name, exc.status.message)
        except Exception:
            log.exception("reconcile of %s/%s failed", namespace, name)

    async def run(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        if key in self._waiting:
            return  # one is already waiting, and it will read the live object
        self._waiting.add(key)
        waiting = queued = True
        QUEUED.inc()
        try:
            async with self._locks.hold(key):
                self._waiting.discard(key)
                waiting = False  # a request from now on may wait behind this one
                async with self._limit:
                    QUEUED.dec()
                    queued = False
                    with IN_FLIGHT.track_inprogress():
                        await self._reconcile_live(namespace, name)
        finally:
            if waiting:  # cancelled while waiting: the mark is this call's
                self._waiting.discard(key)
            if queued:
                QUEUED.dec()

    async def _reconcile_live(self, namespace: str, name: str) -> None:
        client = self.client
        try:
            live = await client.get(MemoryStoreResource, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                self.index.forget(namespace, name)
                return
            raise
        body = as_body(live)
        self.index.remember(body)
        status = await reconcile(body, self)
        if _without_nulls(status) != _without_nulls(body.get("status") or {}):
            await client.patch(
                MemoryStoreResource.Status,
                name,
                {"status": status},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
            API_WRITES.labels("status").inc()


def _without_nulls(value: Any) -> Any:
    """A status as the server keeps it: a merge patch's nulls remove keys."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


async def reconcile(body: dict[str, Any], reconciler: Reconciler) -> dict[str, Any]:
    """Apply the desired state of one MemoryStore; return its new status (camelCase).
    Callers hold the store's lock (`Reconciler.run`)."""
    client = reconciler.client
    with DURATION.time():
        outcome = "error"
        try:
            outcome, status = await _reconcile(body, reconciler)
        finally:
            RECONCILES.labels(outcome).inc()
    ready = next((c for c in status.conditions if c.type == "Ready"), None)
    meta = body["metadata"]
    STORE_READY.labels(meta["namespace"], meta["name"]).set(
        1 if ready is not None and ready.status == "True" else 0
    )
    suspended = bool((body.get("spec") or {}).get("suspend"))
    STORE_SUSPENDED.labels(meta["namespace"], meta["name"]).set(1 if suspended else 0)
    previous = (body.get("status") or {}).get("phase")
    if status.phase != previous:
        await _event(client, body, status)
    for reason, message in _migration_events(body.get("status") or {}, status):
        await _post_event(client, body, reason, message, warning=reason == "MigrationAborted")
    if _newly_shared(body.get("status") or {}, status):
        shared = next(c for c in status.conditions if c.type == AGENT_PODS_ISOLATED)
        await _post_event(client, body, "SharedAgentPods", shared.message, warning=True)
    out = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    if status.embedder_migration is not None:
        # status is merge-patched: a field the pod no longer reports must be an explicit null
        out["embedderMigration"] = status.embedder_migration.model_dump(by_alias=True, mode="json")
    if status.service_key is not None:
        # status is merge-patched: an ended grace period must be an explicit null to go
        out["serviceKey"]["previousKeyValidUntil"] = status.service_key.previous_key_valid_until
    return out


async def _reconcile(body: dict[str, Any], reconciler: Reconciler) -> tuple[str, MemoryStoreStatus]:
    client = reconciler.client
    meta = body["metadata"]
    owner = Owner(meta["name"], meta["namespace"], meta["uid"], int(meta.get("generation", 1)))
    previous = MemoryStoreStatus.model_validate(body.get("status") or {})
    if meta.get("deletionTimestamp"):
        # Garbage collection is removing the children: applying them again would fight it.
        deleting = Observed(owner.generation, False, deleting=True)
        return "deleting", compute_status(deleting, previous, _now())
    try:
        spec = MemoryStoreSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        bad = Observed(owner.generation, False, spec_error=format_validation_error(exc))
        return "invalid_spec", compute_status(bad, previous, _now())
    try:
        # The one check, before anything is written: the builders below cannot refuse the
        # spec, so a rotated service key always reaches the client Secret in this reconcile.
        check_spec(owner, spec)
    except SpecError as exc:
        bad = Observed(owner.generation, spec.suspend, spec_error=str(exc))
        return "invalid_spec", compute_status(bad, previous, _now())
    already_restored = restored(previous)
    source = (
        await backups.get_backup(client, owner.namespace, spec.restore.from_backup)
        if spec.restore is not None
        else None
    )
    plan = backup_plan.plan_restore(spec, source, already_restored)
    if plan.mismatch:  # before anything is written: nothing is created for it
        bad = Observed(
            owner.generation,
            spec.suspend,
            spec_error=plan.mismatch,
            spec_error_reason=ConditionReason.RESTORE_MISMATCH,
        )
        return "invalid_spec", compute_status(bad, previous, _now())
    target = spec.backup.volume.claim_name if spec.backup else None
    target_exists = target is not None and await backups.claim_exists(
        client, owner.namespace, target
    )
    owned = owns_data(spec)
    keys = await apply.ensure_keys(client, owner, owned)
    # the key backups are signed with; a restored store's is the source store's
    await apply.ensure_backup_key(client, owner, spec, source)
    service_key = await _ensure_service_key(client, body, owner, spec, keys, previous)
    now = dt.datetime.now(dt.UTC)
    tls = await apply.ensure_tls(client, owner, spec, owned, now)
    await apply.ensure_qdrant_tls(client, owner, spec, owned, now)
    children = desired_children(
        owner,
        spec,
        reconciler.settings.images,
        replace(keys, service_api_key=service_key.current),
        ca_cert=tls.ca_cert,
        backup_claim=target if target_exists else None,
        restore=plan.restore,
        operator_pods=reconciler.settings.operator_pods,
        scrapers=reconciler.settings.monitoring.scrapers,
        service=plan.start_service,
    )
    API_WRITES.labels("child").inc(await apply.apply_changed(client, children, reconciler.book))
    monitor = pod_monitor(owner, spec, reconciler.settings.monitoring)
    if monitor is not None:
        API_WRITES.labels("child").inc(
            await apply.apply_if_served(client, monitor, reconciler.book)
        )
    failure = None
    if plan.restore is not None and not already_restored:
        pods = await backups.service_pods(client, owner.namespace, owner.name)
        failure = backup_plan.restore_failure(pods, RESTORE_CONTAINER)
    observed = replace(
        await _observe(reconciler, owner, spec, tls.ca_cert),
        service_key=service_key.status(),
        tls_pending=tls.pending,
        backup_target=(target, target_exists) if target is not None else None,
        restore_from=spec.restore.from_backup if spec.restore else None,
        restore_waiting=plan.waiting,
        restore_failure=failure,
    )
    if plan.start_service:  # (a store waiting for its restore has nothing to back up)
        await _keep_schedule(client, owner, spec, meta)
    return "applied", compute_status(observed, previous, _now())


async def _keep_schedule(
    client: AsyncClient, owner: Owner, spec: MemoryStoreSpec, meta: dict[str, Any]
) -> None:
    """Scheduled backups and retention (backups.keep_schedule): never fails the reconcile."""
    if spec.backup is None or spec.backup.schedule is None:
        return
    created = backup_plan.parse_time(meta.get("creationTimestamp")) or dt.datetime.now(dt.UTC)
    try:
        await backups.keep_schedule(client, owner, spec, created, dt.datetime.now(dt.UTC))
    except ApiError as exc:
        log.warning("%s/%s: scheduled backups: %s", owner.namespace, owner.name, exc.status.message)


async def _ensure_service_key(
    client: AsyncClient,
    body: dict[str, Any],
    owner: Owner,
    spec: MemoryStoreSpec,
    keys: Keys,
    previous: MemoryStoreStatus,
) -> ServiceKeyState:
    """Seed, rotate or expire the service key (operator/keys.py); log and post each change."""
    decision = await apply.ensure_service_key(
        client,
        owner,
        spec.service_key,
        owns_data(spec),
        seed=keys.service_api_key,
        known_generation=previous.service_key.generation if previous.service_key else None,
        now=dt.datetime.now(dt.UTC),
    )
    store = f"{owner.namespace}/{owner.name}"
    for change, line in zip(decision.changes, describe(store, decision), strict=True):
        log.info("%s", line)
        KEY_CHANGES.labels(str(change)).inc()
        if change is not Change.SEEDED:  # seeding changes nothing an agent or a user sees
            await _post_event(
                client, body, f"ServiceKey{change}", line, warning=change is Change.RECREATED
            )
    return decision.state


async def _observe(
    reconciler: Reconciler, owner: Owner, spec: MemoryStoreSpec, ca_cert: str | None
) -> Observed:
    client = reconciler.client
    workloads = {
        kind: Workload(kind, name, await apply.get_workload(client, kind, name, owner.namespace))
        for kind, name in expected_workloads(owner, spec)
    }
    service = workloads.get("Deployment")
    # Never a request to the tenant's URL: an external Qdrant is seen through the service,
    # whose pods say why they are not ready (readiness.py).
    why_not_ready = migration = None
    if service is not None and service.obj is not None and not workload_state(service)[0]:
        why_not_ready = await readiness.not_ready_reason(
            client, owner.namespace, owner.name, tls=spec.tls.enabled, ca_cert=ca_cert
        )
    elif service is not None and service.obj is not None:
        # an embedder migration, as a ready pod's /readyz reports it
        migration = await readiness.migration_progress(
            client, owner.namespace, owner.name, tls=spec.tls.enabled, ca_cert=ca_cert
        )
    external = spec.vector_store.external
    return Observed(
        generation=owner.generation,
        suspended=spec.suspend,
        vector_store=workloads.get("StatefulSet"),
        embedded_vector_store=spec.vector_store.embedded is not None,
        postgres_vector_store=spec.vector_store.postgres is not None,
        external_vector_store=external.url if external else None,
        service=service,
        service_not_ready=why_not_ready,
        embedder_migration=migration,
        pending_claims=await apply.pending_claims(
            client, owner.namespace, names.store_selector(owner.name)
        ),
        missing_secrets=await apply.missing_secrets(client, owner.namespace, secret_refs(spec)),
        endpoint=names.memory_endpoint(owner.name, owner.namespace, tls=spec.tls.enabled),
        client_config_map=names.client_config_map_name(owner.name),
        client_secret=names.client_secret_name(owner.name),
        agent_pod_label=f"{names.CLIENT_POD_LABEL}={owner.name}",
        shared_agent_pods=await _shared_agent_pods(reconciler, owner, spec),
    )


async def _shared_agent_pods(
    reconciler: Reconciler, owner: Owner, spec: MemoryStoreSpec
) -> str | None:
    """Why another store of the namespace would admit this store's agent pods, or None."""
    try:
        specs = await reconciler.index.specs(reconciler.client, owner.namespace)
    except ApiError as exc:
        log.warning("cannot list MemoryStores in %s: %s", owner.namespace, exc.status.message)
        return None
    others = {name: other for name, other in specs.items() if other and name != owner.name}
    found = isolation.overlaps(owner.name, spec, others)
    return isolation.overlap_message(owner.name, found) if found else None


def _migration_events(previous: dict[str, Any], status: MemoryStoreStatus) -> list[tuple[str, str]]:
    """(reason, message) of each embedder migration event the service listed that is newer
    than the last one the status recorded (one Event each: a resync that sees the same ones
    posts nothing; a migration done between two looks still posts every step)."""
    now = status.embedder_migration
    if now is None:
        return []
    seen = str((previous.get("embedderMigration") or {}).get("lastEventTime") or "")
    return [(e.reason, e.message) for e in now.recent_events if e.time > seen]


def _newly_shared(previous: dict[str, Any], status: MemoryStoreStatus) -> bool:
    """The AgentPodsIsolated condition has just turned False (one Event, not one per resync)."""
    now = next((c for c in status.conditions if c.type == AGENT_PODS_ISOLATED), None)
    if now is None or now.status != "False":
        return False
    before = next(
        (c for c in previous.get("conditions") or [] if c.get("type") == AGENT_PODS_ISOLATED),
        None,
    )
    return before is None or before.get("status") != "False"


def secret_refs(spec: MemoryStoreSpec) -> dict[str, tuple[str, str]]:
    """Every Secret key the user's spec points at, by the field that names it."""
    vs, history = spec.vector_store, spec.history_db
    refs = {
        "spec.embedder.apiKeySecretRef": spec.embedder.api_key_secret_ref,
        "spec.llm.apiKeySecretRef": spec.llm.api_key_secret_ref if spec.llm else None,
        "spec.vectorStore.external.apiKeySecretRef": (
            vs.external.api_key_secret_ref if vs.external else None
        ),
        "spec.vectorStore.postgres.dsnSecretRef": (
            vs.postgres.dsn_secret_ref if vs.postgres else None
        ),
        "spec.historyDb.postgres.dsnSecretRef": (
            history.postgres.dsn_secret_ref if history.postgres else None
        ),
    }
    return {field: (ref.name, ref.key) for field, ref in refs.items() if ref is not None}


async def _event(client: AsyncClient, body: dict[str, Any], status: MemoryStoreStatus) -> None:
    """A Kubernetes Event on each phase change, with the Ready condition's reason/message."""
    ready = next((c for c in status.conditions if c.type == "Ready"), None)
    warning = status.phase in (Phase.FAILED, Phase.DEGRADED)
    await _post_event(client, body, str(status.phase), ready.message if ready else "", warning)


async def _post_event(
    client: AsyncClient, body: dict[str, Any], reason: str, message: str, warning: bool
) -> None:
    await apply.post_event(client, KIND, body["metadata"], reason, message, warning)
