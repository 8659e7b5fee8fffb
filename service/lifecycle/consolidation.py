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
import re
from typing import Any

from memorystore.keyed_locks import KeyedLocks
from memorystore.scope import EntityIds
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.lifecycle.journal import PgSessionJournal, SessionJournal
from memorystore.service.state.postgres import ReplicaLocks

log = logging.getLogger("memorystore.service")

SESSION_SOURCE = "session"
_SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")
# a comma that starts a new first-person clause: "I moved to Hangzhou, I started at X" is two
# facts, and one that changes later must be retirable without the other
_CLAUSE = re.compile(
    r"(?:\s*[,，]\s*(?:(?:and|but|so|also|plus)\s+|(?:而且|还有|另外|并且|但是?|所以|也)\s*)?"
    r"(?=(?:i|i'm|i've|i'd|we|we're|we've|my|our)\b|我)"
    r"|\s+and\s+(?=(?:i'm|i've|i'd|i'll|we're|we've)\b))",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|im|my|mine|me|myself|we|we're|we've|our|ours|us)\b|我",
    re.IGNORECASE,
)
_QUESTION_END = re.compile(r"[?？]\s*$|[吗呢么嘛]\s*[。.!！]?\s*$")
_REQUEST_START = re.compile(
    r"^(?:please\s+|pls\s+)?(?:can|could|would|will)\s+you\b|^(?:please\s+)?(?:help|show|tell|"
    r"give|draw|plot|make|write|create|explain|translate|summari[sz]e|list|find|recommend|"
    r"suggest|check|fix|generate|compute|calculate|remind)\b(?!.*\b(?:by default|always|from "
    r"now on|in future|going forward)\b)|^(?:请|麻烦|帮我|给我|你能|能不能|可以帮)",
    re.IGNORECASE,
)
_ACKS = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|thx|ok|okay|sure|yes|no|great|cool|nice|got it|"
    r"bye|good\s*(?:morning|night|bye)|big news|as i (?:said|mentioned|told you)|like i said|"
    r"i mean|i think|i guess|i know|by the way|你好|谢谢|好的|好|嗯|行|可以|没问题|再见|"
    r"我(?:之前|刚才)?(?:说过|讲过|提过)(?:了)?|跟你说过|我跟你说)\W*$",
    re.IGNORECASE,
)
MIN_CHARS = 4
JOURNAL_KEEP_S = 7 * 24 * 3600  # consolidated exchanges kept this long, then pruned


def _clauses(sentence: str) -> list[str]:
    """The first-person clauses of a sentence; a clause without one stays with the next (it
    is context: "Forget the Japan trip, we're going to Korea instead")."""
    parts = [p for p in _CLAUSE.split(sentence) if p.strip()]
    clauses: list[str] = []
    pending = ""
    for part in parts:
        part = f"{pending}, {part}" if pending else part
        if _FIRST_PERSON.search(part) or _ACKS.match(part.strip()):
            clauses.append(part)
            pending = ""
        else:
            pending = part
    if pending:
        clauses.append(pending)
    return clauses


def statements(messages: list[dict[str, Any]]) -> list[str]:
    """The sentences (first-person clauses) of the user's messages worth keeping, in order."""
    kept: list[str] = []
    for msg in messages:
        if msg.get("role") != "user":
            continue
        sentences = _SENTENCE.split(str(msg.get("content") or ""))
        for sentence in (c for s in sentences for c in _clauses(s)):
            sentence = sentence.strip()
            if len(sentence) < MIN_CHARS or _ACKS.match(sentence):
                continue
            if _QUESTION_END.search(sentence) or _REQUEST_START.match(sentence):
                continue
            if not _FIRST_PERSON.search(sentence):
                continue
            if sentence not in kept:
                kept.append(sentence)
    return kept


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

    async def _write(self, scope: EntityIds, session: str, pending: list) -> list[dict[str, Any]]:
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
