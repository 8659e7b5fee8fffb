"""The session journal: a session's exchanges, kept until the session is consolidated.

With session capture the agent side sends each completed exchange here instead of storing it
as memory; when the session ends its pending exchanges are consolidated into memory
(`consolidation.py`) and marked, in the same order, so an end event that repeats finds nothing
left to do. It survives a restart of the service and of the agent pod, so the idle sweep still
ends a session whose agent went away. Two stores with the same methods and results:

- `SessionJournal`: its own SQLite file (WAL, busy timeout) beside the idempotency records;
- `PgSessionJournal`: the table `memorystore_exchanges` in `history.postgres`, shared by every
  replica (schema: `MIGRATIONS`).

The journal logic (`_Journal`) is written once over `tables.LocalTables` and
`tables.PgTables`.

An erasure (`forget_erased`) deletes what the journal holds of it: every exchange of an
erased scope journalled before the erasure; for single memories, the exchanges of their
scope that hold their text, and the consolidated exchanges of the session they came from
(kept for inspection only), so no later consolidation writes an erased memory again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from memorystore.config import ServiceConfig
from memorystore.scope import IDENTITY_KEYS, EntityIds, scope_key
from memorystore.service.state import postgres
from memorystore.service.state.erasures import Forgotten
from memorystore.service.state.tables import (
    LocalTables,
    PgTables,
    Statements,
    Tables,
    checked_key,
    storable,
)


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

# JSON kept as text, not jsonb: jsonb refuses "\u0000" and NaN and reorders keys, and the
# journal must hand back exactly what it was given (as the SQLite journal does).
MIGRATIONS: list[postgres.Migration] = [
    postgres.Migration(
        "sessions",
        1,
        "session journal",
        """
CREATE TABLE memorystore_exchanges (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope text NOT NULL,
    session text NOT NULL,
    messages text NOT NULL,
    metadata text NOT NULL,
    saved boolean NOT NULL,
    raw boolean NOT NULL,
    created double precision NOT NULL,
    consolidated double precision
);
-- pending (one session, by seq) and idle (per session: newest created, oldest seq)
CREATE INDEX memorystore_exchanges_pending ON memorystore_exchanges (scope, session, seq)
    INCLUDE (created) WHERE consolidated IS NULL;
-- forget (distinct scopes, delete by scope) and prune (consolidated long ago)
CREATE INDEX memorystore_exchanges_scope ON memorystore_exchanges (scope);
CREATE INDEX memorystore_exchanges_consolidated ON memorystore_exchanges (consolidated)
    WHERE consolidated IS NOT NULL;
""",
    )
]


@dataclass(frozen=True)
class Exchange:
    seq: int
    messages: list[dict[str, Any]]
    metadata: dict[str, Any]
    saved: bool  # the agent saved memories itself during this exchange (add_memory)
    raw: bool  # its user statements may be stored as written (false: only extracted facts)
    # when it was journalled (the database's clock): with `seq`, it names the exchange in
    # this store alone (consolidation derives memory ids from both)
    created: float = field(default=0.0, compare=False, repr=False)


def scope_of(key: str) -> EntityIds:
    return EntityIds(**json.loads(key))


# --- the journal ---------------------------------------------------------------------------


def _exchange(row: tuple[Any, ...]) -> Exchange:
    seq, messages, metadata, saved, raw, created = row
    return Exchange(
        int(seq), json.loads(messages), json.loads(metadata), bool(saved), bool(raw), created
    )


class _Journal(Tables):
    """The journal over either database; `_table` names its table."""

    _table: ClassVar[str]

    def _order_appends(self, statements: Statements, key: str, session: str) -> None:
        """Make appends to one session commit in seq order (SQLite: writers are serial)."""

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
        """Journal one exchange; its seq (distinct and rising, across processes too)."""
        key = scope.key()
        checked_key(session, "session")
        row = (
            key,
            session,
            json.dumps(messages, ensure_ascii=False),
            json.dumps(metadata, ensure_ascii=False),
            bool(saved),
            bool(raw),
        )
        with self._transaction() as statements:
            self._order_appends(statements, key, session)
            ((seq,),) = statements.rows(
                f"INSERT INTO {self._table} "
                "(scope, session, messages, metadata, saved, raw, created)"
                f" VALUES (?, ?, ?, ?, ?, ?, {self.CLOCK}) RETURNING seq",
                row,
            )
        return int(seq)

    def pending(self, scope: EntityIds, session: str) -> list[Exchange]:
        """The session's exchanges not consolidated yet, oldest first."""
        if not storable(session):
            return []  # never journalled (append refuses it)
        rows = self._rows(
            f"SELECT seq, messages, metadata, saved, raw, created FROM {self._table} WHERE "
            "consolidated IS NULL AND scope=? AND session=? ORDER BY seq",
            (scope.key(), session),
        )
        return [_exchange(row) for row in rows]

    def backlog(self) -> tuple[int, float | None]:
        """Exchanges journalled and not consolidated yet, and when the oldest of them was
        journalled (seconds since the epoch; None when there is none): what a session-end
        sweep has still to do."""
        ((count, oldest),) = self._rows(
            f"SELECT COUNT(*), MIN(created) FROM {self._table} WHERE consolidated IS NULL"
        )
        return int(count), None if oldest is None else float(oldest)

    def mark(self, seqs: list[int]) -> None:
        """Record these exchanges as consolidated (one transaction; marking again only
        moves the time)."""
        if not seqs:
            return
        with self._transaction() as statements:
            statements.many(
                f"UPDATE {self._table} SET consolidated={self.CLOCK} WHERE seq=?",
                [(s,) for s in seqs],
            )

    def idle(self, idle_seconds: float, now: float | None = None) -> list[tuple[EntityIds, str]]:
        """Sessions with pending exchanges and none newer than `idle_seconds` before `now`
        (default: the database's clock, the one that stamped them)."""
        cutoff = f"{self.CLOCK} - ?" if now is None else "?"
        rows = self._rows(
            f"SELECT scope, session FROM {self._table} WHERE consolidated IS NULL "
            f"GROUP BY scope, session HAVING MAX(created) <= {cutoff} ORDER BY MIN(seq)",
            (idle_seconds if now is None else now - idle_seconds,),
        )
        return [(scope_of(scope), session) for scope, session in rows]

    def forget(self, scope: EntityIds) -> None:
        """Drop the journal of every session inside `scope` (the same rule as the stores':
        a user's scope holds that user's agents and runs), after its memories were deleted:
        nothing of it may come back through a later consolidation."""
        with self._transaction() as statements:
            keys = [k for (k,) in statements.rows(f"SELECT DISTINCT scope FROM {self._table}")]
            doomed = [(k,) for k in keys if scope.contains(json.loads(k))]
            statements.many(f"DELETE FROM {self._table} WHERE scope=?", doomed)

    def forget_erased(self, forgotten: Forgotten) -> int:
        """An erasure's part here (see the module's docstring); returns the rows deleted."""
        with self._transaction() as statements:
            if forgotten.whole_scope:
                erased = forgotten.erased
                rows = statements.rows(f"SELECT seq, scope, created FROM {self._table}")
                doomed = [
                    (seq,)
                    for seq, key, created in rows
                    if erased.scope_erased(json.loads(key), float(created))
                ]
            else:
                doomed = [(seq,) for seq in self._holding(statements, forgotten)]
            statements.many(f"DELETE FROM {self._table} WHERE seq=?", doomed)
        return len(doomed)

    def _holding(self, statements: Statements, forgotten: Forgotten) -> set[int]:
        """The exchanges that hold an erased memory: in its scope, with its text, or already
        consolidated in the session it came from."""
        found: set[int] = set()
        for payload in forgotten.memories.values():
            key = scope_key({k: payload[k] for k in IDENTITY_KEYS if payload.get(k)})
            text = str(payload.get("data") or "")
            session = payload.get("session") if payload.get("source") == "session" else None
            rows = statements.rows(
                f"SELECT seq, session, messages, consolidated FROM {self._table} WHERE scope=?",
                (key,),
            )
            for seq, row_session, messages, consolidated in rows:
                said = (m.get("content") for m in json.loads(messages) if isinstance(m, dict))
                if (text and any(isinstance(c, str) and text in c for c in said)) or (
                    consolidated is not None and session is not None and row_session == session
                ):
                    found.add(int(seq))
        return found

    def prune(self, older_than_seconds: float) -> None:
        """Consolidated exchanges are kept a while for inspection, then dropped."""
        self._rows(
            f"DELETE FROM {self._table} "
            f"WHERE consolidated IS NOT NULL AND consolidated < {self.CLOCK} - ?",
            (older_than_seconds,),
        )


class SessionJournal(LocalTables, _Journal):
    """The journal in its own SQLite file (one replica)."""

    _table = "exchanges"

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)


class PgSessionJournal(PgTables, _Journal):
    """The journal in `history.postgres`, shared by the replicas (after `MIGRATIONS`)."""

    _table = "memorystore_exchanges"

    def _order_appends(self, statements: Statements, key: str, session: str) -> None:
        # Without it, two replicas appending to one session could commit seq 8 before seq 7,
        # and a consolidation reading in between would take 8 and leave 7 for later, out of
        # order. Held until the insert commits; other sessions are not held up.
        name = postgres.lock_name((self._table, key, session))
        statements.rows("SELECT pg_advisory_xact_lock(?)", (postgres.lock_id(name),))
