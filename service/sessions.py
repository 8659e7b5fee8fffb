"""The session journal: a session's exchanges, kept until the session is consolidated.

With session capture the agent side sends each completed exchange here instead of storing it
as memory; when the session ends its pending exchanges are consolidated into memory
(`consolidation.py`) and marked, in the same order, so an end event that repeats finds nothing
left to do. Kept in its own SQLite file (WAL, busy timeout) beside the idempotency records:
it survives a restart of the service and of the agent pod, so the idle sweep still ends a
session whose agent went away.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorystore.config import ServiceConfig
from memorystore.service.engine import EntityIds
from memorystore.service.local_db import open_local


def journal_path(cfg: ServiceConfig) -> Path:
    """Where the journal lives: the service opens it, backups copy and restore it."""
    return cfg.path_in_data_dir(None, "sessions.db")


_SCHEMA = """
CREATE TABLE IF NOT EXISTS exchanges (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    session TEXT NOT NULL,
    messages TEXT NOT NULL,
    metadata TEXT NOT NULL,
    saved INTEGER NOT NULL,
    raw INTEGER NOT NULL,
    created REAL NOT NULL,
    consolidated REAL
);
CREATE INDEX IF NOT EXISTS exchanges_pending ON exchanges (consolidated, scope, session, seq);
"""


@dataclass(frozen=True)
class Exchange:
    seq: int
    messages: list[dict[str, Any]]
    metadata: dict[str, Any]
    saved: bool  # the agent saved memories itself during this exchange (add_memory)
    raw: bool  # its user statements may be stored as written (false: only extracted facts)


def scope_key(scope: EntityIds) -> str:
    return json.dumps(scope.filters(), sort_keys=True, ensure_ascii=False)


def scope_of(key: str) -> EntityIds:
    return EntityIds(**json.loads(key))


class SessionJournal:
    def __init__(self, path: Path) -> None:
        self._db = open_local(path, _SCHEMA)
        self._mutex = threading.Lock()

    def append(
        self,
        scope: EntityIds,
        session: str,
        messages: list[dict[str, Any]],
        metadata: dict[str, Any],
        *,
        saved: bool,
        raw: bool,
    ) -> int:
        with self._mutex:
            cursor = self._db.execute(
                "INSERT INTO exchanges (scope, session, messages, metadata, saved, raw, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    scope_key(scope),
                    session,
                    json.dumps(messages, ensure_ascii=False),
                    json.dumps(metadata, ensure_ascii=False),
                    int(saved),
                    int(raw),
                    time.time(),
                ),
            )
            return int(cursor.lastrowid or 0)

    def pending(self, scope: EntityIds, session: str) -> list[Exchange]:
        with self._mutex:
            rows = self._db.execute(
                "SELECT seq, messages, metadata, saved, raw FROM exchanges WHERE "
                "consolidated IS NULL AND scope=? AND session=? ORDER BY seq",
                (scope_key(scope), session),
            ).fetchall()
        return [
            Exchange(seq, json.loads(messages), json.loads(metadata), bool(saved), bool(raw))
            for seq, messages, metadata, saved, raw in rows
        ]

    def mark(self, seqs: list[int]) -> None:
        """Record these exchanges as consolidated (one transaction)."""
        if not seqs:
            return
        now = time.time()
        with self._mutex:
            self._db.execute("BEGIN")
            self._db.executemany(
                "UPDATE exchanges SET consolidated=? WHERE seq=?", [(now, s) for s in seqs]
            )
            self._db.execute("COMMIT")

    def idle(self, idle_seconds: float, now: float | None = None) -> list[tuple[EntityIds, str]]:
        """Sessions with pending exchanges and none newer than `idle_seconds`."""
        cutoff = (time.time() if now is None else now) - idle_seconds
        with self._mutex:
            rows = self._db.execute(
                "SELECT scope, session FROM exchanges WHERE consolidated IS NULL "
                "GROUP BY scope, session HAVING MAX(created) <= ? ORDER BY MIN(seq)",
                (cutoff,),
            ).fetchall()
        return [(scope_of(scope), session) for scope, session in rows]

    def forget(self, scope: EntityIds) -> None:
        """Drop the journal of every session inside `scope` (the same rule as the stores':
        a user's scope holds that user's agents and runs), after its memories were deleted:
        nothing of it may come back through a later consolidation."""
        with self._mutex:
            keys = [k for (k,) in self._db.execute("SELECT DISTINCT scope FROM exchanges")]
            doomed = [(k,) for k in keys if scope.contains(json.loads(k))]
            self._db.executemany("DELETE FROM exchanges WHERE scope=?", doomed)

    def prune(self, older_than_seconds: float) -> None:
        """Consolidated exchanges are kept a while for inspection, then dropped."""
        with self._mutex:
            self._db.execute(
                "DELETE FROM exchanges WHERE consolidated IS NOT NULL AND consolidated < ?",
                (time.time() - older_than_seconds,),
            )

    def close(self) -> None:
        with self._mutex:
            self._db.close()
