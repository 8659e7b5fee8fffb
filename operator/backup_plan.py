"""Backups' pure decisions: which scheduled slot is due, which backups retention prunes,
whether a restore can start, what a waiting backup waits for, and the status a finished one
gets from the service's manifest.

Kept apart from the runtime (`backups.py`, which reads and writes the API and calls the
memory service) so that every case is decided by a function of its inputs and unit-tested.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cronsim import CronSim

from memorystore.operator import names
from memorystore.operator.builders.model import Restore
from memorystore.operator.builders.paths import BACKUP_DIR
from memorystore.operator.status import Workload, workload_state
from memorystore.spec import (
    BACKUP_KIND,
    GROUP,
    VERSION,
    BackupPhase,
    ConditionReason,
    MemoryStoreSpec,
)

__all__ = [
    "KEY_WAITS",
    "RFC3339",
    "SCHEDULED_LABEL",
    "SLOT_ANNOTATION",
    "RestorePlan",
    "Scheduled",
    "backup_key_source",
    "due_slot",
    "format_time",
    "latest_slot",
    "manifest_status",
    "parse_time",
    "plan_restore",
    "restore_failure",
    "scheduled_backup",
    "scheduled_of",
    "service_state",
    "slot_name",
    "to_prune",
]

SCHEDULED_LABEL = "memorystore.dev/scheduled"
# The cron slot a scheduled backup was made for (RFC 3339, UTC): retention orders by it.
SLOT_ANNOTATION = "memorystore.dev/scheduled-for"
RFC3339 = "%Y-%m-%dT%H:%M:%SZ"

R = ConditionReason


def format_time(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime(RFC3339)


def parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.strptime(text, RFC3339).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


# --- the schedule and retention -------------------------------------------------------------------


@dataclass(frozen=True)
class Scheduled:
    """A MemoryStoreBackup as retention sees it."""

    name: str
    slot: dt.datetime  # the slot it was made for (or its creation time)
    phase: str | None
    scheduled: bool = True


def slot_name(store: str, slot: dt.datetime) -> str:
    """The scheduled backup of one slot: one name per (store, minute), so two reconciles
    that both find the slot due create one object (the second gets AlreadyExists)."""
    return f"{store}-{slot.astimezone(dt.UTC):%Y%m%d%H%M}"


def latest_slot(schedule: str, now: dt.datetime) -> dt.datetime:
    """The last time the 5-field cron `schedule` (UTC) fired at or before `now`."""
    minute = now.astimezone(dt.UTC).replace(second=0, microsecond=0)
    # cronsim steps backwards strictly before its start: one second past the minute
    # includes the minute itself.
    return next(CronSim(" ".join(schedule.split()), minute + dt.timedelta(seconds=1), reverse=True))


def due_slot(
    schedule: str, now: dt.datetime, since: dt.datetime, existing: Iterable[Scheduled], store: str
) -> dt.datetime | None:
    """The slot a scheduled backup is due for now, or None.

    Only the latest slot at or before `now` is ever due (a missed slot is caught up once,
    never a backlog), only if it is not before `since` (the store's creation: a new store
    does not back up a slot it never lived through), and only if no backup of that slot
    exists in any phase (a failed one is not retried: the next slot is)."""
    slot = latest_slot(schedule, now)
    if slot < since:
        return None
    name = slot_name(store, slot)
    if any(b.name == name or (b.scheduled and b.slot == slot) for b in existing):
        return None
    return slot


def to_prune(backups: Iterable[Scheduled], retention: int) -> list[str]:
    """Scheduled backups retention removes: every Succeeded one but the `retention` newest,
    and every Failed one older than the newest Succeeded (it is superseded). On-demand
    backups and unfinished ones (Pending, Running, no phase yet) are never pruned."""
    scheduled = [b for b in backups if b.scheduled]
    succeeded = sorted(
        (b for b in scheduled if b.phase == BackupPhase.SUCCEEDED),
        key=lambda b: (b.slot, b.name),
        reverse=True,
    )
    prune = [b.name for b in succeeded[retention:]]
    if succeeded:
        newest = succeeded[0].slot
        prune += [b.name for b in scheduled if b.phase == BackupPhase.FAILED and b.slot < newest]
    return sorted(prune)


def scheduled_of(body: dict[str, Any]) -> Scheduled:
    """A MemoryStoreBackup object (as a dict) for retention."""
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    created = parse_time(meta.get("creationTimestamp")) or dt.datetime.min.replace(tzinfo=dt.UTC)
    slot = parse_time((meta.get("annotations") or {}).get(SLOT_ANNOTATION)) or created
    return Scheduled(
        name=meta.get("name", ""),
        slot=slot,
        phase=(body.get("status") or {}).get("phase"),
        scheduled=labels.get(SCHEDULED_LABEL) == "true",
    )


def scheduled_backup(store: str, namespace: str, slot: dt.datetime) -> dict[str, Any]:
    """The MemoryStoreBackup for one slot: labelled for listing, never owned by the store."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": BACKUP_KIND,
        "metadata": {
            "annotations": {SLOT_ANNOTATION: format_time(slot)},
            "labels": {names.STORE_LABEL: store, SCHEDULED_LABEL: "true"},
            "name": slot_name(store, slot),
            "namespace": namespace,
        },
        "spec": {"store": store},
    }


# --- restore --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestorePlan:
    """What a store with spec.restore gets this reconcile.

    `restore`: the init container's source (None: none). `start_service`: whether the
    Deployment is built. `mismatch`: a SpecValid=False message (nothing is created).
    `waiting`: (reason, message) while the service is held back."""

    restore: Restore | None = None
    start_service: bool = True
    mismatch: str | None = None
    waiting: tuple[ConditionReason, str] | None = None


def _describe(embedder: dict[str, Any]) -> str:
    model = f" model {embedder['model']}" if embedder.get("model") else ""
    return f"{embedder.get('provider')}{model}, {embedder.get('dimensions')} dimensions"


def plan_restore(
    spec: MemoryStoreSpec, backup: dict[str, Any] | None, restored: bool
) -> RestorePlan:
    """Decide a restore from spec.restore, the MemoryStoreBackup it names (None: missing)
    and whether the store already reported Restored.

    Once restored the store runs whatever happens to the backup; the init container stays
    while the backup exists (re-running it on the store it restored is a no-op)."""
    if spec.restore is None:
        return RestorePlan()
    name = spec.restore.from_backup
    status = (backup or {}).get("status") or {}
    usable = (
        backup is not None
        and status.get("phase") == BackupPhase.SUCCEEDED
        and status.get("claimName")
        and status.get("path")
    )
    if restored:
        if usable:
            return RestorePlan(restore=Restore(claim=status["claimName"], path=status["path"]))
        return RestorePlan()
    if backup is None:
        return RestorePlan(
            start_service=False,
            waiting=(
                R.BACKUP_NOT_FOUND,
                f"MemoryStoreBackup {name} (spec.restore.fromBackup) does not exist; the "
                "memory service starts once it does and has succeeded",
            ),
        )
    if not usable:
        phase = status.get("phase") or "Pending"
        return RestorePlan(
            start_service=False,
            waiting=(
                R.BACKUP_NOT_READY,
                f"MemoryStoreBackup {name} (spec.restore.fromBackup) is {phase}, not "
                "Succeeded; the memory service starts once it has succeeded",
            ),
        )
    recorded = status.get("embedder") or {}
    wanted = spec.embedder.identity()
    found = {
        "provider": recorded.get("provider"),
        "model": recorded.get("model") or None,
        "dimensions": recorded.get("dimensions"),
    }
    if found != wanted:
        return RestorePlan(
            start_service=False,
            mismatch=(
                f"spec.restore.fromBackup: MemoryStoreBackup {name} was made with embedder "
                f"{_describe(found)}, but spec.embedder is {_describe(wanted)}: vectors of "
                "another model mean nothing here; restore into a store with the backup's "
                "embedder"
            ),
        )
    return RestorePlan(restore=Restore(claim=status["claimName"], path=status["path"]))


# backup_key_source's answer while spec.restore's backup does not exist yet
KEY_WAITS = "wait"


def backup_key_source(spec: MemoryStoreSpec, backup: dict[str, Any] | None) -> str | None:
    """Whose backup key a store's new `<store>-backup-key` Secret takes: None for a new
    random key; the store that took spec.restore's backup (its MemoryStoreBackup's
    spec.store), whose key signed it, so the restore can verify it and the restored store
    signs its own backups alike; KEY_WAITS while that backup does not exist (a key made now
    could not verify it later)."""
    if spec.restore is None:
        return None
    if backup is None:
        return KEY_WAITS
    store = (backup.get("spec") or {}).get("store")
    return store if isinstance(store, str) and store else None


def restore_failure(pods: Iterable[dict[str, Any]], container: str) -> str | None:
    """The termination message of a failed restore init container in the service's pods."""
    for pod in pods:
        for init in (pod.get("status") or {}).get("initContainerStatuses") or []:
            if init.get("name") != container:
                continue
            for state in ("state", "lastState"):
                done = (init.get(state) or {}).get("terminated") or {}
                if done and done.get("exitCode", 0) != 0:
                    text = (done.get("message") or done.get("reason") or "").strip()
                    pod_name = (pod.get("metadata") or {}).get("name", "")
                    return (
                        f"the restore init container of pod {pod_name} failed (exit code "
                        f"{done.get('exitCode')}): {text[-1000:] or 'no message'}"
                    )
    return None


# --- a backup's service, and what it said ---------------------------------------------------------


def service_state(deployment: dict[str, Any] | None, claim: str) -> str | None:
    """None when the store's service is rolled out with `claim` at /backups and ready;
    otherwise what it is waiting for."""
    if deployment is None:
        return "the memory service's Deployment does not exist yet"
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    volumes = {
        v.get("name"): (v.get("persistentVolumeClaim") or {}).get("claimName")
        for v in pod.get("volumes") or []
    }
    mounted = any(
        m.get("mountPath") == BACKUP_DIR and volumes.get(m.get("name")) == claim
        for c in pod.get("containers") or []
        for m in c.get("volumeMounts") or []
    )
    name = (deployment.get("metadata") or {}).get("name")
    if not mounted:
        return f"Deployment {name} does not mount PersistentVolumeClaim {claim} at {BACKUP_DIR} yet"
    ready, _, message = workload_state(Workload("Deployment", str(name), deployment))
    return None if ready else message


def _manifest_time(text: Any) -> dt.datetime:
    """The manifest's ISO 8601 time (microseconds, +00:00), or now when absent or unreadable:
    status times are all RFC 3339 seconds in UTC."""
    try:
        when = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return dt.datetime.now(dt.UTC)
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def manifest_status(manifest: dict[str, Any], claim: str) -> dict[str, Any]:
    """A Succeeded status from the service's backup manifest."""
    embedder = manifest.get("embedder") or {}
    return {
        "phase": str(BackupPhase.SUCCEEDED),
        "finishedAt": format_time(_manifest_time(manifest.get("finished_at"))),
        "memories": manifest.get("memories"),
        "historyEvents": manifest.get("history_events"),
        "sizeBytes": manifest.get("bytes"),
        "claimName": claim,
        "path": manifest.get("path"),
        "collection": manifest.get("collection"),
        "embedder": {
            "provider": embedder.get("provider"),
            "model": embedder.get("model"),
            "dimensions": embedder.get("dimensions"),
        },
        "message": None,
        "error": None,
    }
