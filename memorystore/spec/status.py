"""What the operator reports about a store: conditions with a documented reason each, a
one-word phase, and where agents find the service. Written only by the operator.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from memorystore.spec.base import Model

__all__ = [
    "CONDITION_REASONS",
    "Condition",
    "ConditionReason",
    "ConditionStatus",
    "EmbedderMigrationStatus",
    "MemoryStoreStatus",
    "MigrationEvent",
    "MigrationPhase",
    "Phase",
    "ServiceKeyStatus",
]


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionReason(StrEnum):
    """Every reason the operator gives a condition (`CONDITION_REASONS` says what each means)."""

    READY = "Ready"
    VALID = "Valid"
    INVALID_SPEC = "InvalidSpec"
    NOT_FOUND = "NotFound"
    ROLLING_OUT = "RollingOut"
    NOT_READY = "NotReady"
    SCALED_TO_ZERO = "ScaledToZero"
    EXTERNAL = "External"
    EMBEDDED = "Embedded"
    POSTGRES = "Postgres"
    SERVICE_NOT_READY = "ServiceNotReady"
    SECRET_MISSING = "SecretMissing"
    VOLUME_PENDING = "VolumePending"
    CERT_MANAGER_MISSING = "CertManagerMissing"
    CERTIFICATE_PENDING = "CertificatePending"
    SUSPENDED = "Suspended"
    DELETING = "Deleting"
    SHARED_AGENT_PODS = "SharedAgentPods"
    ISOLATED = "Isolated"
    BACKUP_TARGET_READY = "BackupTargetReady"
    BACKUP_TARGET_MISSING = "BackupTargetMissing"
    BACKUP_NOT_FOUND = "BackupNotFound"
    BACKUP_NOT_READY = "BackupNotReady"
    RESTORE_MISMATCH = "RestoreMismatch"
    RESTORING = "Restoring"
    RESTORE_FAILED = "RestoreFailed"
    RESTORED = "Restored"
    EMBEDDER_CURRENT = "EmbedderCurrent"
    MIGRATING = "Migrating"
    MIGRATION_SWITCHED = "MigrationSwitched"


# One line per reason: what it means and, where something is wrong, what to do. The
# `reason` field's description (and so `kubectl explain memorystore.status.conditions.reason`)
# is generated from this.
CONDITION_REASONS: dict[ConditionReason, str] = {
    ConditionReason.READY: "VectorStoreReady, ServiceReady: every replica of the workload is "
    "ready and updated; Ready: the store serves at status.endpoint",
    ConditionReason.VALID: "SpecValid: the operator can realise the spec",
    ConditionReason.INVALID_SPEC: "the spec cannot be realised; the message names the field "
    "to fix (not retried until the spec changes)",
    ConditionReason.NOT_FOUND: "a workload the store needs does not exist (yet)",
    ConditionReason.ROLLING_OUT: "a workload is applying a new revision",
    ConditionReason.NOT_READY: "a workload has fewer ready or updated replicas than it wants",
    ConditionReason.SCALED_TO_ZERO: "a workload has 0 replicas (spec.suspend), so nothing serves",
    ConditionReason.EXTERNAL: "VectorStoreReady: the external Qdrant "
    "(spec.vectorStore.external.url) is reached by the memory service, which is ready (the "
    "operator itself never sends a request to that URL)",
    ConditionReason.EMBEDDED: "VectorStoreReady: the engine runs inside the memory service, "
    "which is ready",
    ConditionReason.POSTGRES: "VectorStoreReady: the vectors are in PostgreSQL "
    "(spec.vectorStore.postgres) and the memory service, whose /readyz queries the database, "
    "is ready",
    ConditionReason.SERVICE_NOT_READY: "VectorStoreReady: the embedded engine, the "
    "PostgreSQL vectors or the external Qdrant are seen through the memory service, which is "
    "not ready; the message gives the reason its /readyz gives",
    ConditionReason.SECRET_MISSING: "a Secret or key the spec names does not exist; the "
    "message names the field",
    ConditionReason.VOLUME_PENDING: "a PersistentVolumeClaim is not bound (is there a "
    "default StorageClass?)",
    ConditionReason.CERT_MANAGER_MISSING: "spec.tls.issuerRef is set but cert-manager is not "
    "installed",
    ConditionReason.CERTIFICATE_PENDING: "waiting for cert-manager to issue the serving "
    "certificate",
    ConditionReason.SUSPENDED: "Ready: spec.suspend is true (scaled to zero, data kept)",
    ConditionReason.DELETING: "Ready: the store is being deleted; garbage collection removes "
    "its children",
    ConditionReason.SHARED_AGENT_PODS: "AgentPodsIsolated: another store in the namespace "
    "admits the same agent pods (a warning; Ready is not affected)",
    ConditionReason.ISOLATED: "AgentPodsIsolated: no other store in the namespace admits "
    "the same agent pods",
    ConditionReason.BACKUP_TARGET_READY: "BackupReady: spec.backup.volume's claim exists and "
    "the service mounts it at /backups",
    ConditionReason.BACKUP_TARGET_MISSING: "BackupReady: the PersistentVolumeClaim "
    "spec.backup.volume names does not exist, so the service runs without it and backups "
    "fail; create it (Ready is not affected)",
    ConditionReason.BACKUP_NOT_FOUND: "spec.restore.fromBackup names a MemoryStoreBackup "
    "that does not exist: the service is not started until it does",
    ConditionReason.BACKUP_NOT_READY: "spec.restore.fromBackup's MemoryStoreBackup has not "
    "succeeded (yet): the service is not started until it has",
    ConditionReason.RESTORE_MISMATCH: "SpecValid: the backup spec.restore.fromBackup names "
    "was made with another embedder (provider, model or dimensions) than spec.embedder; "
    "nothing is created",
    ConditionReason.RESTORING: "Restored: the service's init container restores the backup "
    "before the service starts",
    ConditionReason.RESTORE_FAILED: "the service's restore init container failed; the message "
    "is its termination message (a corrupt or mismatched backup, or a non-empty store)",
    ConditionReason.RESTORED: "Restored: the store was restored from spec.restore.fromBackup "
    "and its service is ready",
    ConditionReason.EMBEDDER_CURRENT: "EmbedderCurrent: reads are served by the index of "
    "spec.embedder, and no other index is kept",
    ConditionReason.MIGRATING: "EmbedderCurrent: after a change of spec.embedder the memory "
    "service builds the new index beside the live one (status.embedderMigration shows how "
    "far); the store serves from the old one meanwhile (Ready is not affected)",
    ConditionReason.MIGRATION_SWITCHED: "EmbedderCurrent: reads moved to the new index; the "
    "old one is kept for spec.embedder.migration.gracePeriodSeconds, so setting the old "
    "embedder back moves reads back at once",
}


def _reasons_description() -> str:
    lines = "; ".join(f"{reason.value}: {meaning}" for reason, meaning in CONDITION_REASONS.items())
    return f"CamelCase reason, for machines. One of: {lines}."


class Condition(Model):
    """A status condition, as in the Kubernetes API conventions."""

    type: str = Field(
        description="Ready, SpecValid, VectorStoreReady, ServiceReady, AgentPodsIsolated, "
        "BackupReady (with spec.backup), Restored (with spec.restore) or EmbedderCurrent "
        "(once the memory service has reported an embedder migration)."
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    # A plain string in the schema, not an enum: a status written by another operator
    # version must never be refused.
    reason: str = Field(description=_reasons_description())
    message: str = Field("", description="What is wrong and what to do, for people.")
    last_transition_time: str = Field(description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(None, description="Generation it describes.")


class MigrationPhase(StrEnum):
    BUILDING = "Building"
    SWITCHED = "Switched"
    STEADY = "Steady"


class MigrationEvent(Model):
    reason: str = Field(max_length=40)
    message: str = Field("", max_length=300)
    time: str = Field(max_length=40)


class EmbedderMigrationStatus(Model):
    """An embedder migration as the memory service reports it (its /readyz), bounded."""

    phase: MigrationPhase = Field(
        description="Building (the new index being filled), Switched (reads on the new index, "
        "the old kept for a revert) or Steady (done)."
    )
    live: str = Field(max_length=200, description="The index reads are served by.")
    desired: str = Field(max_length=200, description="The index spec.embedder asks for.")
    other: str | None = Field(
        None, max_length=200, description="The index being built, or kept for a revert."
    )
    done: int | None = Field(None, ge=0, description="Memories in the new index.")
    total: int | None = Field(None, ge=0, description="Memories in the live index.")
    rate_per_second: float | None = Field(
        None, ge=0, description="Memories re-embedded per second."
    )
    eta_seconds: int | None = Field(None, ge=0, description="Seconds left, at that rate.")
    errors: int | None = Field(None, ge=0, description="Memories that could not be embedded.")
    last_error: str | None = Field(None, max_length=300, description="The last of them.")
    last_event: str | None = Field(
        None, max_length=40, description="The migration's last event (its reason)."
    )
    last_event_message: str | None = Field(None, max_length=300, description="What it said.")
    last_event_time: str | None = Field(None, max_length=40, description="When (RFC 3339).")
    # the events a pod listed, oldest first: posted as Kubernetes Events by the operator,
    # never written into the status (excluded from it and from the CRD's schema)
    recent_events: SkipJsonSchema[list[MigrationEvent]] = Field(
        default_factory=list, exclude=True, max_length=10
    )


class Phase(StrEnum):
    PENDING = "Pending"  # children created, not ready yet
    READY = "Ready"
    DEGRADED = "Degraded"  # was ready, a part is not
    FAILED = "Failed"  # the spec cannot be realised; fix it
    SUSPENDED = "Suspended"
    DELETING = "Deleting"


class ServiceKeyStatus(Model):
    """The service key's generation and grace deadline, as the operator last wrote them."""

    generation: int = Field(
        description="Generation of the current key: the spec.serviceKey.rotation it was made "
        "for (0: the key generated with the store)."
    )
    previous_key_valid_until: str | None = Field(
        None,
        description="While the previous key is still accepted after a rotation: until when "
        "(RFC 3339). Absent when only the current key works.",
    )


class MemoryStoreStatus(Model):
    """What the operator observed; written only by the operator (status subresource)."""

    observed_generation: int | None = Field(None, description="Last generation reconciled.")
    phase: Phase | None = Field(None, description="A one-word summary of the conditions.")
    conditions: list[Condition] = Field(default_factory=list, description="Detailed state.")
    endpoint: str | None = Field(None, description="The memory service URL inside the cluster.")
    client_config_map: str | None = Field(None, description="ConfigMap agent pods mount.")
    client_secret: str | None = Field(None, description="Secret with the service key.")
    service_key: ServiceKeyStatus | None = Field(
        None, description="Which service key is in use (never the key itself)."
    )
    agent_pod_label: str | None = Field(
        None, description="The label (key=value) an agent pod carries to reach the service."
    )
    embedder_migration: EmbedderMigrationStatus | None = Field(
        None,
        description="The last embedder migration the memory service reported "
        "(docs/operations/embedder-migration.md).",
    )
