"""The memory engine: everything the API does, on one AsyncMemory wired from the ServiceConfig.

Why this shape: the HTTP layer stays thin, and mem0 stays behind one object. Here are the
reads (search with fused retrieval, list, get, history, the entity inventory), updates and
deletes under the scope locks, export and import records, and the engine's lifecycle
(prepare, check_ready, close). The write pipeline is `writes.py`, the translation of our
config into mem0's `mem0_config.py`, and whatever depends on mem0's internals, its history
DB included, `mem0_seam.py`: this module uses mem0's public API and the seam's functions.

The engine owns its PostgreSQL Databases (`postgres.configured`): it hands them to what it
builds (mem0's history, the vector store, the locks, the scope chain) and closes them. Every
delete it offers is an erasure, carried out by `forgetting.py` (the one erasure path), which
records it in the erasure ledger the engine keeps beside its state.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from mem0 import AsyncMemory

from memorystore.config import ServiceConfig
from memorystore.keyed_locks import KeyedLocks
from memorystore.scope import IDENTITY_KEYS, EntityIds, InvalidId
from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS
from memorystore.service.engine.forgetting import Forgetting
from memorystore.service.engine.mem0_config import mem0_config
from memorystore.service.engine.mem0_seam import (
    MEM0_PAYLOAD_KEYS,
    PROMOTED_KEYS,
    close_history,
    history_connection,
    history_ids_in_use,
    history_rows,
    memory_item,
    opened_entity_store,
    restore_history,
    use_history,
)
from memorystore.service.engine.results import (
    EntityRow,
    ExportRecord,
    MemoryItem,
    WriteResult,
)
from memorystore.service.engine.writes import (
    ScopeChain,
    ScopeLocks,
    WritePipeline,
    passage_vectors,
)
from memorystore.service.lifecycle.retirement import RETIRED_KEYS, active_only
from memorystore.service.migration import record as migration_records
from memorystore.service.migration.migrator import EmbedderMigration
from memorystore.service.ops.stages import stage
from memorystore.service.retrieval.cues import cue_bonuses, without_speakers
from memorystore.service.retrieval.indexing import PREV_KEY, Hit, fuse, keyword_gates
from memorystore.service.retrieval.lexical import keyword_text
from memorystore.service.retrieval.lexical import terms as lexical_terms
from memorystore.service.retrieval.reindex import INDEX_KEY, index_version
from memorystore.service.state import erasure_ledger, pg_history, postgres, scope_chain
from memorystore.service.stores.embedded import EdgeVectorStore
from memorystore.service.stores.protocol import ScoredRecord, StoredRecord, VectorStore
from memorystore.spec import EmbedderSettings

__all__ = ["CONSOLIDATION_KEY", "RESERVED_METADATA_KEYS", "MemoryEngine", "NotFound"]

log = logging.getLogger("memorystore.service")

# the session consolidation that wrote a memory (lifecycle/consolidation.py finds them by it);
# plain metadata, so exports and backups carry it as they carry `source` and `session`
CONSOLIDATION_KEY = "consolidation"
# what a request's metadata may not set: the scope, and every key the service or mem0 writes
# or promotes into a memory's top level (so metadata cannot spoof them)
RESERVED_METADATA_KEYS = frozenset(
    {
        *MEM0_PAYLOAD_KEYS,
        PREV_KEY,
        INDEX_KEY,
        *RETIRED_KEYS,
        *PROMOTED_KEYS,
        "expiration_date",
        "id",
    }
)


def _tune_history_db(memory: AsyncMemory) -> None:
    """secure_delete + WAL + synchronous=NORMAL on mem0's history connection.

    mem0 opens SQLite with the defaults (rollback journal, fsync on every commit): 10–20 ms
    per history row here, the largest part of an add. WAL with NORMAL survives a process
    crash; a power loss may drop the last commits, the same bound as the embedded vector
    store's unflushed WAL. The busy timeout covers a second process reading the file.
    """
    with history_connection(memory) as connection:
        connection.execute("PRAGMA secure_delete=ON")  # an erasure leaves no text in free pages
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA busy_timeout=5000")


class NotFound(LookupError):
    """An id that does not exist in the caller's scope (404, whether absent or not theirs)."""


def _owner_lock(payload: dict[str, Any]) -> Hashable:
    """The lock key of the scope a stored memory belongs to (what `add` holds for that scope).

    Memories written before the id grammar may carry ids no EntityIds accepts; no request can
    name their scope either, so any distinct key serves.
    """
    ids = {key: payload.get(key) for key in IDENTITY_KEYS}
    try:
        return EntityIds(**ids)
    except (InvalidId, TypeError):
        return ("unscoped", repr(ids))


class MemoryEngine:
    """Everything the API does, on one AsyncMemory; the HTTP layer stays thin."""

    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        # history.postgres: the state replicas share (history, locks, scope order,
        # idempotency); vectorStore.postgres: the vectors' (the same object when the same)
        self.database, vectors = postgres.configured(cfg)
        self.vectors_database = vectors
        # the Databases this engine owns (and `close` closes), each once
        owned = (self.database, vectors)
        self._databases = list({id(d): d for d in owned if d is not None}.values())
        # the store's indexes: the live one may have been made by another embedder than the
        # configured one (a migration, service/migration/). With the state in PostgreSQL the
        # record is shared by the replicas and read once the database answers (`prepare`):
        # until then mem0 is built for the configured embedder, and touches nothing.
        shared = None if self.database is None else migration_records.PgRecords(self.database)
        self.migration = EmbedderMigration(cfg, lambda c: mem0_config(c, vectors), shared)
        live_cfg = cfg
        if shared is None:
            live_cfg = self.migration.config_for(self.migration.record.state.live)
        self.memory = AsyncMemory(mem0_config(live_cfg, vectors))
        self.infer_available = cfg.llm is not None
        # mem0's md5 dedup is read-then-write (mem0 issue 6515), and so is ours for raw text:
        # extraction runs one at a time per scope (its facts are unknown in advance); a raw
        # write only excludes writes of the same text to the same scope. With PostgreSQL the
        # locks hold across replicas.
        self._locks: ScopeLocks
        # the last memory written per scope: the next one's context and prev_id
        self._chain: ScopeChain
        ledger: erasure_ledger.LocalLedger | erasure_ledger.PgLedger
        if self.database is None:
            _tune_history_db(self.memory)
            self._locks = KeyedLocks()
            self._chain = scope_chain.LocalChain()
            ledger = erasure_ledger.LocalLedger(cfg.path_in_data_dir(None, "erasures.db"))
        else:
            use_history(self.memory, pg_history.PgHistory(self.database))
            self._locks = postgres.ReplicaLocks(self.database, "scope")
            self._chain = scope_chain.PgChain(self.database)
            ledger = erasure_ledger.PgLedger(self.database)
        self.ledger = ledger
        target = cfg.backup.path if cfg.backup is not None else None
        self.forgetting = Forgetting(
            self.memory,
            self._locks,
            self._chain,
            ledger,
            cfg.retrieval,
            _owner_lock,
            erasure_ledger.target_ledger_path(Path(target), cfg.tenant) if target else None,
        )
        # a PostgreSQL schema, or a Qdrant server's collection, is checked at start-up in the
        # background (lifespan._prepare): the service starts while either is away
        self.not_ready: str | None = None
        if self.database is not None or cfg.vector_store.postgres is not None:
            self.not_ready = "the database schema is not checked yet"
        elif cfg.vector_store.server is not None:
            self.not_ready = "the vector store's collection is not checked yet"
        retrieval = cfg.retrieval
        weights = (
            retrieval.neighbour_weight,
            retrieval.speaker_weight,
            retrieval.time_weight,
            retrieval.question_weight,
        )
        # every stage off: mem0's own search
        self._fused_search = retrieval.hybrid or any(w > 0 for w in weights)
        self.index_version = self._version_of(live_cfg.embedder.index_name())
        self._writes = WritePipeline(cfg, self.memory, self._locks, self._chain, self.index_version)
        if not self.migration.records.shared:
            self.migration.attach(self.memory, self._version_of)

    def _version_of(self, index: str) -> str:
        """What a memory in the index of this embedder is stamped with: centring is done by
        the offline embedders only (a remote one's vectors stay raw)."""
        retrieval = self.cfg.retrieval
        provider = index.partition("/")[0]
        return index_version(
            retrieval, retrieval.language_centering and provider in OFFLINE_EMBEDDERS
        )

    @property
    def live_embedder(self) -> EmbedderSettings:
        """The embedder of the index reads are served by (during a migration, not
        necessarily the configured one): backups record it."""
        if self.migration.store is None:
            return self.cfg.embedder
        return self.migration.store.live().settings

    @property
    def store(self) -> VectorStore:
        store: VectorStore = self.memory.vector_store
        return store

    async def add(
        self,
        messages: list[dict[str, Any]],
        scope: EntityIds,
        metadata: dict[str, Any] | None,
        infer: bool,
        memory_ids: Sequence[str | None] | None = None,
    ) -> list[WriteResult]:
        """Extract facts with the model (when asked and configured), else store as written
        (message i under `memory_ids[i]` when given)."""
        if infer and self.infer_available:
            return await self._writes.extract(messages, scope, metadata)
        return await self._writes.add_raw(messages, scope, metadata, memory_ids)

    def add_bulk(
        self,
        messages: list[dict[str, Any]],
        scope: EntityIds,
        metadata: dict[str, Any] | None,
        chunk: int,
    ) -> AsyncIterator[tuple[int, list[WriteResult]]]:
        """Store many messages as written, `chunk` at a time: (messages done, the chunk's
        results) after each (`WritePipeline.add_many`)."""
        return self._writes.add_many(messages, scope, metadata, chunk)

    async def search(
        self,
        query: str,
        scope: EntityIds,
        top_k: int,
        threshold: float,
        extra_filters: dict[str, Any] | None = None,
        include_retired: bool = False,
    ) -> list[MemoryItem]:
        filters = active_only({**(extra_filters or {}), **scope.filters()}, include_retired)
        if not self._fused_search:
            result = await self.memory.search(
                query, top_k=top_k, filters=filters, threshold=threshold
            )
            found: list[MemoryItem] = result["results"]
            return found
        hits = await asyncio.to_thread(self._fused, query, filters, top_k, threshold)
        return [memory_item(hit.id, hit.score, hit.payload, {PREV_KEY, INDEX_KEY}) for hit in hits]

    def _fused(
        self, query: str, filters: dict[str, Any], top_k: int, threshold: float
    ) -> list[Hit]:
        """Keyword leg first: the speakers among its hits say whose name the query vector
        leaves out (`cues.without_speakers`); then the dense leg, then fusion."""
        settings = self.cfg.retrieval
        n = max(settings.candidates, top_k)
        lexical: Sequence[ScoredRecord] = []
        if settings.hybrid:
            with stage("keyword"):
                lexical = self.store.keyword_search(query=query, top_k=n, filters=filters) or []
        dense_query = query
        if settings.speaker_weight > 0:
            speakers = (str((h.payload or {}).get("actor_id") or "") for h in lexical)
            dense_query = without_speakers(query, speakers)
        with stage("embed"):
            vector = self.memory.embedding_model.embed(dense_query, "search")
        with stage("dense"):
            dense = self.store.search(query=query, vectors=vector, top_k=n, filters=filters)
        dense_ids = {str(hit.id) for hit in dense}
        keyword = [(str(h.id), h.score or 0.0, h.payload or {}) for h in lexical]
        keyword_only = [i for i, _, _ in keyword if i not in dense_ids]
        if len(keyword) >= n:
            with stage("keyword"):
                keyword += self._keyword_scored(query, dense, {i for i, _, _ in keyword}, filters)
        gates: dict[str, float] = {}
        if keyword:
            with stage("gate"):
                candidates = {str(h.id): keyword_text(h.payload or {}) for h in (*dense, *lexical)}
                gates = keyword_gates(
                    lexical_terms(query, settings.tokenizer),
                    {i: lexical_terms(text, settings.tokenizer) for i, text in candidates.items()},
                    [(i, payload) for i, _, payload in keyword],
                )
        payloads = {str(h.id): h.payload or {} for h in (*dense, *lexical)}
        with stage("cues"):
            bonuses = cue_bonuses(query, payloads, settings)
        with stage("fusion"):  # the keyword-only candidates' cosines, neighbours, fusion
            return fuse(
                [(str(h.id), h.score or 0.0, h.payload or {}) for h in dense],
                keyword,
                self.store.cosine(vector, keyword_only, filters),
                settings,
                threshold,
                top_k,
                gates,
                bonuses,
            )

    def _keyword_scored(
        self,
        query: str,
        dense: Sequence[ScoredRecord],
        scored: set[str],
        filters: dict[str, Any],
    ) -> list[tuple[str, float, dict[str, Any]]]:
        """The keyword scores of the dense candidates the keyword list left out. That list is
        cut at `candidates`, and when more memories match than that (often with one score:
        the same words, a number the tokenizer drops), which of them made it is arbitrary;
        without this a memory the dense leg ranks first could lose to ones that did."""
        missing = {str(h.id): h.payload or {} for h in dense if str(h.id) not in scored}
        found = self.store.keyword_scores(query, list(missing), filters)
        return [(i, score, missing[i]) for i, score in found.items() if i in missing]

    async def _owned(self, memory_id: str, scope: EntityIds) -> StoredRecord:
        """The memory if it is in `scope`, else NotFound (absent and not yours look the same).

        An empty scope is allowed here: calls on one memory by its id alone (what
        `mem0.AsyncMemoryClient.get(id)` sends) stay valid, because a memory id is a random
        UUID that only the tenant-key holder ever sees, so it is an unguessable capability of
        that holder. Reads and writes of many memories always need a scope.
        """
        try:
            uuid.UUID(memory_id)  # mem0 ids are UUIDs; anything else cannot exist
        except ValueError:
            raise NotFound(f"memory {memory_id} not found") from None
        record = await asyncio.to_thread(self.store.get, vector_id=memory_id)
        if record is None or (scope and not scope.contains(record.payload or {})):
            raise NotFound(f"memory {memory_id} not found")
        return record

    async def get(self, memory_id: str, scope: EntityIds) -> MemoryItem:
        await self._owned(memory_id, scope)
        item: MemoryItem | None = await self.memory.get(memory_id)
        if item is None:
            raise NotFound(f"memory {memory_id} not found")
        return item

    async def update(
        self, memory_id: str, scope: EntityIds, text: str | None, metadata: dict[str, Any] | None
    ) -> MemoryItem:
        record = await self._owned(memory_id, scope)
        async with self._locks.hold(_owner_lock(record.payload or {})):
            await self.memory.update(memory_id, text=text, metadata=metadata)
        return await self.get(memory_id, scope)

    def lock_for(self, payload: dict[str, Any]) -> AbstractAsyncContextManager[None]:
        """The write lock of the scope a stored memory belongs to (re-indexing holds it)."""
        return self._locks.hold(_owner_lock(payload))

    def locks_for(self, payloads: Sequence[dict[str, Any]]) -> AbstractAsyncContextManager[None]:
        """The write locks of every scope these stored memories belong to, taken at once
        (an embedder migration copies a page under them)."""
        return self._locks.hold_many([_owner_lock(payload) for payload in payloads])

    def writes_paused(self) -> AbstractAsyncContextManager[None]:
        """No write runs while this is held (a backup's snapshot); reads go on."""
        return self._locks.exclusive()

    async def delete(self, memory_id: str, scope: EntityIds) -> None:
        """Erase one memory (forgetting.py: from every place, ledger first)."""
        record = await self._owned(memory_id, scope)
        await self.forgetting.memories([record])

    async def delete_all(self, scope: EntityIds) -> int:
        """Erase every memory of `scope`; returns how many were deleted."""
        return await self.forgetting.scope(scope)

    async def _owned_all(self, memory_ids: list[str]) -> list[StoredRecord]:
        """Every memory of a batch, by id alone (the id is the capability, see `_owned`), or
        NotFound naming the first missing one before anything is changed."""
        records = []
        for i, memory_id in enumerate(memory_ids):
            try:
                records.append(await self._owned(memory_id, EntityIds()))
            except NotFound:
                raise NotFound(
                    f"memories[{i}].memory_id: memory {memory_id} not found; nothing was changed"
                ) from None
        return records

    async def batch_update(self, items: list[tuple[str, str | None, dict[str, Any] | None]]) -> int:
        """`(id, text, metadata)` each, all checked to exist first, then updated one by one
        as `update` does (its lock, mem0's UPDATE history row). A memory deleted between the
        check and its turn fails the call there (400); the ones before it stay updated."""
        records = await self._owned_all([memory_id for memory_id, _, _ in items])
        for record, (memory_id, text, metadata) in zip(records, items, strict=True):
            async with self._locks.hold(_owner_lock(record.payload or {})):
                await self.memory.update(memory_id, text=text, metadata=metadata)
        return len(items)

    async def batch_delete(self, memory_ids: list[str]) -> int:
        """Erase the memories as `delete` does (one erasure), once all are known to exist."""
        records = await self._owned_all(memory_ids)
        await self.forgetting.memories(records)
        return len(memory_ids)

    # --- what session consolidation needs to write exactly once (lifecycle/consolidation.py)

    async def existing(self, memory_ids: Sequence[str]) -> set[str]:
        """Which of these ids are stored (retired ones too)."""

        def read() -> set[str]:
            return {i for i in memory_ids if self.store.get(vector_id=i) is not None}

        return await asyncio.to_thread(read)

    async def tagged(self, scope: EntityIds, token: str) -> list[WriteResult]:
        """The active memories of `scope` a consolidation run marked with `token`, as ADDs."""
        filters = active_only({**scope.filters(), CONSOLIDATION_KEY: token})

        def read() -> list[WriteResult]:
            total = int(self.store.count(filters))
            points, _ = self.store.list(filters=filters, top_k=max(total, 1))
            return [
                {
                    "id": str(p.id),
                    "memory": str((p.payload or {}).get("data") or ""),
                    "event": "ADD",
                }
                for p in points
            ]

        return await asyncio.to_thread(read)

    async def settle(self, items: list[WriteResult], scope: EntityIds) -> list[WriteResult]:
        return await self._writes.settle(items, scope)

    async def complete_fact(self, memory_id: str, scope: EntityIds) -> list[WriteResult]:
        return await self._writes.complete_fact(memory_id, scope)

    async def export_records(self, scope: EntityIds) -> list[ExportRecord]:
        """Every memory of `scope`, retired ones too: (id, payload, mem0 history rows).

        Read under no lock (an export is a consistent-enough read, see portability/document.py)."""

        def read() -> list[ExportRecord]:
            total = self.store.count(scope.filters())
            points, _ = self.store.list(filters=scope.filters(), top_k=max(int(total), 1))
            return [
                (str(p.id), dict(p.payload or {}), history_rows(self.memory, str(p.id)))
                for p in points
            ]

        return await asyncio.to_thread(read)  # one thread hop, not one per memory

    async def history_ids_in_use(self, row_ids: list[str]) -> dict[str, str]:
        """Which of these history row ids exist: id → the memory whose row it is."""
        return await asyncio.to_thread(history_ids_in_use, self.memory, row_ids)

    async def passage_vectors(self, texts: list[str]) -> list[list[float]]:
        """This service's embedder's vectors of texts to store, in one batch."""
        return await passage_vectors(self.memory, texts)

    async def restore_memory(
        self,
        memory_id: str,
        payload: dict[str, Any],
        vector: list[float],
        history: list[dict[str, Any]],
    ) -> int | None:
        """Write an imported memory as given (payload, history rows, and its vector from
        `passage_vectors`), under its scope's lock; None when the id exists already.

        History first: a failure before the memory is written leaves rows that the next
        import of the same id replaces."""
        async with self._locks.hold(_owner_lock(payload)):
            if await asyncio.to_thread(self.store.get, vector_id=memory_id) is not None:
                return None
            written = await asyncio.to_thread(restore_history, self.memory, memory_id, history)
            await asyncio.to_thread(
                self.store.insert, vectors=[vector], ids=[memory_id], payloads=[payload]
            )
        return written

    async def history(self, memory_id: str, scope: EntityIds) -> list[dict[str, Any]]:
        if scope:
            await self._owned(memory_id, scope)
        rows: list[dict[str, Any]] = await self.memory.history(memory_id)
        if not rows:
            raise NotFound(f"memory {memory_id} not found")
        return rows

    async def entities(self, page: int, page_size: int) -> tuple[int, list[EntityRow]]:
        """One page of the users / agents / runs that own memories, with counts, by type and name.

        A tenant-wide inventory (every memory carrying the id counts, whatever else it
        carries), computed from the stores' keyword indexes: no memory is loaded, only the
        distinct ids.
        """
        rows = await asyncio.to_thread(self._entity_rows)
        start = (page - 1) * page_size
        return len(rows), rows[start : start + page_size]

    def _entity_rows(self) -> list[EntityRow]:
        limit = max(int(self.store.count(None)), 1)  # no more distinct ids than memories
        counts: dict[tuple[str, str], int] = {}
        for key in IDENTITY_KEYS:
            for name, n in self.store.facet_counts(key, limit).items():
                if isinstance(name, str) and name:
                    counts[(key.removesuffix("_id"), name)] = n
        return [
            {"type": kind, "name": name, "id": name, "total_memories": n}
            for (kind, name), n in sorted(counts.items())
        ]

    def count(self) -> int:
        return int(self.store.count(None))

    def prepare(
        self, migrations: Sequence[postgres.Migration] = (), ready: bool = True
    ) -> list[str]:
        """Create or upgrade what the service keeps in PostgreSQL: the engine's state (mem0's
        history, the scope chain, the erasure ledger), the caller's `migrations`, the vector
        tables. Safe when replicas start together. Returns the steps applied. With `ready`
        false, `not_ready` stays as it is (the caller has more to do before serving)."""
        applied: list[str] = []
        if self.database is not None:
            steps = [
                *pg_history.MIGRATIONS,
                *scope_chain.MIGRATIONS,
                *erasure_ledger.MIGRATIONS,
                *migration_records.MIGRATIONS,
                *migrations,
            ]
            applied = self.database.migrate(steps)
            self.migration.open_shared(self.memory, self._version_of)
        self.store.create_col()
        if ready:
            self.not_ready = None
        return applied

    def check_ready(self) -> None:
        """Raise if the vector store or the history DB cannot answer."""
        if self.not_ready is not None:
            raise postgres.DatabaseUnavailable(self.not_ready)
        self.store.count(None)
        if self.database is not None:
            self.database.check()
            return
        with history_connection(self.memory) as connection:
            connection.execute("SELECT 1").fetchone()

    def close(self) -> None:
        """Close the stores (mem0 opens a second one lazily for entity links; both hold
        files open), mem0's history, then the Databases this engine owns."""
        for store in (self.store, opened_entity_store(self.memory)):
            if store is not None:
                store.close()
        close_history(self.memory)
        self.ledger.close()
        for database in self.databases():
            database.close()

    def embedded_stores(self) -> list[EdgeVectorStore]:
        """The embedded engine's open stores (memories, and entity links once mem0 opened
        them): the ones whose HNSW graph the service builds itself (stores/graph_builds.py)."""
        stores: list[Any] = [self.store, opened_entity_store(self.memory)]
        if self.migration.store is not None:
            stores[:1] = [index.store for index in self.migration.store.indexes.values()]
        return [store for store in stores if isinstance(store, EdgeVectorStore)]

    def databases(self) -> list[postgres.Database]:
        """The PostgreSQL databases this engine owns (history's, and the vectors' if other)."""
        return list(self._databases)

    # Defined last: inside the class body the name ``list`` is this method from here on, so
    # earlier annotations such as ``list[MemoryItem]`` still mean the builtin.
    async def list(
        self, scope: EntityIds, page: int, page_size: int, include_retired: bool = False
    ) -> tuple[int, list[MemoryItem]]:
        end = page * page_size
        filters = active_only(scope.filters(), include_retired)
        rows = await self.memory.get_all(filters=filters, top_k=end)
        total = await asyncio.to_thread(self.store.count, filters)
        items: list[MemoryItem] = rows["results"][end - page_size : end]
        return total, items
