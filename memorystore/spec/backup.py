"""Backups: a store's backup target, schedule and retention, a restore at creation, and the
MemoryStoreBackup resource (one backup of one store, which outlives it). The cron syntax is
checked here; the operator steps it (`operator/backup_plan.py`).
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from cronsim import CronSim, CronSimError
from pydantic import Field, field_validator

from memorystore.spec.base import Model
from memorystore.spec.kube import ObjectName

__all__ = [
    "CRON_PATTERN",
    "BackupEmbedder",
    "BackupPhase",
    "BackupSpec",
    "BackupVolume",
    "MemoryStoreBackupSpec",
    "MemoryStoreBackupStatus",
    "RestoreSpec",
    "cron_problem",
]


# Five whitespace-separated fields (minute hour day-of-month month day-of-week); the API
# server checks the shape, the model the cron syntax itself.
CRON_PATTERN = r"^\s*\S+(\s+\S+){4}\s*$"


def cron_problem(expression: str) -> str | None:
    """Why `expression` is not a 5-field cron expression (None when it is)."""
    fields = expression.split()
    if len(fields) != 5:
        return (
            f"{expression!r} has {len(fields)} fields; a schedule has 5: minute hour "
            "day-of-month month day-of-week (UTC), e.g. '0 3 * * *'"
        )
    try:
        CronSim(" ".join(fields), dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    except CronSimError as exc:
        return f"{expression!r} is not a cron expression: {exc}"
    return None


class BackupVolume(Model):
    """A PersistentVolumeClaim of the store's namespace that holds its backups."""

    claim_name: ObjectName = Field(
        description="PersistentVolumeClaim in the store's namespace (created by you, any "
        "StorageClass): the memory service mounts it at /backups and writes each backup into "
        "a directory named after it. While it does not exist the service runs without it "
        "(condition BackupReady=False, reason BackupTargetMissing)."
    )


class BackupSpec(Model):
    """Where and when the store is backed up: a MemoryStoreBackup naming the store takes an
    on-demand backup; `schedule` has the operator create them."""

    volume: BackupVolume = Field(description="The backup target: a PersistentVolumeClaim.")
    schedule: str | None = Field(
        None,
        pattern=CRON_PATTERN,
        description="Scheduled backups: a 5-field cron expression in UTC (minute hour "
        "day-of-month month day-of-week, e.g. '0 3 * * *'). The operator creates a "
        "MemoryStoreBackup named <store>-<YYYYMMDDHHMM> for each slot (a missed slot is "
        "caught up once, not repeated). Unset: on-demand backups only.",
    )
    retention: int = Field(
        7,
        ge=1,
        le=1000,
        description="Scheduled backups kept: once more have succeeded, the oldest are deleted "
        "(their files first, then the MemoryStoreBackup). On-demand backups are never pruned.",
    )

    @field_validator("schedule")
    @classmethod
    def _cron(cls, schedule: str | None) -> str | None:
        if schedule is not None:
            problem = cron_problem(schedule)
            if problem:
                raise ValueError(problem)
        return schedule


class RestoreSpec(Model):
    """Start the store from a backup. Settable only when the store is created."""

    from_backup: ObjectName = Field(
        description="A MemoryStoreBackup in the store's namespace, phase Succeeded, taken with "
        "the same embedder (provider, model, dimensions). The service starts only after an "
        "init container has restored it into the store's empty data."
    )
    trust_unsigned: bool = Field(
        False,
        description="Restore the backup even when its manifest is unsigned or its signature "
        "does not verify with the backup key (a backup from before signing, or signed with a "
        "key that is gone). Every file and record is still checked. Off by default: only a "
        "backup signed with the key of the store that took it is believed, so whoever can "
        "write the backup volume but not read that key cannot make a backup a restore "
        "accepts.",
    )


class BackupPhase(StrEnum):
    PENDING = "Pending"  # not started yet
    RUNNING = "Running"  # the operator waits for the service or the service writes it
    SUCCEEDED = "Succeeded"  # the files are on the volume (status says where)
    FAILED = "Failed"  # status.error says why


class MemoryStoreBackupSpec(Model):
    """Which store to back up: created by you (on demand) or by the operator (a schedule)."""

    store: ObjectName = Field(
        description="The MemoryStore (same namespace) to back up; it needs spec.backup.volume. "
        "Cannot change."
    )


class BackupEmbedder(Model):
    """The embedder the backed-up vectors were made with: a restore needs the same."""

    provider: str = Field(description="Embedding provider.")
    model: str | None = Field(None, description="Model name (remote providers).")
    dimensions: int = Field(description="Vector size.")


class MemoryStoreBackupStatus(Model):
    """What the operator and the service reported; written only by the operator."""

    phase: BackupPhase | None = Field(None, description="Pending, Running, Succeeded or Failed.")
    started_at: str | None = Field(None, description="When the backup started (RFC 3339).")
    finished_at: str | None = Field(None, description="When it succeeded or failed (RFC 3339).")
    memories: int | None = Field(None, description="Memories in the backup.")
    history_events: int | None = Field(None, description="History events in the backup.")
    size_bytes: int | None = Field(None, description="Size of the backup's files in bytes.")
    claim_name: str | None = Field(
        None, description="The PersistentVolumeClaim holding the backup's files."
    )
    path: str | None = Field(
        None, description="The backup's directory, relative to the root of that claim."
    )
    collection: str | None = Field(None, description="The collection that was backed up.")
    embedder: BackupEmbedder | None = Field(
        None, description="The embedder of the backed-up vectors (a restore needs the same)."
    )
    scheduled: bool | None = Field(
        None,
        description="true: created by spec.backup.schedule and pruned by spec.backup.retention; "
        "on-demand backups are never pruned.",
    )
    attempts: int | None = Field(
        None,
        description="How many times the operator asked the memory service for this backup: "
        "more than one when a connection dropped before the answer came (retried up to 3 "
        "times, after asking the service whether the backup finished meanwhile).",
    )
    message: str | None = Field(None, description="What the backup is waiting for, while Running.")
    error: str | None = Field(None, description="Why it failed (phase Failed).")
