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
per-session lock, so a repeated end finds nothing.

Exactly once across crashes: a consolidation that is killed, fails or overruns `timeout_s`
marks nothing, and the next end or idle sweep runs it again over the same exchanges (and any
journalled since, after them). The re-run must leave what one uninterrupted run leaves, no
duplicate active or retired, so what a run writes is named in advance:

- without a model, each fact's memory id is derived from the scope, the session, the
  exchange it was first said in (its seq and the time it was journalled, which no other
  store repeats: an import from elsewhere cannot hold the id) and its text (`fact_id`).
  Facts are written in order, each with its retirements before the next, so the re-run
  skips every fact up to the last one stored (done, or found a repeat), finishes that last
  one's retirements (`complete_fact`), and goes on from the next. Re-judging an earlier
  fact would be wrong: a fact written later in the same run, which retired it or repeats
  it, would now stand before it;
- with a model, mem0 mints the ids, so every memory a run writes carries the run's token
  (`CONSOLIDATION_KEY` in its metadata, derived like a fact's id from the run's first
  exchange; not a secret and not reserved: only a write naming this store's future
  exchange to the microsecond could collide with it): a re-run that finds any skips the
  extraction (mem0 writes an extraction's facts in one store operation) and settles those
  again (repeats dropped, outdated memories retired), which is idempotent.

Why ids rather than a progress record: the memory written and a progress row cannot commit
together (vector store and state are separate stores), so a progress record would still
need a way to tell whether its next write happened; deterministic ids are that way, and
then the order of the facts is the progress record.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from memorystore.keyed_locks import KeyedLocks
from memorystore.rules.statements import statements
from memorystore.scope import EntityIds
from memorystore.service.engine.core import CONSOLIDATION_KEY, MemoryEngine
from memorystore.service.engine.results import WriteResult
from memorystore.service.lifecycle.journal import Exchange, PgSessionJournal, SessionJournal
from memorystore.service.state.postgres import ReplicaLocks

__all__ = ["JOURNAL_KEEP_S", "SESSION_SOURCE", "Consolidator", "fact_id", "run_token"]

log = logging.getLogger("memorystore.service")

SESSION_SOURCE = "session"
JOURNAL_KEEP_S = 7 * 24 * 3600  # consolidated exchanges kept this long, then pruned
# the namespace of the ids a consolidation names in advance (uuid5)
_NAMESPACE = uuid.UUID("3f0c2a8e-6b1d-5c47-9a2e-4d7f1b8c9e05")


def _named(scope: EntityIds, session: str, exchange: Exchange, what: str) -> str:
    parts = (scope.key(), session, str(exchange.seq), repr(float(exchange.created)), what)
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


def fact_id(scope: EntityIds, session: str, exchange: Exchange, text: str) -> str:
    """The memory id of the fact `text`, first said in `exchange` of the session."""
    return _named(scope, session, exchange, f"fact {text}")


def run_token(scope: EntityIds, session: str, first: Exchange) -> str:
    """What marks the memories one consolidation run, of exchanges from `first`, wrote."""
    return _named(scope, session, first, "run")


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

    @asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """No consolidation runs in this process while the body does (an erasure: a run
        would write text it read before)."""
        async with self._locks.exclusive():
            yield

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
        token = run_token(scope, session, pending[0])
        metadata = {
            **pending[0].metadata,
            "source": SESSION_SOURCE,
            "session": session,
            CONSOLIDATION_KEY: token,
        }
        if self.engine.infer_available:
            earlier = await self.engine.tagged(scope, token)
            if earlier:  # an interrupted run's extraction: settle it, do not extract again
                return await self.engine.settle(earlier, scope)
            messages = [m for e in pending for m in e.messages if m.get("role") != "system"]
            return await self.engine.add(messages, scope, metadata, infer=True)
        if not all(e.raw for e in pending):  # e.g. project scope: extracted facts only
            return []
        first_said: dict[str, Exchange] = {}  # each statement once, with where it came first
        for exchange in pending:
            if not exchange.saved:
                for text in statements(exchange.messages):
                    first_said.setdefault(text, exchange)
        if not first_said:
            return []
        ids = [fact_id(scope, session, came, text) for text, came in first_said.items()]
        stored = await self.engine.existing(ids)
        done = max((i for i, memory_id in enumerate(ids) if memory_id in stored), default=-1)
        results: list[WriteResult] = []
        if done >= 0:  # an interrupted run got this far: finish its last fact, go on after it
            results += await self.engine.complete_fact(ids[done], scope)
        facts = [{"role": "user", "content": text} for text in list(first_said)[done + 1 :]]
        if facts:
            results += await self.engine.add(
                facts, scope, metadata, infer=False, memory_ids=ids[done + 1 :]
            )
        return results

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
