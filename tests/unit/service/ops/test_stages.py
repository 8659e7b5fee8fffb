"""Per-stage timings: what the service times is counted per stage and exported at scrape
time, and the bench reads the same page back (memorystore_dev.bench.service)."""

from __future__ import annotations

import time

import pytest
from prometheus_client import generate_latest

from memorystore.service.ops import stages
from memorystore.service.ops.observability import Metrics
from memorystore_dev.bench.service import per_op, stage_totals


def test_a_stage_counts_its_calls_and_time_even_when_its_body_fails():
    before = stages.totals()["gate"]
    with stages.stage("gate"):
        time.sleep(0.002)
    with pytest.raises(RuntimeError), stages.stage("gate"):
        raise RuntimeError("boom")
    seconds, calls = stages.totals()["gate"]
    assert calls == before[1] + 2
    assert seconds - before[0] >= 0.002


def test_an_unknown_stage_is_refused():
    with pytest.raises(KeyError), stages.stage("nap"):
        pass


def test_the_metrics_page_holds_every_stage_and_the_bench_reads_it_back():
    metrics = Metrics(lambda: 0)
    before = stage_totals(generate_latest(metrics.registry).decode())
    assert set(before) == set(stages.STAGES)
    with stages.stage("embed"):
        time.sleep(0.004)
    after = stage_totals(generate_latest(metrics.registry).decode())
    assert after["embed"][1] == before["embed"][1] + 1
    mean = per_op(before, after, ops=2)
    assert set(mean) == {"embed"} and mean["embed"] >= 2.0  # ms per op, over two ops
