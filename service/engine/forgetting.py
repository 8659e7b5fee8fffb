"""The one erasure path: deleting a scope, an entity or memories by id removes their text from
every place the service keeps it, on SQLite state and PostgreSQL state alike.

Why one path: every delete the API offers (a scope, an entity, one memory, a batch) comes
here through the engine, so no route can forget a place. In order:

1. the erasure is recorded in the ledger (scope digest, memory ids, time; no text): the
   state's, and the backup target's when one is configured. From here on a killed service
   finishes it at its next start (`resume`: every step below is idempotent);
2. the places that hold copies of the text, while the memories are still readable (so a
   resume after step 4 has nothing left to look up): the session journal, stored exports and
   idempotency records (`places`), the scope chain, mem0's recent messages; for single
   memories, the memories written just after them are re-embedded without their text as
   context, and those they retired lose a reason that may quote them;
3. the vectors and payloads (retired memories of the scope included), then mem0's history
   rows of every erased memory, the DELETE rows included: its history answers 404;
4. the per-text caches of the rules, the SQLite WALs (checkpointed), and the embedded
   engine's files (rewritten without the deleted points: `EdgeVectorStore.purge`);
5. the ledger marks it done.

While a scope's memories are listed and deleted no write runs in this process (the engine's
`exclusive`) and no session is being consolidated (`pauses`), so nothing is written into
the scope from text read before the erasure. What stays: the ledger's record, and what
docs/operations/erasure.md lists (PostgreSQL's own files and log, a Qdrant server's).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mem0 import AsyncMemory

from memorystore.rules import forget_texts
from memorystore.scope import IDENTITY_KEYS, EntityIds, scope_key
from memorystore.service.engine.mem0_seam import (
    checkpoint_history,
    opened_entity_store,
    purge_history,
    purge_messages,
)
from memorystore.service.lifecycle.retirement import REASON_KEY, SUCCESSOR_KEY
from memorystore.service.retrieval.indexing import PREV_KEY, stored_index_texts
from memorystore.service.state.erasure_ledger import TargetLedger
from memorystore.service.state.erasures import Erasure, Forgotten, now, scope_digest
from memorystore.service.stores.protocol import Payload, StoredRecord, VectorStore
from memorystore.spec import RetrievalSettings

__all__ = ["ERASED_REASON", "Forgetting", "Ledger", "Place"]

log = logging.getLogger("memorystore.service")

# what a retired memory's reason becomes when the memory that retired it is erased
ERASED_REASON = "outdated by a memory since erased"
PAGE = 1000


class Ledger(Protocol):
    """Where the state records erasures (erasure_ledger.LocalLedger, PgLedger)."""

    def record(self, erasure: Erasure) -> int: ...

    def done(self, seq: int) -> None: ...

    def pending(self) -> list[tuple[int, Erasure]]: ...

    def checkpoint(self) -> bool: ...


class Place(Protocol):
    """A store beside the vectors that may hold an erased text (journal, exports, records)."""

    def forget_erased(self, forgotten: Forgotten) -> int: ...

    def checkpoint(self) -> bool: ...


@runtime_checkable
class Purgeable(Protocol):
    """A store whose files keep deleted points until rewritten (the embedded engine)."""

    def purge(self) -> int: ...


class Chain(Protocol):
    async def forget_erased(self, forgotten: Forgotten) -> int: ...


class Locks(Protocol):
    def hold(self, key: Any) -> AbstractAsyncContextManager[None]: ...

    def exclusive(self) -> AbstractAsyncContextManager[None]: ...


class _Coalesced:
    """Runs blocking `work` in a thread so that each caller returns after a run that started
    after its call: erasures arriving during a run share the next one."""

    def __init__(self, work: Callable[[], object]) -> None:
        self._work = work
        self._lock = asyncio.Lock()
        self._asked = 0
        self._done = 0

    async def __call__(self) -> None:
        self._asked += 1
        ticket = self._asked
        async with self._lock:
            if self._done >= ticket:
                return
            target = self._asked
            await asyncio.to_thread(self._work)
            self._done = target


class Forgetting:
    """The erasures of one engine (see the module's docstring)."""

    def __init__(
        self,
        memory: AsyncMemory,
        locks: Locks,
        chain: Chain,
        ledger: Ledger,
        retrieval: RetrievalSettings,
        owner_lock: Callable[[Payload], Any],
        target: Path | None = None,
    ) -> None:
        self.memory = memory
        self._locks = locks
        self._chain = chain
        self.ledger = ledger
        self._retrieval = retrieval
        self._owner_lock = owner_lock
        self._target = TargetLedger(target) if target is not None else None
        # what else holds text (Services.build adds the journal, exports, idempotency records)
        self.places: list[Place] = []
        # what must not run during an erasure (Services.build adds session consolidation)
        self.pauses: list[Callable[[], AbstractAsyncContextManager[None]]] = []
        self._purge = _Coalesced(self._purge_files)
        self._running: set[int] = set()  # erasures this process is carrying out

    @property
    def store(self) -> VectorStore:
        store: VectorStore = self.memory.vector_store
        return store

    # --- the three ways in ------------------------------------------------------------------

    async def scope(self, scope: EntityIds) -> int:
        """Erase every memory of `scope` (retired ones too); returns how many were deleted."""
        async with AsyncExitStack() as held:
            await self._pause(held)
            async with self._locks.exclusive():
                members = await asyncio.to_thread(self._members, scope)
                erasure = Erasure(now(), scope_digest(scope), tuple(sorted(members)))
                seq = await self._record(erasure, held)
                forgotten = Forgotten(erasure, members)
                await self._places(forgotten)
                deleted = await self._delete(forgotten, scope)
            await self._finish(seq)
        return deleted

    async def memories(self, records: Sequence[StoredRecord]) -> int:
        """Erase these memories (each checked to exist by the caller); returns how many."""
        if not records:
            return 0
        members = {str(r.id): dict(r.payload or {}) for r in records}
        async with AsyncExitStack() as held:
            await self._pause(held)
            erasure = Erasure(now(), None, tuple(sorted(members)))
            seq = await self._record(erasure, held)
            forgotten = Forgotten(erasure, members)
            await self._places(forgotten)
            await self._unlink(forgotten)
            deleted = await self._delete(forgotten, None)
            await self._finish(seq)
        return deleted

    async def resume(self, older_than_s: float = 0.0) -> int:
        """Carry out, again and to the end, every erasure recorded but not marked done (a
        service killed half-way, at start-up before serving; one that failed, later, once
        older than `older_than_s`), except those running here now; returns how many."""
        pending = await asyncio.to_thread(self.ledger.pending)
        cutoff = time.time() - older_than_s
        due = [(s, e) for s, e in pending if s not in self._running and e.when <= cutoff]
        for seq, erasure in due:
            log.warning("an erasure recorded at %s was interrupted: finishing it", erasure.at)
            async with AsyncExitStack() as held:
                held.enter_context(self._carrying(seq))
                members = await asyncio.to_thread(self._still_stored, erasure)
                if self._target is not None:
                    await asyncio.to_thread(self._append_target, erasure)
                forgotten = Forgotten(erasure, members)
                await self._places(forgotten)
                if not forgotten.whole_scope:
                    await self._unlink(forgotten)
                await self._delete(forgotten, None)
                await self._finish(seq)
        return len(due)

    # --- the steps ----------------------------------------------------------------------------

    async def _pause(self, held: AsyncExitStack) -> None:
        for pause in self.pauses:
            await held.enter_async_context(pause())

    async def _record(self, erasure: Erasure, held: AsyncExitStack) -> int:
        """Step 1; the erasure counts as running here until `held` closes."""
        seq = await asyncio.to_thread(self.ledger.record, erasure)
        held.enter_context(self._carrying(seq))
        if self._target is not None:
            await asyncio.to_thread(self._append_target, erasure)
        return seq

    @contextmanager
    def _carrying(self, seq: int) -> Iterator[None]:
        """`seq` is being carried out here: a resume meanwhile leaves it alone (and takes it
        up later if this attempt fails)."""
        self._running.add(seq)
        try:
            yield
        finally:
            self._running.discard(seq)

    def _append_target(self, erasure: Erasure) -> None:
        """The backup target's ledger; a target that cannot take it never stops an erasure
        (the state's ledger has it, and so will every later backup)."""
        assert self._target is not None
        if not self._target.path.parent.is_dir():
            log.warning("backup target %s is missing: erasure not recorded there", self._target)
            return
        try:
            self._target.append(erasure)
        except OSError as exc:
            log.warning("erasure not recorded in the backup target (%s)", type(exc).__name__)

    async def _places(self, forgotten: Forgotten) -> None:
        """Everything beside the vectors that may hold the erased texts (step 2)."""
        for place in self.places:
            await asyncio.to_thread(place.forget_erased, forgotten)
        await self._chain.forget_erased(forgotten)
        await asyncio.to_thread(purge_messages, self.memory, _doomed_sessions(forgotten))

    async def _unlink(self, forgotten: Forgotten) -> None:
        """Single memories: the memories linked to them lose what holds their text."""
        ids = sorted(forgotten.ids)
        for start in range(0, len(ids), PAGE):
            chunk = ids[start : start + PAGE]
            for record in await asyncio.to_thread(self._linked, PREV_KEY, chunk):
                if str(record.id) not in forgotten.ids:
                    await self._without_context(str(record.id))
            for record in await asyncio.to_thread(self._linked, SUCCESSOR_KEY, chunk):
                if str(record.id) not in forgotten.ids:
                    patch = {REASON_KEY: ERASED_REASON}
                    async with self._locks.hold(self._owner_lock(dict(record.payload or {}))):
                        await asyncio.to_thread(self.store.update, str(record.id), None, patch)

    async def _without_context(self, memory_id: str) -> None:
        """Re-embed a memory written just after an erased one, without its text as context."""
        record = await asyncio.to_thread(self.store.get, vector_id=memory_id)
        if record is None:
            return
        async with self._locks.hold(self._owner_lock(dict(record.payload or {}))):
            record = await asyncio.to_thread(self.store.get, vector_id=memory_id)
            if record is None:
                return
            payload = {k: v for k, v in (record.payload or {}).items() if k != PREV_KEY}
            texts = stored_index_texts(payload, self._retrieval, lambda _: None)
            payload["text_lemmatized"] = texts.lexical
            vector = await asyncio.to_thread(self.memory.embedding_model.embed, texts.dense, "add")
            await asyncio.to_thread(self.store.reindex, memory_id, payload, vector)

    async def _delete(self, forgotten: Forgotten, scope: EntityIds | None) -> int:
        """The vectors and payloads, then every history row of the erased memories (step 3).
        A scope is swept once more after its listed memories are gone."""
        ids = set(forgotten.ids)
        deleted = 0
        for memory_id in sorted(ids):
            if await self._delete_one(memory_id, scoped=scope is not None):
                deleted += 1
        if scope is not None:
            late = await asyncio.to_thread(self._members, scope)
            for memory_id in late:
                ids.add(memory_id)
                deleted += await self._delete_one(memory_id, scoped=True)
            if opened_entity_store(self.memory) is not None:  # mem0's entity links (spaCy)
                await self.memory.delete_all(**scope.filters())
        await asyncio.to_thread(purge_history, self.memory, ids)
        return deleted

    async def _delete_one(self, memory_id: str, scoped: bool) -> bool:
        record = await asyncio.to_thread(self.store.get, vector_id=memory_id)
        if record is None:
            return False
        if scoped:  # the caller holds every write out (exclusive)
            await asyncio.to_thread(self.store.delete, memory_id)
            return True
        async with self._locks.hold(self._owner_lock(dict(record.payload or {}))):
            if opened_entity_store(self.memory) is not None:
                await self.memory.delete(memory_id)  # mem0 unlinks its entities too
            else:
                await asyncio.to_thread(self.store.delete, memory_id)
        return True

    async def _finish(self, seq: int) -> None:
        """Caches, logs and files (step 4), then the ledger's mark (step 5)."""
        forget_texts()
        for place in self.places:
            await asyncio.to_thread(place.checkpoint)
        await asyncio.to_thread(self.ledger.checkpoint)
        await asyncio.to_thread(checkpoint_history, self.memory)
        await self._purge()
        await asyncio.to_thread(self.ledger.done, seq)

    def _purge_files(self) -> None:
        for store in (self.store, opened_entity_store(self.memory)):
            if isinstance(store, Purgeable):
                store.purge()

    # --- reads --------------------------------------------------------------------------------

    def _members(self, scope: EntityIds) -> dict[str, Payload]:
        """Every memory of `scope`, retired ones too: id → payload."""
        total = int(self.store.count(scope.filters()))
        points, _ = self.store.list(filters=scope.filters(), top_k=max(total, 1))
        return {str(p.id): dict(p.payload or {}) for p in points}

    def _still_stored(self, erasure: Erasure) -> dict[str, Payload]:
        """What an interrupted erasure covers that is still stored: its listed ids, and for a
        scope, every memory the scope held when it was recorded (a full scan: a resume only)."""
        found: dict[str, Payload] = {}
        for memory_id in erasure.memory_ids:
            record = self.store.get(vector_id=memory_id)
            if record is not None:
                found[memory_id] = dict(record.payload or {})
        if erasure.scope_digest is not None:
            erased = Forgotten(erasure).erased
            for memory_id, _, payload in self.store.points(PAGE):
                if erased.memory_erased(memory_id, payload):
                    found[memory_id] = dict(payload)
        return found

    def _linked(self, key: str, ids: list[str]) -> Sequence[StoredRecord]:
        """The memories whose `key` names one of `ids` (prev_id, superseded_by)."""
        filters = {key: {"in": ids}}
        total = int(self.store.count(filters))
        if not total:
            return []
        points, _ = self.store.list(filters=filters, top_k=total)
        return points


def _doomed_sessions(forgotten: Forgotten) -> Callable[[dict[str, str]], bool]:
    """Which of mem0's session scopes (recent messages, extraction context) an erasure
    clears: those inside an erased scope; for single memories, exactly their scopes."""
    if forgotten.whole_scope:
        erased = forgotten.erased
        return lambda ids: bool(ids) and erased.scope_erased(ids)
    keys = {scope_key(_ids(payload)) for payload in forgotten.memories.values()}
    return lambda ids: scope_key(ids) in keys


def _ids(payload: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(payload[k]) for k in IDENTITY_KEYS if payload.get(k)}
