"""mem0 underneath the service: one AsyncMemory per process, wired from the ServiceConfig.

Whatever depends on mem0's internals (provider registration, configs built past its
whitelists, the Qdrant server store, private attributes) is in `mem0_seam`; this module uses
mem0's public API and the seam's functions.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from mem0 import AsyncMemory
from mem0.configs.base import MemoryConfig

from memorystore.config import ServiceConfig
from memorystore.keyed_locks import KeyedLocks
from memorystore.rules.dedup import Duplicate, find_duplicate, same_guards
from memorystore.rules.supersede import restates, retired_by
from memorystore.scope import IDENTITY_KEYS, EntityIds, InvalidId
from memorystore.service.engine.mem0_seam import (
    EDGE_PROVIDER,
    MEM0_PAYLOAD_KEYS,
    NO_LLM_PROVIDER,
    OFFLINE_EMBEDDER_PROVIDERS,
    PG_PROVIDER,
    PROMOTED_KEYS,
    SERVER_PROVIDER,
    EdgeStoreConfig,
    PgStoreConfig,
    ServerStoreConfig,
    chat,
    create_memory,
    embedder_config,
    history_connection,
    history_ids_in_use,
    llm_config,
    memory_config,
    memory_hash,
    memory_item,
    opened_entity_store,
    restore_history,
    retire_memory,
    use_history,
    vector_store_config,
)
from memorystore.service.lifecycle import judge
from memorystore.service.retrieval.embedders import OFFLINE_EMBEDDERS
from memorystore.service.retrieval.indexing import (
    PREV_KEY,
    Hit,
    IndexTexts,
    fuse,
    index_texts,
    keyword_gates,
    line,
)
from memorystore.service.retrieval.lexical import keyword_text
from memorystore.service.retrieval.lexical import terms as lexical_terms
from memorystore.service.retrieval.reindex import INDEX_KEY, index_version
from memorystore.service.state import pg_history, postgres, scope_chain
from memorystore.spec import EmbedderProvider, LLMProvider

DASHSCOPE_COMPATIBLE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
# A retired memory (outdated, or merged into a fuller one) stays stored with these fields;
# search, recall and listings leave it out unless asked (`include_retired`).
LIFECYCLE_KEY = "lifecycle"  # "retired" (a keyword: the engine filters on it); absent: active
RETIRED = "retired"
RETIRED_AT_KEY = "retired_at"
SUCCESSOR_KEY = "superseded_by"
REASON_KEY = "retired_because"
RETIRED_KEYS = (LIFECYCLE_KEY, RETIRED_AT_KEY, SUCCESSOR_KEY, REASON_KEY)
NEIGHBOURS = 16  # nearest memories a new fact is compared with (duplicates, outdated ones)

log = logging.getLogger("memorystore.service")


def mem0_config(cfg: ServiceConfig) -> MemoryConfig:
    """Translate our config into mem0's, resolving secrets (fails at start-up, naming fields)."""
    emb = cfg.embedder
    dims = emb.vector_size()
    if emb.provider in OFFLINE_EMBEDDERS:
        embedder = embedder_config(
            OFFLINE_EMBEDDER_PROVIDERS[emb.provider],
            {
                "embedding_dims": dims,
                "model_kwargs": {
                    "threads": emb.threads,
                    "language_centering": cfg.retrieval.language_centering,
                },
            },
        )
    else:
        key = emb.api_key.resolve("embedder.apiKey").get_secret_value() if emb.api_key else None
        if emb.provider == EmbedderProvider.OLLAMA:
            conf = {"model": emb.model, "ollama_base_url": emb.base_url, "embedding_dims": dims}
            embedder = embedder_config("ollama", conf)
        else:
            base = emb.base_url or (
                DASHSCOPE_COMPATIBLE_URL if emb.provider == EmbedderProvider.DASHSCOPE else None
            )
            conf = {"model": emb.model, "api_key": key, "embedding_dims": dims}
            if base:
                conf["openai_base_url"] = base
            embedder = embedder_config("openai", conf)

    if cfg.llm is None:
        llm = llm_config(NO_LLM_PROVIDER, {})
    else:
        key = cfg.llm.api_key.resolve("llm.apiKey").get_secret_value() if cfg.llm.api_key else None
        conf = {"model": cfg.llm.model, "api_key": key, "temperature": cfg.llm.temperature}
        if cfg.llm.provider == LLMProvider.OLLAMA:
            conf.pop("api_key")
            conf["ollama_base_url"] = cfg.llm.base_url
            llm = llm_config("ollama", conf)
        else:
            base = cfg.llm.base_url or (
                DASHSCOPE_COMPATIBLE_URL if cfg.llm.provider == LLMProvider.DASHSCOPE else None
            )
            if base:
                conf["openai_base_url"] = base
            llm = llm_config("openai", conf)

    vs = cfg.vector_store
    if vs.embedded is not None:
        path = cfg.path_in_data_dir(vs.embedded.path, "qdrant")
        store = vector_store_config(
            EDGE_PROVIDER,
            EdgeStoreConfig(
                collection_name=vs.collection,
                embedding_model_dims=dims,
                path=str(path),
                keyword_search=cfg.retrieval.hybrid,
                tokenizer=cfg.retrieval.tokenizer,
            ),
        )
    elif vs.postgres is not None:
        conn = cfg.vector_database()
        assert conn is not None  # ServiceConfig checks it
        field = "vectorStore.postgres.database" if vs.postgres.database else "history.postgres"
        dsn = conn.dsn.resolve(f"{field}.dsn")
        assert dsn is not None  # a dsn is never optional
        store = vector_store_config(
            PG_PROVIDER,
            PgStoreConfig(
                collection_name=vs.collection,
                embedding_model_dims=dims,
                dsn=dsn.get_secret_value(),
                keyword_search=cfg.retrieval.hybrid,
                tokenizer=cfg.retrieval.tokenizer,
                hnsw_ef_search=vs.postgres.hnsw_ef_search,
                **postgres.settings_of(conn, field),
            ),
        )
    else:
        assert vs.server is not None
        key = vs.server.api_key.resolve("vectorStore.server.apiKey") if vs.server.api_key else None
        store = vector_store_config(
            SERVER_PROVIDER,
            ServerStoreConfig(
                collection_name=vs.collection,
                embedding_model_dims=dims,
                url=vs.server.url,
                api_key=key.get_secret_value() if key else None,
                shard_number=vs.server.shard_number,
                replication_factor=vs.server.replication_factor,
                tokenizer=cfg.retrieval.tokenizer,
            ),
        )
    if cfg.history.postgres is not None:  # mem0's own SQLite is replaced (use_history)
        return memory_config(store, llm, embedder, ":memory:")
    history = cfg.path_in_data_dir(cfg.history.path, "history.db")
    history.parent.mkdir(parents=True, exist_ok=True)
    return memory_config(store, llm, embedder, str(history))


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
    """WAL + synchronous=NORMAL on mem0's history connection.

    mem0 opens SQLite with the defaults (rollback journal, fsync on every commit): 10–20 ms
    per history row here, the largest part of an add. WAL with NORMAL survives a process
    crash; a power loss may drop the last commits, the same bound as the embedded vector
    store's unflushed WAL. The busy timeout covers a second process reading the file.
    """
    with history_connection(memory) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA busy_timeout=5000")


class NotFound(LookupError):
    """An id that does not exist in the caller's scope (404, whether absent or not theirs)."""


def active_only(filters: dict[str, Any], include_retired: bool = False) -> dict[str, Any]:
    """`filters` narrowed to memories that are not retired (unless include_retired).

    The condition joins the request's own NOT list in whichever spelling it used (the
    stores read one of `NOT` / `$not`)."""
    if include_retired:
        return filters
    key = "$not" if "$not" in filters and "NOT" not in filters else "NOT"
    return {**filters, key: [*filters.get(key, []), {LIFECYCLE_KEY: RETIRED}]}


def _repeat(kept_id: str, text: str, rule: str) -> dict[str, Any]:
    """The answer for a new fact that was not stored: it repeats the kept memory."""
    return {"id": kept_id, "memory": text, "event": "NONE", "duplicate_of": kept_id, "rule": rule}


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
        # history.postgres: the state replicas share (history, locks, scope order, idempotency)
        self.database = (
            postgres.database_for(cfg.history.postgres, "history.postgres")
            if cfg.history.postgres is not None
            else None
        )
        self.memory = AsyncMemory(mem0_config(cfg))
        self.infer_available = cfg.llm is not None
        # mem0's md5 dedup is read-then-write (mem0 issue 6515), and so is ours for raw text:
        # extraction runs one at a time per scope (its facts are unknown in advance); a raw
        # write only excludes writes of the same text to the same scope. With PostgreSQL the
        # locks hold across replicas.
        self._locks: KeyedLocks | postgres.ReplicaLocks
        # the last memory written per scope: the next one's context and prev_id
        self._chain: scope_chain.LocalChain | scope_chain.PgChain
        if self.database is None:
            _tune_history_db(self.memory)
            self._locks = KeyedLocks()
            self._chain = scope_chain.LocalChain()
        else:
            use_history(self.memory, pg_history.PgHistory(self.database))
            self._locks = postgres.ReplicaLocks(self.database, "scope")
            self._chain = scope_chain.PgChain(self.database)
        # a PostgreSQL schema is checked at start-up, in the background (app._prepare)
        self.not_ready: str | None = None
        if self.database is not None or cfg.vector_store.postgres is not None:
            self.not_ready = "the database schema is not checked yet"
        retrieval = cfg.retrieval
        self._fused_search = retrieval.hybrid or retrieval.neighbour_weight > 0
        # centring is done by the offline embedders only: a remote one's vectors stay raw
        centred = retrieval.language_centering and cfg.embedder.provider in OFFLINE_EMBEDDERS
        self.index_version = index_version(retrieval, centred)

    @property
    def store(self) -> Any:
        return self.memory.vector_store

    async def add(
        self,
        messages: list[dict[str, Any]],
        scope: EntityIds,
        metadata: dict[str, Any] | None,
        infer: bool,
    ) -> list[dict[str, Any]]:
        if infer and self.infer_available:
            async with self._locks.hold(scope):
                result = await self.memory.add(
                    messages, **scope.filters(), metadata=metadata, infer=True
                )
                # mem0 wrote these with the current settings: record it, or the next start
                # would take them for memories from before versions and re-index them
                for item in result["results"]:
                    if item.get("event") in ("ADD", "UPDATE") and item.get("id"):
                        stamp = {INDEX_KEY: self.index_version}
                        await asyncio.to_thread(self.store.update, item["id"], None, stamp)
                return await self._settle_extracted(result["results"], scope)
        return await self._add_raw(messages, scope, metadata)

    async def _add_raw(
        self, messages: list[dict[str, Any]], scope: EntityIds, metadata: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """Store each non-system message as one memory; an identical text in scope is kept once.

        Only conversation turns are chained for context: a message with a speaker (`name`),
        or any message of a request that holds both sides of an exchange. A fact written on
        its own (an agent's add_memory, a list of notes) stands alone: embedding it with an
        unrelated fact written before it ranked that neighbour's topic onto it. Facts are
        also kept true (`_add_fact`); turns are records of what was said, kept as said.
        """
        roles = {msg["role"] for msg in messages}
        exchange = {"user", "assistant"} <= roles
        settings = self.cfg.consolidation
        results: list[dict[str, Any]] = []
        for msg in messages:
            if msg["role"] == "system":
                continue
            turn = exchange or bool(msg.get("name"))
            if not turn and (settings.deduplicate or settings.supersede):
                async with self._locks.hold(scope):  # the comparison and the write are one step
                    results.extend(await self._add_fact(msg, scope, metadata or {}))
                continue
            digest = memory_hash(msg["content"])
            async with self._locks.hold((scope, digest)):
                existing = await asyncio.to_thread(
                    self.store.list, filters={**scope.filters(), "hash": digest}, top_k=1
                )
                if existing[0]:
                    found = {"id": str(existing[0][0].id), "memory": msg["content"]}
                    results.append({**found, "event": "NONE"})
                    continue
                results.append(await self._insert_raw(msg, scope, metadata or {}, turn))
        return results

    async def _add_fact(
        self, msg: dict[str, Any], scope: EntityIds, metadata: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Write one fact unless it repeats a kept one; retire what it makes outdated.

        The new memory is written before any old one is retired, so a failure in between
        leaves both (never neither). The caller holds the scope's lock."""
        content = msg["content"]
        settings = self.cfg.consolidation
        date = metadata.get("date")
        texts = index_texts(
            content, msg.get("name"), str(date) if date else None, None, self.cfg.retrieval
        )
        vector = await asyncio.to_thread(self.memory.embedding_model.embed, texts.dense, "add")
        near = await self._neighbours(scope, vector)
        duplicate = find_duplicate(content, near.items()) if settings.deduplicate else None
        if duplicate is None and settings.deduplicate:
            comparable = [(i, t) for i, t in near.items() if same_guards(content, t)]
            same = restates(content, comparable)
            duplicate = Duplicate(same, "restated", "old") if same is not None else None
        if duplicate is not None and duplicate.keep == "old":
            return [_repeat(duplicate.id, near[duplicate.id], duplicate.rule)]
        added = await self._insert_raw(msg, scope, metadata, False, (texts, vector))
        outdated: dict[str, str] = {}
        if duplicate is not None:  # the new text holds the old one and more
            outdated[duplicate.id] = f"merged into a fuller version ({duplicate.rule})"
        if settings.supersede:
            for old_id, reason in retired_by(content, near.items()):
                outdated.setdefault(old_id, reason)
        retired = [
            await self._retire(old_id, near[old_id], added["id"], reason)
            for old_id, reason in outdated.items()
        ]
        return [added, *retired]

    async def _settle_extracted(
        self, items: list[dict[str, Any]], scope: EntityIds
    ) -> list[dict[str, Any]]:
        """After mem0's add-only extraction: drop repeats, then let the model retire.

        mem0 writes its facts before the service sees them, so a fact that repeats a kept one
        is deleted again (its history shows ADD, DELETE) and reported as NONE naming the kept
        one. The model then judges, in one call for all new facts, which nearest memories they
        make outdated and which new facts only repeat one in other words (those are deleted
        again too); an answer that cannot be read falls back to the offline rules."""
        settings = self.cfg.consolidation
        added = [i for i in items if i.get("event") == "ADD" and i.get("id")]
        if not added or not (settings.deduplicate or settings.supersede):
            return items
        fresh = {str(i["id"]) for i in added}
        near: dict[str, str] = {}
        kept: list[tuple[str, str]] = []
        results = [i for i in items if i not in added]
        outdated: dict[str, tuple[str, str]] = {}
        for item in added:
            new_id, text = str(item["id"]), str(item.get("memory") or "")
            vector = await asyncio.to_thread(self.memory.embedding_model.embed, text, "add")
            mine = await self._neighbours(scope, vector, exclude=fresh)
            near.update(mine)
            duplicate = find_duplicate(text, mine.items()) if settings.deduplicate else None
            if duplicate is not None and duplicate.keep == "old":
                await self.memory.delete(new_id)
                results.append(_repeat(duplicate.id, mine[duplicate.id], duplicate.rule))
                continue
            results.append(item)
            kept.append((new_id, text))
            if duplicate is not None:
                reason = f"merged into a fuller version ({duplicate.rule})"
                outdated.setdefault(duplicate.id, (new_id, reason))
        dropped: set[str] = set()
        if settings.supersede and kept and near:
            existing = [(i, t) for i, t in near.items() if i not in outdated]
            for verdict in await self._judge(kept, existing):
                if verdict.kind == "same":  # the model found a repeat the text rules missed
                    dropped.add(verdict.new_id)
                    await self.memory.delete(verdict.new_id)
                    results = [r for r in results if r.get("id") != verdict.new_id]
                    results.append(_repeat(verdict.old_id, near[verdict.old_id], "model"))
                else:
                    outdated.setdefault(verdict.old_id, (verdict.new_id, verdict.reason))
        for old_id, (new_id, reason) in outdated.items():
            if new_id in dropped:  # never retire a memory for a successor that is gone
                continue
            results.append(await self._retire(old_id, near[old_id], new_id, reason))
        return results

    async def _judge(
        self, new: list[tuple[str, str]], existing: list[tuple[str, str]]
    ) -> list[judge.Verdict]:
        try:
            return await asyncio.to_thread(
                judge.judge, lambda messages: chat(self.memory, messages), new, existing
            )
        except Exception as exc:  # a model that fails or rambles must not fail the write
            log.warning(
                "the model's judgement of outdated memories failed (%s): offline rules decide",
                type(exc).__name__,
            )
        return [
            judge.Verdict(old_id, new_id, reason)
            for new_id, text in new
            for old_id, reason in retired_by(text, existing)
        ]

    async def _neighbours(
        self,
        scope: EntityIds,
        vector: list[float],
        exclude: set[str] | frozenset[str] = frozenset(),
    ) -> dict[str, str]:
        """The scope's nearest memories that are not retired: id → text."""
        hits = await asyncio.to_thread(
            self.store.search,
            query="",
            vectors=vector,
            top_k=NEIGHBOURS,
            filters=active_only(scope.filters()),
        )
        return {
            str(h.id): str((h.payload or {}).get("data") or "")
            for h in hits
            if str(h.id) not in exclude
        }

    async def _retire(
        self, memory_id: str, text: str, successor: str, reason: str
    ) -> dict[str, Any]:
        now = datetime.now(UTC).isoformat()
        fields = {
            LIFECYCLE_KEY: RETIRED,
            RETIRED_AT_KEY: now,
            SUCCESSOR_KEY: successor,
            REASON_KEY: reason,
        }
        await retire_memory(self.memory, memory_id, text, fields, now)
        return {
            "id": memory_id,
            "memory": text,
            "event": "DELETE",
            "superseded_by": successor,
            "reason": reason,
        }

    async def _insert_raw(
        self,
        msg: dict[str, Any],
        scope: EntityIds,
        metadata: dict[str, Any],
        turn: bool = True,
        prepared: tuple[IndexTexts, list[float]] | None = None,
    ) -> dict[str, Any]:
        """mem0's `infer=False` insert (`mem0_seam.create_memory`), with our index texts.

        The memory keeps mem0's payload (data, hash, timestamps, role, actor_id) and history
        row; what differs is what is embedded and keyword-indexed (`retrieval/indexing.py`) and
        the link to the memory written just before it in the scope (`prev_id`). A fact
        (`turn` false) comes `prepared`: its texts and vector, computed by the caller.
        """
        content, name = msg["content"], msg.get("name")
        memory_id = str(uuid.uuid4())
        # claim the link first, so concurrent writes in a scope form one chain
        previous = None
        if turn:
            previous = await self._chain.claim(scope, memory_id, line(content, name))
        if prepared is None:
            date = metadata.get("date")
            texts = index_texts(
                content,
                name,
                str(date) if date else None,
                previous[1] if previous else None,
                self.cfg.retrieval,
            )
            vector = await asyncio.to_thread(self.memory.embedding_model.embed, texts.dense, "add")
        else:
            texts, vector = prepared
        fields = {**metadata, **scope.filters(), "role": msg["role"]}
        fields[INDEX_KEY] = self.index_version
        if name:
            fields["actor_id"] = name
        if previous:
            fields[PREV_KEY] = previous[0]
        await create_memory(self.memory, memory_id, vector, content, texts.lexical, fields)
        return {
            "id": memory_id,
            "memory": content,
            "event": "ADD",
            "actor_id": name,
            "role": msg["role"],
        }

    async def search(
        self,
        query: str,
        scope: EntityIds,
        top_k: int,
        threshold: float,
        extra_filters: dict[str, Any] | None = None,
        include_retired: bool = False,
    ) -> list[dict[str, Any]]:
        filters = active_only({**(extra_filters or {}), **scope.filters()}, include_retired)
        if not self._fused_search:
            result = await self.memory.search(
                query, top_k=top_k, filters=filters, threshold=threshold
            )
            return result["results"]
        vector = await asyncio.to_thread(self.memory.embedding_model.embed, query, "search")
        hits = await asyncio.to_thread(self._fused, query, vector, filters, top_k, threshold)
        return [memory_item(hit.id, hit.score, hit.payload, {PREV_KEY, INDEX_KEY}) for hit in hits]

    def _fused(
        self,
        query: str,
        vector: list[float],
        filters: dict[str, Any],
        top_k: int,
        threshold: float,
    ) -> list[Hit]:
        settings = self.cfg.retrieval
        n = max(settings.candidates, top_k)
        dense = self.store.search(query=query, vectors=vector, top_k=n, filters=filters)
        lexical: list[Any] = []
        if settings.hybrid:
            lexical = self.store.keyword_search(query=query, top_k=n, filters=filters) or []
        dense_ids = {str(hit.id) for hit in dense}
        keyword_only = [str(hit.id) for hit in lexical if str(hit.id) not in dense_ids]
        gates: dict[str, float] = {}
        if lexical:
            candidates = {str(h.id): keyword_text(h.payload or {}) for h in (*dense, *lexical)}
            gates = keyword_gates(
                lexical_terms(query, settings.tokenizer),
                {i: lexical_terms(text, settings.tokenizer) for i, text in candidates.items()},
                [(str(h.id), h.payload or {}) for h in lexical],
            )
        return fuse(
            [(str(h.id), h.score or 0.0, h.payload or {}) for h in dense],
            [(str(h.id), h.score or 0.0, h.payload or {}) for h in lexical],
            self.store.cosine(vector, keyword_only, filters),
            settings,
            threshold,
            top_k,
            gates,
        )

    async def list(
        self, scope: EntityIds, page: int, page_size: int, include_retired: bool = False
    ) -> tuple[int, list[dict[str, Any]]]:
        end = page * page_size
        filters = active_only(scope.filters(), include_retired)
        rows = await self.memory.get_all(filters=filters, top_k=end)
        total = await asyncio.to_thread(self.store.count, filters)
        return total, rows["results"][end - page_size : end]

    async def _owned(self, memory_id: str, scope: EntityIds) -> Any:
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

    async def get(self, memory_id: str, scope: EntityIds) -> dict[str, Any]:
        await self._owned(memory_id, scope)
        item = await self.memory.get(memory_id)
        if item is None:
            raise NotFound(f"memory {memory_id} not found")
        return item

    async def update(
        self, memory_id: str, scope: EntityIds, text: str | None, metadata: dict[str, Any] | None
    ) -> dict[str, Any]:
        record = await self._owned(memory_id, scope)
        async with self._locks.hold(_owner_lock(record.payload or {})):
            await self.memory.update(memory_id, text=text, metadata=metadata)
        return await self.get(memory_id, scope)

    def lock_for(self, payload: dict[str, Any]) -> AbstractAsyncContextManager[None]:
        """The write lock of the scope a stored memory belongs to (re-indexing holds it)."""
        return self._locks.hold(_owner_lock(payload))

    def writes_paused(self) -> AbstractAsyncContextManager[None]:
        """No write runs while this is held (a backup's snapshot); reads go on."""
        return self._locks.exclusive()

    async def delete(self, memory_id: str, scope: EntityIds) -> None:
        record = await self._owned(memory_id, scope)
        async with self._locks.hold(_owner_lock(record.payload or {})):
            await self.memory.delete(memory_id)

    async def delete_all(self, scope: EntityIds) -> int:
        async with self._locks.hold(scope):
            before = await asyncio.to_thread(self.store.count, scope.filters())
            await self._chain.forget(scope)
            await self.memory.delete_all(**scope.filters())
            after = await asyncio.to_thread(self.store.count, scope.filters())
        return before - after

    async def _owned_all(self, memory_ids: list[str]) -> list[Any]:
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
        """Delete each memory as `delete` does, once all are known to exist."""
        records = await self._owned_all(memory_ids)
        for record, memory_id in zip(records, memory_ids, strict=True):
            async with self._locks.hold(_owner_lock(record.payload or {})):
                await self.memory.delete(memory_id)
        return len(memory_ids)

    async def export_records(
        self, scope: EntityIds
    ) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
        """Every memory of `scope`, retired ones too: (id, payload, mem0 history rows).

        Read under no lock (an export is a consistent-enough read, see portability.py)."""

        def read() -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
            total = self.store.count(scope.filters())
            points, _ = self.store.list(filters=scope.filters(), top_k=max(int(total), 1))
            return [
                (str(p.id), dict(p.payload or {}), self.memory.db.get_history(str(p.id)))
                for p in points
            ]

        return await asyncio.to_thread(read)  # one thread hop, not one per memory

    async def history_ids_in_use(self, row_ids: list[str]) -> dict[str, str]:
        """Which of these history row ids exist: id → the memory whose row it is."""
        return await asyncio.to_thread(history_ids_in_use, self.memory, row_ids)

    async def restore_memory(
        self,
        memory_id: str,
        payload: dict[str, Any],
        dense_text: str,
        history: list[dict[str, Any]],
    ) -> int | None:
        """Write an imported memory as given (payload, history rows), embedding `dense_text`
        with this service's embedder, under its scope's lock; None when the id exists already.

        History first: a failure before the memory is written leaves rows that the next
        import of the same id replaces."""
        vector = await asyncio.to_thread(self.memory.embedding_model.embed, dense_text, "add")
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
        rows = await self.memory.history(memory_id)
        if not rows:
            raise NotFound(f"memory {memory_id} not found")
        return rows

    async def entities(self, page: int, page_size: int) -> tuple[int, list[dict[str, Any]]]:
        """One page of the users / agents / runs that own memories, with counts, by type and name.

        A tenant-wide inventory (every memory carrying the id counts, whatever else it
        carries), computed from the stores' keyword indexes: no memory is loaded, only the
        distinct ids.
        """
        rows = await asyncio.to_thread(self._entity_rows)
        start = (page - 1) * page_size
        return len(rows), rows[start : start + page_size]

    def _entity_rows(self) -> list[dict[str, Any]]:
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

    def prepare(self, migrations: Sequence[postgres.Migration] = ()) -> list[str]:
        """Create or upgrade what the service keeps in PostgreSQL: the engine's state (mem0's
        history, the scope chain), the caller's `migrations`, the vector tables. Safe when
        replicas start together. Returns the steps applied."""
        applied: list[str] = []
        if self.database is not None:
            steps = [*pg_history.MIGRATIONS, *scope_chain.MIGRATIONS, *migrations]
            applied = self.database.migrate(steps)
        self.store.create_col()
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
        # mem0 opens a second store lazily for entity links; both hold files open.
        for store in (self.store, opened_entity_store(self.memory)):
            close = getattr(store, "close", None)
            if close is not None:
                close()
        self.memory.db.close()
        for database in self.databases():
            database.close()

    def databases(self) -> list[postgres.Database]:
        """The PostgreSQL databases this engine uses (history's, and the vectors' if other)."""
        found = [self.database] if self.database is not None else []
        vectors = getattr(self.store, "database", None)
        if isinstance(vectors, postgres.Database) and vectors is not self.database:
            found.append(vectors)
        return found
