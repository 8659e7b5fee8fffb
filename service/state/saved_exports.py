"""Stored memory exports: `POST /v1/exports/` builds one, `POST /v1/exports/get/` reads it.

Two stores with the same methods and results: `ExportStore` in its own SQLite file,
`<dataDir>/exports.db` (WAL, busy timeout, one connection under a lock), like the idempotency
records and the session journal; `PgExportStore` in the table `memorystore_exports` of
`history.postgres`, shared by the replicas (schema: `MIGRATIONS`). An export is kept
`RETENTION_S` (7 days; pruned whenever one is created), keyed by its id, with its scope and
the scopes of the memories it holds, so deleting a user's memories also deletes every
stored export that holds any of them (right to erasure, `forget`, `forget_erased`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, ClassVar

from memorystore.scope import EntityIds, scope_key
from memorystore.service.state import postgres
from memorystore.service.state.erasures import Forgotten
from memorystore.service.state.tables import LocalTables, PgTables, Tables, checked_key, storable

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

# The document as text, not jsonb: jsonb refuses "\u0000" and reorders keys, and `get`
# must return what `put` was given, as the SQLite store does. `seq` orders exports created
# in the same instant (SQLite's rowid).
MIGRATIONS: list[postgres.Migration] = [
    postgres.Migration(
        "exports",
        1,
        "stored exports",
        """
CREATE TABLE memorystore_exports (
    id text PRIMARY KEY,
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    scope text NOT NULL,
    members text NOT NULL,
    document text NOT NULL,
    created double precision NOT NULL
);
CREATE INDEX memorystore_exports_by_scope ON memorystore_exports (scope, created, seq);
CREATE INDEX memorystore_exports_created ON memorystore_exports (created);
""",
    )
]


class _Exports(Tables):
    """The store over either database; `_table` names its table, `_order` the column that
    orders exports created in the same instant."""

    _table: ClassVar[str]
    _order: ClassVar[str]
    retention_s: float

    def put(self, scope: EntityIds, document: dict[str, Any]) -> None:
        """Store one export and drop the expired ones.

        `members`: the distinct scopes of the memories it holds (a user's export also holds
        memories of that user's agents and runs), read by `forget`."""
        checked_key(document["id"], "id")
        members = sorted({scope_key(_ids(m)) for m in document["memories"]})
        now = time.time()
        with self._transaction() as statements:
            statements.rows(
                f"INSERT INTO {self._table} (id, scope, members, document, created) "
                "VALUES (?,?,?,?,?)",
                (
                    document["id"],
                    scope.key(),
                    json.dumps(members, ensure_ascii=False),
                    json.dumps(document, ensure_ascii=False),
                    now,
                ),
            )
            statements.rows(
                f"DELETE FROM {self._table} WHERE created < ?", (now - self.retention_s,)
            )

    def get(self, export_id: str) -> tuple[EntityIds, dict[str, Any]] | None:
        """The export with this id and its scope, or None (unknown or expired)."""
        if not storable(export_id):
            return None  # no export has it (put refuses it)
        rows = self._rows(
            f"SELECT scope, document FROM {self._table} WHERE id=? AND created>=?",
            (export_id, time.time() - self.retention_s),
        )
        if not rows:
            return None
        scope, document = rows[0]
        return EntityIds(**json.loads(scope)), json.loads(document)

    def latest(self, scope: EntityIds) -> dict[str, Any] | None:
        """The newest export of exactly this scope (not of a narrower or wider one)."""
        rows = self._rows(
            f"SELECT document FROM {self._table} WHERE scope=? AND created>=? "
            f"ORDER BY created DESC, {self._order} DESC LIMIT 1",
            (scope.key(), time.time() - self.retention_s),
        )
        return json.loads(rows[0][0]) if rows else None

    def forget(self, scope: EntityIds) -> int:
        """Delete every export whose scope lies inside `scope` or that holds a memory of it
        (same rule as the stores' and the session journal's), after `scope`'s memories were
        deleted: no copy of them may outlive the deletion here. Returns how many."""
        with self._transaction() as statements:
            rows = statements.rows(f"SELECT id, scope, members FROM {self._table}")
            doomed = [
                (export_id,)
                for export_id, key, members in rows
                if scope.contains(json.loads(key))
                or any(scope.contains(json.loads(m)) for m in json.loads(members))
            ]
            statements.many(f"DELETE FROM {self._table} WHERE id=?", doomed)
        return len(doomed)

    def forget_erased(self, forgotten: Forgotten) -> int:
        """An erasure's part here: delete every export made before it that holds an erased
        memory (by its scope or one of its members' for a scope erasure; by the memory's id
        in the document for an erasure of single memories). Returns how many."""
        erased = forgotten.erased
        with self._transaction() as statements:
            if forgotten.whole_scope:
                rows = statements.rows(f"SELECT id, scope, members, created FROM {self._table}")
                doomed = [
                    (export_id,)
                    for export_id, key, members, created in rows
                    if any(
                        erased.scope_erased(json.loads(k), float(created))
                        for k in (key, *json.loads(members))
                    )
                ]
            else:
                found = [
                    row
                    for memory_id in sorted(forgotten.ids)
                    for row in statements.rows(
                        f"SELECT id, document FROM {self._table} WHERE document LIKE ? ESCAPE ?",
                        (f"%{_like(json.dumps(memory_id, ensure_ascii=False))}%", "\\"),
                    )
                ]
                doomed = list(
                    {
                        (export_id,): None
                        for export_id, document in found
                        if forgotten.ids & {m.get("id") for m in json.loads(document)["memories"]}
                    }
                )
            statements.many(f"DELETE FROM {self._table} WHERE id=?", doomed)
        return len(doomed)


class ExportStore(LocalTables, _Exports):
    """Exports in their own SQLite file (one replica)."""

    _table = "exports"
    _order = "rowid"

    def __init__(self, path: Path, retention_s: float = RETENTION_S) -> None:
        super().__init__(path, _SCHEMA)
        self.retention_s = retention_s


class PgExportStore(PgTables, _Exports):
    """Exports in `history.postgres`, shared by the replicas (after `MIGRATIONS`)."""

    _table = "memorystore_exports"
    _order = "seq"

    def __init__(self, database: postgres.Database, retention_s: float = RETENTION_S) -> None:
        super().__init__(database)
        self.retention_s = retention_s


def _like(text: str) -> str:
    """`text` as the literal part of a LIKE pattern whose escape character is a backslash."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _ids(memory: dict[str, Any]) -> dict[str, Any]:
    return {k: memory[k] for k in ("user_id", "agent_id", "run_id") if memory.get(k) is not None}
