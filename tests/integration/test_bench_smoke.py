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
            "--clients",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,  # 20 s on an idle 2-core machine: room for a busy one
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (size,) = report["sizes"]
    assert size["size"] == 60
    for path in ("http", "direct"):
        for op in ("add", "search"):
            stats = size[path][op]
            assert 0 < stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"]
    concurrent = report["concurrent"]
    assert concurrent["sent"] == concurrent["ok"] == concurrent["stored"] == 200
