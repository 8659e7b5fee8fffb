"""The loop that keeps the embedded engine's HNSW graph built while the service runs.

The engine indexes nothing by itself (stores/embedded.py, "Index"): without this loop every
search scans every point of its user. Every `every_s` seconds each open embedded store is
asked whether enough points wait outside the graph (`index_after`); if so, its graph is
built in a child process and swapped in, one store at a time. A failed build is logged and
counted, and retried after a back-off that doubles with each failure (up to an hour: a
child killed for memory must not be restarted every look); the live shard is never touched
by a failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memorystore.service.stores.embedded import EdgeVectorStore

__all__ = ["CHECK_EVERY_S", "GraphBuilds", "keep_indexed"]

log = logging.getLogger("memorystore.service")

CHECK_EVERY_S = 10.0  # a look is one count per store: cheap
RETRY_MAX_S = 3600.0  # the longest wait after failed builds


class GraphBuilds:
    """The builds' metrics (how many ended how, the time they took, the points waiting
    outside the graph, read at scrape time from `stores`) and their retry schedule."""

    def __init__(
        self, registry: CollectorRegistry, stores: Callable[[], list[EdgeVectorStore]]
    ) -> None:
        self.total = Counter(
            "memorystore_vector_index_builds_total",
            "Background HNSW graph builds of the embedded engine, by outcome "
            "(built, skipped: the shard was replaced meanwhile, failed).",
            ["outcome"],
            registry=registry,
        )
        self.seconds = Counter(
            "memorystore_vector_index_build_seconds_total",
            "Time spent building the embedded engine's HNSW graph (child process included).",
            registry=registry,
        )
        registry.register(_Unindexed(stores))
        self._failures: dict[str, int] = {}  # by store path: failed builds in a row
        self._retry_at: dict[str, float] = {}  # by store path: no build before (monotonic)

    def may_build(self, store: EdgeVectorStore) -> bool:
        return time.monotonic() >= self._retry_at.get(str(store.path), 0.0)

    def failed(self, store: EdgeVectorStore) -> float:
        """Count a failure; the seconds until the next try."""
        key = str(store.path)
        self._failures[key] = failures = self._failures.get(key, 0) + 1
        wait = min(RETRY_MAX_S, CHECK_EVERY_S * 2.0**failures)
        self._retry_at[key] = time.monotonic() + wait
        self.total.labels("failed").inc()
        return wait

    def succeeded(self, store: EdgeVectorStore) -> None:
        self._failures.pop(str(store.path), None)
        self._retry_at.pop(str(store.path), None)


class _Unindexed(Collector):
    def __init__(self, stores: Callable[[], list[EdgeVectorStore]]) -> None:
        self._stores = stores

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stores = self._stores()
        if not stores:  # not the embedded engine: no such gauge
            return
        gauge = GaugeMetricFamily(
            "memorystore_vector_unindexed_points",
            "Points of the embedded engine outside its HNSW graph (searches scan them).",
        )
        try:
            gauge.add_metric([], float(sum(store.unindexed() for store in stores)))
        except Exception:  # a scrape must not fail because the store is closing
            return
        yield gauge


async def keep_indexed(
    stores: Callable[[], list[EdgeVectorStore]],
    builds: GraphBuilds,
    every_s: float = CHECK_EVERY_S,
) -> None:
    """Build each store's graph when it is due, for as long as the service runs."""
    while True:
        await asyncio.sleep(every_s)
        for store in stores():
            await build_if_due(store, builds)


async def build_if_due(store: EdgeVectorStore, builds: GraphBuilds) -> bool:
    """One store's look: build its graph if due; True when a build was swapped in."""
    if not builds.may_build(store):
        return False
    try:
        if not await asyncio.to_thread(store.index_due):
            return False
        waiting = await asyncio.to_thread(store.unindexed)
        log.info("building the vector index of %s (%d points outside it)", store.path, waiting)
        start = time.monotonic()
        built = await asyncio.to_thread(store.build_index)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        wait = builds.failed(store)
        log.warning("vector index build failed (%s); retrying in %.0f s", exc, wait)
        return False
    took = time.monotonic() - start
    builds.succeeded(store)
    builds.seconds.inc(took)
    builds.total.labels("built" if built else "skipped").inc()
    if built:
        log.info("vector index of %s built in %.1f s", store.path, took)
    return built
