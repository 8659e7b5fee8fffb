"""Prometheus metrics and the ASGI layer that feeds them (request size and ambiguity are
checked by `request_guard.py`).

Plain ASGI rather than Starlette's BaseHTTPMiddleware: it adds no task per request,
which keeps the service within a few percent of calling mem0 directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cryptography import x509
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memorystore.service.ops.stages import StageCollector
from memorystore.service.stores.embedded import EdgeVectorStore
from memorystore.service.stores.graph_builds import GraphBuilds

__all__ = ["Metrics", "MetricsMiddleware"]

Scope = dict[str, Any]
ASGIApp = Callable[..., Any]

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    """The service's Prometheus registry (docs/operations/monitoring.md lists every metric;
    tests/integration/test_monitoring.py checks the dashboard and alerts name only these)."""

    def __init__(
        self,
        count_memories: Callable[[], int],
        embedded_stores: Callable[[], list[EdgeVectorStore]] = list,
        backlog: Callable[[], tuple[int, float | None]] = lambda: (0, None),
        cert_file: str | None = None,
        reindex: Callable[[], tuple[int, int] | None] = lambda: None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "memorystore_request_seconds",
            "HTTP request latency by route.",
            ["method", "route", "status"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "memorystore_errors_total",
            "Requests that failed, by route and kind (client or server).",
            ["route", "kind"],
            registry=self.registry,
        )
        self.registry.register(_MemoryCount(count_memories))
        self.registry.register(StageCollector())
        self.graph_builds = GraphBuilds(self.registry, embedded_stores)
        self.registry.register(_Backlog(backlog))
        self.backups = Counter(
            "memorystore_backups_total",
            "Backups asked of this process (POST /v1/backups/), by outcome: ok, failed, "
            "refused (a name taken, no backup target).",
            ["outcome"],
            registry=self.registry,
        )
        self.registry.register(_CertificateExpiry(cert_file))
        self.registry.register(_Reindex(reindex))
        self.last_backup = Gauge(
            "memorystore_backup_last_success_timestamp_seconds",
            "When this process last finished a backup (seconds since the epoch); 0 until "
            "it has (a restart starts again at 0: the operator's backup status is the "
            "lasting record).",
            registry=self.registry,
        )


class _MemoryCount(Collector):
    """Read at scrape time, so the gauge is never stale."""

    def __init__(self, count: Callable[[], int]) -> None:
        self._count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily("memorystore_memories", "Memories stored (all scopes).")
        try:
            gauge.add_metric([], float(self._count()))
        except Exception:  # a scrape must not fail because the store is down; readyz says so
            return
        yield gauge


class _Backlog(Collector):
    """The session journal's backlog, read at scrape time."""

    def __init__(self, backlog: Callable[[], tuple[int, float | None]]) -> None:
        self._backlog = backlog

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            pending, oldest = self._backlog()
        except Exception:  # a scrape must not fail because the database is away
            return
        yield GaugeMetricFamily(
            "memorystore_consolidation_pending_exchanges",
            "Exchanges journalled and not consolidated into memory yet.",
            value=float(pending),
        )
        family = GaugeMetricFamily(
            "memorystore_consolidation_oldest_pending_timestamp_seconds",
            "When the oldest exchange waiting for consolidation was journalled (no sample "
            "while none waits).",
        )
        if oldest is not None:
            family.add_metric([], oldest)
        yield family


class _CertificateExpiry(Collector):
    """When the certificate the service serves expires, read from its file at scrape time (the
    file kubelet refreshes is what new connections get within tls.RELOAD_SECONDS).

    Like every family of this registry it is declared even without a sample (no TLS, or the
    file unreadable mid-rotation), so what /metrics names never depends on the moment."""

    def __init__(self, cert_file: str | None) -> None:
        self._cert_file = cert_file

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "memorystore_tls_certificate_expiry_timestamp_seconds",
            "When the service's TLS certificate expires (its notAfter, seconds since the epoch).",
        )
        if self._cert_file is not None:
            try:
                cert = x509.load_pem_x509_certificate(Path(self._cert_file).read_bytes())
                family.add_metric([], cert.not_valid_after_utc.timestamp())
            except (OSError, ValueError):  # mid-rotation or unreadable: the reloader warns
                pass
        yield family


class _Reindex(Collector):
    """A running or finished re-index's progress (none before the first since start)."""

    def __init__(self, progress: Callable[[], tuple[int, int] | None]) -> None:
        self._progress = progress

    def collect(self) -> Iterator[GaugeMetricFamily]:
        done = GaugeMetricFamily(
            "memorystore_reindex_memories_done",
            "Memories the current (or last) re-index has brought to the index version.",
        )
        pending = GaugeMetricFamily(
            "memorystore_reindex_memories_pending",
            "Memories the current (or last) re-index found behind the index version.",
        )
        progress = self._progress()
        if progress is not None:
            done.add_metric([], float(progress[0]))
            pending.add_metric([], float(progress[1]))
        yield done
        yield pending


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", "unmatched")
            self.metrics.latency.labels(scope["method"], label, str(status)).observe(
                time.perf_counter() - start
            )
            if status >= 400:
                kind = "server" if status >= 500 else "client"
                self.metrics.errors.labels(label, kind).inc()
