"""The last memory written in each scope: the next turn's context and its `prev_id` link.

Context indexing embeds a conversation turn with the turn written just before it in the same
scope, and links the two (`retrieval.PREV_KEY`), so neighbours can share scores. Which turn
was "just before" must be one answer for all writers of a scope:

- `LocalChain` keeps it in this process (one replica; bounded, least recently written scopes
  go first, so a scope that falls out, like a restart, starts a new chain);
- `PgChain` keeps it in PostgreSQL (history.postgres), so replicas writing one scope form one
  chain: each claim reads and replaces the scope's last memory in one transaction under the
  scope's advisory lock, and numbers it, so the links follow the order of the claims.

A claim happens before the memory is written; a write that then fails leaves a link to a
memory that never existed, which indexing treats as no context.

The chain holds a memory's line (its text): an erasure drops every entry of an erased scope
and every entry naming an erased memory (`forget_erased`).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from typing import Protocol

from memorystore.service.state.erasures import Forgotten
from memorystore.service.state.postgres import Database, Migration, lock_id

CHAIN_SCOPES = 10_000  # scopes LocalChain remembers

MIGRATIONS = [
    Migration(
        "scope_chain",
        1,
        "the last memory written per scope",
        """
        CREATE TABLE IF NOT EXISTS memorystore_scope_chain (
            scope text PRIMARY KEY,
            memory_id text NOT NULL,
            line text NOT NULL,
            seq bigint NOT NULL,
            written_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE SEQUENCE IF NOT EXISTS memorystore_scope_chain_seq;
        """,
    )
]


class Scope(Protocol):
    def key(self) -> str: ...  # the same in every process (engine.EntityIds.key)


class LocalChain:
    def __init__(self, limit: int | None = None) -> None:
        self._last: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._limit = limit  # None: CHAIN_SCOPES, read at each claim

    async def claim(self, scope: Scope, memory_id: str, line: str) -> tuple[str, str] | None:
        """Make `memory_id` the scope's last memory; return the one before it (id, line).

        Nothing here awaits, so concurrent claims in this process are ordered."""
        key = scope.key()
        previous = self._last.pop(key, None)
        self._last[key] = (memory_id, line)
        if len(self._last) > (self._limit or CHAIN_SCOPES):
            self._last.popitem(last=False)
        return previous

    async def forget(self, scope: Scope) -> None:
        """A deleted scope starts a new chain (no deleted text becomes context)."""
        self._last.pop(scope.key(), None)

    async def forget_erased(self, forgotten: Forgotten) -> int:
        """Drop the entries of erased scopes and those naming erased memories."""
        doomed = [
            key for key, (memory_id, _) in self._last.items() if _erased(forgotten, key, memory_id)
        ]
        for key in doomed:
            del self._last[key]
        return len(doomed)


class PgChain:
    def __init__(self, database: Database) -> None:
        self.database = database

    def _claim(self, key: str, memory_id: str, line: str) -> tuple[str, str] | None:
        with self.database.transaction() as connection:
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id("chain:" + key),))
            row = connection.execute(
                "SELECT memory_id, line FROM memorystore_scope_chain WHERE scope = %s", (key,)
            ).fetchone()
            connection.execute(
                "INSERT INTO memorystore_scope_chain (scope, memory_id, line, seq) "
                "VALUES (%s, %s, %s, nextval('memorystore_scope_chain_seq')) "
                "ON CONFLICT (scope) DO UPDATE SET memory_id = EXCLUDED.memory_id, "
                "line = EXCLUDED.line, seq = EXCLUDED.seq, written_at = now()",
                (key, memory_id, line),
            )
        return (str(row[0]), str(row[1])) if row else None

    async def claim(self, scope: Scope, memory_id: str, line: str) -> tuple[str, str] | None:
        return await asyncio.to_thread(self._claim, scope.key(), memory_id, line)

    async def forget(self, scope: Scope) -> None:
        """A deleted scope starts a new chain."""
        await asyncio.to_thread(
            self.database.execute,
            "DELETE FROM memorystore_scope_chain WHERE scope = %s",
            (scope.key(),),
        )

    def _forget_erased(self, forgotten: Forgotten) -> int:
        rows = self.database.execute("SELECT scope, memory_id FROM memorystore_scope_chain")
        doomed = [key for key, memory_id in rows if _erased(forgotten, key, memory_id)]
        if doomed:
            self.database.execute(
                "DELETE FROM memorystore_scope_chain WHERE scope = ANY(%s)", (doomed,)
            )
        return len(doomed)

    async def forget_erased(self, forgotten: Forgotten) -> int:
        """Drop the entries of erased scopes and those naming erased memories."""
        return await asyncio.to_thread(self._forget_erased, forgotten)


def _erased(forgotten: Forgotten, key: str, memory_id: str) -> bool:
    """An entry (scope key, last memory) an erasure covers. No time is compared: dropping an
    entry of a scope's later life only starts a new chain there."""
    if str(memory_id) in forgotten.ids:
        return True
    return forgotten.whole_scope and forgotten.erased.scope_erased(json.loads(key))
