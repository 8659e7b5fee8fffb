"""The engine owns its PostgreSQL Databases: it opens one per configured database, hands it
to what it builds and closes it. No database is reached here (nothing connects before the
first operation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memorystore.config import ServiceConfig
from memorystore.service.engine.core import MemoryEngine

HISTORY_DSN = "postgresql://u:secret@127.0.0.1:1/history"
VECTORS_DSN = "postgresql://u:secret@127.0.0.1:1/vectors"


def engine(tmp_path: Path, vectors: dict[str, Any]) -> MemoryEngine:
    return MemoryEngine(
        ServiceConfig.model_validate(
            {
                "dataDir": str(tmp_path),
                "apiKey": {"env": "UNUSED"},
                "history": {"postgres": {"dsn": {"env": "HISTORY_DSN"}}},
                "vectorStore": {"postgres": vectors},
            }
        )
    )


@pytest.fixture(autouse=True)
def dsns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HISTORY_DSN", HISTORY_DSN)
    monkeypatch.setenv("VECTORS_DSN", VECTORS_DSN)
    monkeypatch.setenv("SAME_DSN", HISTORY_DSN)


def test_history_and_vectors_in_one_database_share_one_database_object(tmp_path):
    made = engine(tmp_path, {})
    assert made.databases() == [made.database]
    assert made.store.database is made.database
    made.close()
    assert made.database is not None and made.database.pool.closed


@pytest.mark.parametrize(("env", "count"), [("VECTORS_DSN", 2), ("SAME_DSN", 1)])
def test_a_database_of_its_own_for_the_vectors_is_one_more_unless_it_is_the_same(
    tmp_path, env, count
):
    made = engine(tmp_path, {"database": {"dsn": {"env": env}}})
    databases = made.databases()
    assert len(databases) == count and databases[0] is made.database
    assert made.store.database is databases[-1]
    made.close()
    assert all(database.pool.closed for database in databases)
