"""Prometheus metrics of the operator: what was reconciled, how long it took, what failed."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

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
