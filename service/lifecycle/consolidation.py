"""Session-end consolidation: a session's journalled exchanges become memory, exactly once.

With an extraction model the whole session goes through mem0's extraction in one call, and
the engine drops repeats and retires what the new facts make outdated. Without one, the
user's own statements are kept (split into sentences; questions, requests without a first
person, greetings and acknowledgements left out) and written as facts, which the engine
de-duplicates and checks for supersession by its offline rules. Assistant replies are never
stored: they echo the user or answer a request. An exchange in which the agent saved
memories itself (add_memory) was already judged by the agent: without a model its
statements are not stored again.

`end` is idempotent: a session's pending exchanges are consolidated and then marked, under a
per-session lock, so a repeated end finds nothing. A consolidation that fails or overruns
`timeout_s` marks nothing: the next end or idle sweep tries again, and the engine's
de-duplication keeps the facts a partial run already wrote from being stored twice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from memorystore.keyed_locks import KeyedLocks
from memorystore.rules.statements import statements
from memorystore.scope import EntityIds
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.engine.results import WriteResult
from memorystore.service.lifecycle.journal import Exchange, PgSessionJournal, SessionJournal
from memorystore.service.state.postgres import ReplicaLocks

log = logging.getLogger("memorystore.service")

SESSION_SOURCE = "session"
JOURNAL_KEEP_S = 7 * 24 * 3600  # consolidated exchanges kept this long, then pruned


class Consolidator:
    def __init__(
        self,
        engine: MemoryEngine,
        journal: SessionJournal | PgSessionJournal,
        timeout_s: float = 300.0,
        locks: KeyedLocks | ReplicaLocks | None = None,
    ):
        self.engine = engine
        self.journal = journal
        self.timeout_s = timeout_s
        # one consolidation of a session at a time: across replicas with PostgreSQL (each
        # replica's idle sweep sees every session), so the second finds nothing pending
        self._locks = locks if locks is not None else KeyedLocks()

    async def end(self, scope: EntityIds, session: str) -> dict[str, Any]:
        """Consolidate the session's pending exchanges; {"exchanges": 0, ...} when none."""
        async with self._locks.hold((scope, session)):
            pending = await asyncio.to_thread(self.journal.pending, scope, session)
            if not pending:
                return {"session_id": session, "exchanges": 0, "results": []}
            results = await asyncio.wait_for(self._write(scope, session, pending), self.timeout_s)
            await asyncio.to_thread(self.journal.mark, [e.seq for e in pending])
        return {"session_id": session, "exchanges": len(pending), "results": results}

    async def _write(
        self, scope: EntityIds, session: str, pending: list[Exchange]
    ) -> list[WriteResult]:
        metadata = {**pending[0].metadata, "source": SESSION_SOURCE, "session": session}
        if self.engine.infer_available:
            messages = [m for e in pending for m in e.messages if m.get("role") != "system"]
            return await self.engine.add(messages, scope, metadata, infer=True)
        if not all(e.raw for e in pending):  # e.g. project scope: extracted facts only
            return []
        said = [s for e in pending if not e.saved for s in statements(e.messages)]
        if not said:
            return []
        facts = [{"role": "user", "content": text} for text in dict.fromkeys(said)]
        return await self.engine.add(facts, scope, metadata, infer=False)

    async def sweep(self, idle_seconds: float) -> int:
        """End every session idle for `idle_seconds`, then prune the journal of what was
        consolidated long ago; returns how many sessions were consolidated."""
        ended = 0
        for scope, session in await asyncio.to_thread(self.journal.idle, idle_seconds):
            try:
                result = await self.end(scope, session)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "idle session not consolidated yet (%s): retried later", type(exc).__name__
                )
                continue
            ended += bool(result["exchanges"])
        await asyncio.to_thread(self.journal.prune, JOURNAL_KEEP_S)
        return ended
