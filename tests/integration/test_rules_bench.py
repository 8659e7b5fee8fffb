"""`memorystore bench rules` runs small through the CLI and reports every measure per language
(figures are printed, not asserted: a wall-clock bound fails on a busy machine)."""

from __future__ import annotations

import json
import subprocess
import sys

from memorystore_dev.bench.rules import FIELDS, LANGUAGES, table


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "memorystore", "bench", "rules", "--calls", "5", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_json_report_has_a_row_per_measure_and_language():
    result = bench("--rounds", "1", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["calls"], report["rounds"]) == (5, 1)
    rows = report["rows"]
    assert [(r["measure"], r["language"]) for r in rows] == [
        (measure, language)
        for language in LANGUAGES
        for measure in ("dedup pair", "retired_by, 10 candidates")
    ]
    for row in rows:
        assert tuple(row) == FIELDS
        assert row["calls"] == 5
        assert row["cached_us"] >= 0 and row["uncached_us"] > 0


def test_the_table_prints_the_same_rows():
    result = bench("--rounds", "2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("5 calls per figure, best of 2 rounds")
    assert lines[1].split() == ["measure", "language", "cached", "µs", "uncached", "µs", "calls"]
    assert len(lines) == 2 + 2 * len(LANGUAGES)
    row = {"measure": "dedup pair", "language": "en", "cached_us": 1.0, "uncached_us": 2.0}
    assert table([{**row, "calls": 5}]).splitlines()[1].split() == [
        "dedup", "pair", "en", "1.0", "2.0", "5",
    ]  # fmt: skip


def test_bad_counts_are_refused():
    result = bench("--rounds", "0")
    assert result.returncode == 2
    assert "must be at least 1" in result.stderr
