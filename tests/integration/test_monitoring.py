"""The dashboard and the alerts name only metrics our processes export.

The memory service's names are read from a real service's /metrics (every family is
declared there even before it has a sample: no TLS, no re-index yet, no backlog); the
operator's from the registry its metrics server serves (`memorystore operator
--metrics-port`: prometheus_client's default registry, with operator/metrics.py imported as
the operator imports it). A name the chart's files use that neither exports fails, naming it.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import memorystore.operator.metrics  # noqa: F401 - registers the operator's metrics
from memorystore.service.ops.runner import ServiceThread, embedded_config
from support.paths import REPO

FILES = REPO / "charts" / "memorystore" / "files"
REFERENCED = re.compile(r"\bmemorystore_[a-z0-9_]+\b")
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("_count", "_sum"),
}


def exported(text: str) -> set[str]:
    """Every series name a scrape of `text` can give: families and their samples' names."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names


def referenced(path: Path) -> set[str]:
    return set(REFERENCED.findall(path.read_text()))


def test_the_dashboard_and_alerts_name_only_exported_metrics(tmp_path: Path):
    with ServiceThread(embedded_config(tmp_path / "data")) as svc:
        service = exported(httpx.get(f"{svc.url}/metrics", timeout=30).text)
    operator = exported(generate_latest(REGISTRY).decode())
    assert "memorystore_tls_certificate_expiry_timestamp_seconds" in service
    assert "memorystore_operator_store_ready" in operator
    for path in (FILES / "alerts.yaml", FILES / "dashboard.json"):
        names = referenced(path)
        assert names, f"{path.name} names no metric of ours"
        unknown = names - service - operator
        assert not unknown, f"{path.name} names metrics nobody exports: {sorted(unknown)}"
