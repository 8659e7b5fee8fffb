"""`memorystore bench backup` at 10k memories, as the issue's test asks: a store of 10k
memories backed up while it serves and restored into a new store; its table row is printed
(time and size against a plain copy of the files) and its checks must hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore_dev.bench.backup import measure, table

pytestmark = pytest.mark.timeout(600)


def test_ten_thousand_memories_back_up_and_restore_with_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))
    row = measure(10_000, tmp_path)
    print("\n" + table([row]))
    assert row["counts_equal"], row
    assert row["backed_up"] == 10_000 and row["history_events"] == 10_000
    assert row["same_answers"] == "20/20", row
    assert row["backup_mb"] > 0 and row["restore_s"] > 0
