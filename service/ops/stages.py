"""Where a request's time goes, by stage: embed, keyword, dense, gate, cues, fusion, dedup,
store, history. Exported as two counters per stage (`memorystore_stage_seconds_total`,
`memorystore_stage_calls_total`), so a scrape or a bench (`bench service --profile`) reads
the mean cost of each stage over any window from two readings.

Process-wide (the embedders and stores are shared per process too): one `perf_counter`
pair and a locked add per stage, about a microsecond.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

__all__ = ["STAGES", "StageCollector", "stage", "totals"]

# every stage the service times, in the order a request meets them
STAGES = ("embed", "keyword", "dense", "gate", "cues", "fusion", "dedup", "store", "history")

_lock = threading.Lock()
_seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)
_calls: dict[str, int] = dict.fromkeys(STAGES, 0)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the body as stage `name` (one of STAGES)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        with _lock:
            _seconds[name] += elapsed
            _calls[name] += 1


def totals() -> dict[str, tuple[float, int]]:
    """Each stage's (seconds, calls) since the process started."""
    with _lock:
        return {name: (_seconds[name], _calls[name]) for name in STAGES}


class StageCollector(Collector):
    """The stage counters, read at scrape time."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        seconds = CounterMetricFamily(
            "memorystore_stage_seconds", "Time spent in each stage of requests.", labels=["stage"]
        )
        calls = CounterMetricFamily(
            "memorystore_stage_calls", "Times each stage of requests ran.", labels=["stage"]
        )
        for name, (spent, count) in totals().items():
            seconds.add_metric([name], spent)
            calls.add_metric([name], count)
        yield seconds
        yield calls
