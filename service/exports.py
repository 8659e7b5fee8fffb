"""Stored memory exports: `POST /v1/exports/` builds one, `POST /v1/exports/get/` reads it.

Kept in its own SQLite file, `<dataDir>/exports.db` (WAL, busy timeout, one connection under
a lock), like the idempotency records and the session journal. An export is kept
`RETENTION_S` (7 days; pruned whenever one is created), keyed by its id, with its scope and
the scopes of the memories it holds, so deleting a user's memories also deletes every
stored export that holds any of them (right to erasure, `forget`).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from memorystore.service.engine import EntityIds
from memorystore.service.local_db import open_local

RETENTION_S = 7 * 24 * 3600

_SCHEMA = """
CREATE TABLE IF NOT EXISTS exports (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    members TEXT NOT NULL,
    document TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS exports_by_scope ON exports (scope, created);
"""


def scope_key(ids: dict[str, Any]) -> str:
    return json.dumps(ids, sort_keys=True, ensure_ascii=False)


class ExportStore:
    def __init__(self, path: Path, retention_s: float = RETENTION_S) -> None:
        self._db = open_local(path, _SCHEMA)
        self._mutex = threading.Lock()
        self.retention_s = retention_s

    def put(self, scope: EntityIds, document: dict[str, Any]) -> None:
        """Store one export and drop the expired ones.

        `members`: the distinct scopes of the memories it holds (a user's export also holds
        memories of that user's agents and runs), read by `forget`."""
        members = sorted({scope_key(_ids(m)) for m in document["memories"]})
        now = time.time()
        with self._mutex:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO exports (id, scope, members, document, created) VALUES (?,?,?,?,?)",
                (
                    document["id"],
                    scope_key(scope.filters()),
                    json.dumps(members, ensure_ascii=False),
                    json.dumps(document, ensure_ascii=False),
                    now,
                ),
            )
            self._db.execute("DELETE FROM exports WHERE created < ?", (now - self.retention_s,))
            self._db.execute("COMMIT")

    def get(self, export_id: str) -> tuple[EntityIds, dict[str, Any]] | None:
        """The export with this id and its scope, or None (unknown or expired)."""
        with self._mutex:
            row = self._db.execute(
                "SELECT scope, document FROM exports WHERE id=? AND created>=?",
                (export_id, time.time() - self.retention_s),
            ).fetchone()
        if row is None:
            return None
        return EntityIds(**json.loads(row[0])), json.loads(row[1])

    def latest(self, scope: EntityIds) -> dict[str, Any] | None:
        """The newest export of exactly this scope (not of a narrower or wider one)."""
        with self._mutex:
            row = self._db.execute(
                "SELECT document FROM exports WHERE scope=? AND created>=? "
                "ORDER BY created DESC, rowid DESC LIMIT 1",
                (scope_key(scope.filters()), time.time() - self.retention_s),
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def forget(self, scope: EntityIds) -> int:
        """Delete every export whose scope lies inside `scope` or that holds a memory of it
        (same rule as the stores' and the session journal's), after `scope`'s memories were
        deleted: no copy of them may outlive the deletion here. Returns how many."""
        with self._mutex:
            rows = self._db.execute("SELECT id, scope, members FROM exports").fetchall()
            doomed = [
                (export_id,)
                for export_id, key, members in rows
                if scope.contains(json.loads(key))
                or any(scope.contains(json.loads(m)) for m in json.loads(members))
            ]
            self._db.executemany("DELETE FROM exports WHERE id=?", doomed)
        return len(doomed)

    def close(self) -> None:
        with self._mutex:
            self._db.close()


def _ids(memory: dict[str, Any]) -> dict[str, Any]:
    return {k: memory[k] for k in ("user_id", "agent_id", "run_id") if memory.get(k) is not None}
