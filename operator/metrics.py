"""Prometheus metrics of the operator: what was reconciled, how long it took, what failed,
and per store what only the operator knows (Ready, the lasting record of its backups).

Per-store series carry `namespace` and `store` (the operator's ServiceMonitor keeps them with
`honorLabels`); `forget_stores` drops the series of stores that no longer exist, so a deleted
store never alerts. docs/operations/monitoring.md lists every metric.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "API_WRITES",
    "BACKUPS",
    "BACKUP_LAST_SUCCESS",
    "DURATION",
    "IN_FLIGHT",
    "KEY_CHANGES",
    "QUEUED",
    "RECONCILES",
    "STORE_READY",
    "STORE_SUSPENDED",
    "forget_stores",
    "record_backup_success",
]

RECONCILES = Counter(
    "memorystore_operator_reconciles_total",
    "Reconciliations by outcome (applied, invalid_spec, error).",
    ["outcome"],
)
DURATION = Histogram(
    "memorystore_operator_reconcile_seconds",
    "Time to build, apply and observe one MemoryStore.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
QUEUED = Gauge(
    "memorystore_operator_reconciles_queued",
    "Stores with a reconcile asked for and not started yet (waiting for the store's own "
    "reconcile to end or for one of the concurrent slots).",
)
IN_FLIGHT = Gauge(
    "memorystore_operator_reconciles_in_flight",
    "Reconciles running now (at most the operator's concurrency).",
)
KEY_CHANGES = Counter(
    "memorystore_operator_service_key_changes_total",
    "Service-key changes by kind (Seeded, Rotated, Expired, Recreated); never a key.",
    ["change"],
)
API_WRITES = Counter(
    "memorystore_operator_api_writes_total",
    "Writes to the API server by the reconcile loop: children applied, statuses patched.",
    ["what"],
)
STORE_READY = Gauge(
    "memorystore_operator_store_ready",
    "1 when the store's Ready condition is True, else 0 (set by each reconcile).",
    ["namespace", "store"],
)
STORE_SUSPENDED = Gauge(
    "memorystore_operator_store_suspended",
    "1 while the store's spec.suspend is true (not Ready by design: no alert), else 0.",
    ["namespace", "store"],
)
BACKUPS = Counter(
    "memorystore_operator_backups_total",
    "MemoryStoreBackups this operator process finished, by outcome (succeeded, failed).",
    ["namespace", "store", "outcome"],
)
BACKUP_LAST_SUCCESS = Gauge(
    "memorystore_operator_backup_last_success_timestamp_seconds",
    "When the store's newest Succeeded MemoryStoreBackup finished (seconds since the epoch): "
    "from the backups' status, so it outlives operator restarts (kopf resumes every backup).",
    ["namespace", "store"],
)
_PER_STORE = (STORE_READY, STORE_SUSPENDED, BACKUP_LAST_SUCCESS)
_newest_success: dict[tuple[str, str], float] = {}


def record_backup_success(namespace: str, store: str, finished: float) -> None:
    """Keep the newest success: backups are resumed in no particular order."""
    key = (namespace, store)
    if finished > _newest_success.get(key, 0.0):
        _newest_success[key] = finished
        BACKUP_LAST_SUCCESS.labels(namespace, store).set(finished)


def forget_stores(namespace: str | None, existing: Iterable[tuple[str, str]]) -> None:
    """Drop the per-store series of stores (of `namespace`; None: all) not in `existing`."""
    keep = set(existing)
    for metric in _PER_STORE:
        for labels in list(_labelled(metric)):
            if (namespace is None or labels[0] == namespace) and labels not in keep:
                metric.remove(*labels)
                _newest_success.pop(labels, None)


def _labelled(metric: Gauge) -> Iterable[tuple[str, str]]:
    for family in metric.collect():
        for sample in family.samples:
            yield sample.labels["namespace"], sample.labels["store"]
