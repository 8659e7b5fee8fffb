"""The operator's per-store series: the newest backup success kept whatever the order backups
are resumed in, and a deleted store's series dropped so it never alerts."""

from __future__ import annotations

from prometheus_client import REGISTRY

from memorystore.operator import metrics


def _value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_the_newest_success_is_kept_in_any_order():
    metrics.record_backup_success("ns-m1", "s", 200.0)
    metrics.record_backup_success("ns-m1", "s", 100.0)  # an older backup resumed later
    name = "memorystore_operator_backup_last_success_timestamp_seconds"
    assert _value(name, namespace="ns-m1", store="s") == 200.0
    metrics.record_backup_success("ns-m1", "s", 300.0)
    assert _value(name, namespace="ns-m1", store="s") == 300.0


def test_a_gone_stores_series_are_dropped_and_only_in_the_namespace_listed():
    for store in ("kept", "gone"):
        metrics.STORE_READY.labels("ns-m2", store).set(0)
        metrics.STORE_SUSPENDED.labels("ns-m2", store).set(1)
        metrics.record_backup_success("ns-m2", store, 5.0)
    metrics.STORE_READY.labels("ns-m3", "other").set(1)
    metrics.forget_stores("ns-m2", [("ns-m2", "kept")])
    ready = "memorystore_operator_store_ready"
    assert _value(ready, namespace="ns-m2", store="kept") == 0.0
    assert _value(ready, namespace="ns-m2", store="gone") is None
    assert _value("memorystore_operator_store_suspended", namespace="ns-m2", store="gone") is None
    last = "memorystore_operator_backup_last_success_timestamp_seconds"
    assert _value(last, namespace="ns-m2", store="gone") is None
    assert _value(ready, namespace="ns-m3", store="other") == 1.0  # another namespace: kept
    metrics.forget_stores(None, [])  # every namespace (cluster-wide): all gone
    assert _value(ready, namespace="ns-m3", store="other") is None
    # a store back after being forgotten starts afresh (the newest success is not remembered)
    metrics.record_backup_success("ns-m2", "gone", 1.0)
    assert _value(last, namespace="ns-m2", store="gone") == 1.0
