"""Every use of mem0's internals, so that a mem0 upgrade breaks here or nowhere.

`tests/unit/service/engine/test_mem0_seam.py` checks each item below against the installed
mem0; after an upgrade, its failures name what to change. Touched, and why:

- `EmbedderFactory.provider_to_class`, `VectorStoreFactory.provider_to_class`: mem0 has no
  registration call for embedders or stores, and these dicts of dotted class paths are what
  its factories read (register_providers).
- `LlmFactory.register_provider`: mem0 builds an LLM even when extraction is off (NoLLM).
- `model_construct` on `EmbedderConfig`, `LlmConfig`, `VectorStoreConfig`, `MemoryConfig`: the
  only way past mem0's provider whitelists; it skips field checks too, so a renamed field
  would be dropped silently (the *_config builders).
- `SQLiteManager._lock` (mem0's history DB): mem0 writes the shared connection from worker
  threads under it, so ours must hold it too (history_connection).
- `AsyncMemory.db` and `SQLiteManager`'s methods (add_history, batch_add_history,
  get_history, save_messages, get_last_messages, reset, close): with history.postgres,
  use_history puts `pg_history.PgHistory`, which has the same methods, where mem0 calls them
  (mem0 has no pluggable history: mem0 issues 3098, 3925). The engine reads and closes the
  history only through history_rows and close_history.
- `AsyncMemory._entity_store`: the entity-link store mem0 opens lazily; read without opening
  one, to close it (opened_entity_store).
- `AsyncMemory._create_memory`: create_memory writes the same payload and history row for a
  raw write, only with our own vector and keyword text.
- mem0's `history` table (`id, memory_id, old_memory, new_memory, event, created_at,
  updated_at, is_deleted, actor_id, role`): restore_history writes an imported memory's rows
  with their own ids and timestamps (mem0's add_history mints new ones), and
  history_ids_in_use reads which of those ids are taken (service/portability/document.py).
- mem0's `messages` table and its key (`_build_session_scope`: the ids as sorted `key=value`
  pairs joined by `&`, with `%&=` escaped): an erasure deletes the recent messages mem0 keeps
  of the erased scopes (purge_messages, session_scope_ids); and every `history` row of an
  erased memory, mem0's DELETE row (with the text) included (purge_history, record_added).
- mem0's result shape (`promoted_payload_keys`, `core_and_promoted_keys` in its formatting):
  memory_item shapes fused-search results the same way.
- the logger `mem0.utils.spacy_models`: silenced below.
- `AsyncMemory.embedding_model` and `AsyncMemory.llm` of mem0's OpenAI providers (`openai`,
  and DashScope at its compatible endpoint): each builds one `openai.OpenAI` client, its
  `client`, from `config.api_key` at construction; the client sends its public `api_key`
  with every request. A rotated key file is applied there (use_embedder_key, use_llm_key).
- `AsyncMemory.config.vector_store.config`: the store config mem0 deep-copies when it opens
  its entity store; a rotated Qdrant API key is set there, and on the clients of the store
  and of an opened entity store (use_vector_store_key).
- `AsyncMemory.vector_store`, `.embedding_model`, `.collection_name`, `.config.vector_store`,
  `._entity_store`, and the factories' `create`: an embedder migration builds a second
  index as mem0 builds its own (build_index), puts its routing layer where mem0 calls the
  store and the embedder (use_index), and after a switch opens the entity-link store next to
  the new index (use_entity_index).

The second and only other place that touches mem0's internals is
`service/stores/qdrant_server.py`: QdrantServerStore subclasses mem0's `Qdrant` store and
overrides its private methods. Its touches are listed here too, and checked by the same test:

- `Qdrant._create_filter`: every read of mem0's Qdrant store (search, search_batch, list)
  builds its filter there; QdrantServerStore replaces it with the engine's translation
  (stores/server_filters.py), so the server selects and refuses as the other stores do.
- `Qdrant._get_bm25_encoder` and its cache `_bm25_encoder`: mem0 encodes BM25 through them
  with fastembed (a model download); OfflineBm25 takes its place.
- `Qdrant._has_bm25_slot`: whether the collection has the `bm25` sparse vector, read by
  mem0's insert and update (QdrantServerStore.create_col sets it).
- `Qdrant.__init__` calls `self.create_col(embedding_model_dims, on_disk)` after setting
  `self.client`; QdrantServerStore's own create_col (the layout, the payload indexes, the
  dimension check) runs there, and its `client` property guards every call.
- `Qdrant.insert`, `update`, `delete`, `search`, `search_batch`: inherited, through
  `self.client` (QdrantServerStore normalises the ids first).
- `Qdrant`'s attributes `client`, `collection_name`, `embedding_model_dims`, `on_disk`, set
  by its constructor and read by QdrantServerStore.

Relied on by the stores (`stores/protocol.VectorStore`, the calls mem0 makes on its
`VectorStoreBase` and the service's own), which mem0 builds through its factory:

- mem0 calls a store's methods and requires no base class: the embedded and PostgreSQL
  stores do not derive from `VectorStoreBase` (its only other use, a warning when a store's
  `keyword_search` is the base's own, does not apply to them).
- mem0 puts the text to keyword-index in the payload key `text_lemmatized` (also read by
  QdrantServerStore via mem0's insert, and written by create_memory).
- mem0's `delete_all` reads `list()` as qdrant-client's `(points, next_offset)`.
- `SQLiteManager.add_history(..., is_deleted=)` and `AsyncMemory.db`: retire_memory records a
  retirement as the DELETE row mem0's own delete writes (history shows it like a delete).
- `AsyncMemory.llm.generate_response(messages, response_format=)`: chat asks the configured
  extraction model to judge outdated memories (service/lifecycle/judge.py) through mem0's provider.
- mem0 opens its entity store through the same factory, on a copy of the store config whose
  `collection_name` it rewrites (EdgeStoreConfig and ServerStoreConfig keep that field); the
  copy is a deepcopy, which shares PgStoreConfig's Database (`Database.__deepcopy__`).
- mem0's factory passes a store config as `config.model_dump()`, which hands PgStoreConfig's
  Database over as the object itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

from mem0 import AsyncMemory
from mem0.configs.base import MemoryConfig
from mem0.embeddings.configs import EmbedderConfig
from mem0.llms.base import LLMBase
from mem0.llms.configs import LlmConfig
from mem0.memory.storage import SQLiteManager
from mem0.utils.factory import EmbedderFactory, LlmFactory, VectorStoreFactory
from mem0.vector_stores.configs import VectorStoreConfig
from openai import OpenAI
from pydantic import BaseModel, ConfigDict

from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS
from memorystore.service.engine.results import MemoryItem
from memorystore.service.ops.stages import stage
from memorystore.service.state.postgres import Database
from memorystore.service.state.tables import checkpoint_local
from memorystore.service.stores.embedded import EdgeVectorStore
from memorystore.service.stores.pgvector.store import PgVectorStore
from memorystore.service.stores.protocol import VectorStore
from memorystore.service.stores.qdrant_server import QdrantServerStore, ca_context
from memorystore.spec import INDEX_AFTER, LexicalTokenizer

__all__ = [
    "EDGE_PROVIDER",
    "HISTORY_COLUMNS",
    "MEM0_PAYLOAD_KEYS",
    "NO_LLM_PROVIDER",
    "OFFLINE_EMBEDDER_PROVIDERS",
    "PG_PROVIDER",
    "PROMOTED_KEYS",
    "SERVER_PROVIDER",
    "SPACY_LOGGER",
    "EdgeStoreConfig",
    "NoLLM",
    "PgStoreConfig",
    "ServerStoreConfig",
    "build_index",
    "chat",
    "checkpoint_history",
    "close_history",
    "create_memory",
    "embedder_config",
    "history_connection",
    "history_ids_in_use",
    "history_rows",
    "history_values",
    "llm_config",
    "memory_config",
    "memory_hash",
    "memory_item",
    "memory_payload",
    "opened_entity_store",
    "purge_history",
    "purge_messages",
    "record_added",
    "register_providers",
    "restore_history",
    "retire_memory",
    "session_scope_ids",
    "use_embedder_key",
    "use_entity_index",
    "use_history",
    "use_index",
    "use_llm_key",
    "use_vector_store_ca",
    "use_vector_store_key",
    "vector_store_config",
]

# mem0 warns on first use that spaCy is missing. Its lemmatiser and entity boosts need
# spaCy models that are not on PyPI (downloaded at run time), so they stay off by design.
SPACY_LOGGER = "mem0.utils.spacy_models"
logging.getLogger(SPACY_LOGGER).setLevel(logging.ERROR)

EDGE_PROVIDER = "memorystore-edge"
SERVER_PROVIDER = "memorystore-qdrant"
PG_PROVIDER = "memorystore-postgres"
NO_LLM_PROVIDER = "memorystore-none"
OFFLINE_EMBEDDER_PROVIDERS = {name: f"memorystore-{name}" for name in OFFLINE_EMBEDDERS}

# payload keys mem0 writes for every memory and keeps out of a result's `metadata`
MEM0_PAYLOAD_KEYS = frozenset({"data", "hash", "created_at", "updated_at", "text_lemmatized"})
# payload keys mem0 lifts to a result's top level
PROMOTED_KEYS = ("user_id", "agent_id", "run_id", "actor_id", "role", "attributed_to")


def _dotted(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# mem0 ships no type information: its LLMBase is Any to mypy
class NoLLM(LLMBase):
    """Stands in for 'no extraction model': the service never calls it (infer is forced off)."""

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)

    def generate_response(self, messages: list[dict[str, str]], **_: Any) -> str:
        raise RuntimeError("no extraction model is configured (llm is unset)")


class EdgeStoreConfig(BaseModel):
    collection_name: str
    embedding_model_dims: int
    path: str
    keyword_search: bool = False
    tokenizer: LexicalTokenizer = LexicalTokenizer.MULTILINGUAL
    index_after: int = INDEX_AFTER


class ServerStoreConfig(BaseModel):
    collection_name: str
    embedding_model_dims: int
    url: str
    api_key: str | None = None
    ca: str | None = None  # PEM: the server's certificate is verified against it
    shard_number: int | None = None
    replication_factor: int | None = None
    keyword_search: bool = False
    tokenizer: LexicalTokenizer = LexicalTokenizer.MULTILINGUAL


class PgStoreConfig(BaseModel):
    """PgVectorStore's arguments; `database` is the engine's (mem0's factory passes it on)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection_name: str
    embedding_model_dims: int
    database: Database
    keyword_search: bool = False
    tokenizer: LexicalTokenizer = LexicalTokenizer.MULTILINGUAL
    hnsw_ef_search: int = 100


def register_providers() -> None:
    """Make mem0's factories build our embedders, stores and NoLLM (idempotent)."""
    for name, cls in OFFLINE_EMBEDDERS.items():
        EmbedderFactory.provider_to_class[OFFLINE_EMBEDDER_PROVIDERS[name]] = _dotted(cls)
    VectorStoreFactory.provider_to_class[EDGE_PROVIDER] = _dotted(EdgeVectorStore)
    VectorStoreFactory.provider_to_class[SERVER_PROVIDER] = _dotted(QdrantServerStore)
    VectorStoreFactory.provider_to_class[PG_PROVIDER] = _dotted(PgVectorStore)
    LlmFactory.register_provider(NO_LLM_PROVIDER, _dotted(NoLLM))


def embedder_config(provider: str, config: dict[str, Any]) -> EmbedderConfig:
    """mem0's embedder config, built past its provider whitelist for our offline embedders."""
    if provider in OFFLINE_EMBEDDER_PROVIDERS.values():
        return EmbedderConfig.model_construct(provider=provider, config=config)
    return EmbedderConfig(provider=provider, config=config)


def llm_config(provider: str, config: dict[str, Any]) -> LlmConfig:
    """mem0's LLM config, built past its provider whitelist for NoLLM."""
    if provider == NO_LLM_PROVIDER:
        return LlmConfig.model_construct(provider=provider, config=config)
    return LlmConfig(provider=provider, config=config)


def vector_store_config(
    provider: str, config: EdgeStoreConfig | ServerStoreConfig | PgStoreConfig
) -> VectorStoreConfig:
    """mem0's vector-store config for one of our stores (its whitelist knows neither)."""
    return VectorStoreConfig.model_construct(provider=provider, config=config)


def memory_config(
    vector_store: VectorStoreConfig,
    llm: LlmConfig,
    embedder: EmbedderConfig,
    history_db_path: str,
) -> MemoryConfig:
    """mem0's whole config, with our providers registered so AsyncMemory can build it.

    model_construct all the way down: pydantic re-runs the nested whitelist validators
    otherwise. Every part was validated by our models or mem0's own.
    """
    register_providers()
    return MemoryConfig.model_construct(
        vector_store=vector_store, llm=llm, embedder=embedder, history_db_path=history_db_path
    )


def build_index(config: MemoryConfig) -> tuple[VectorStore, Any]:
    """The vector store and embedder `config` names, built as AsyncMemory builds its own
    (an embedder migration's second index)."""
    register_providers()
    embedder = EmbedderFactory.create(
        config.embedder.provider, config.embedder.config, config.vector_store.config
    )
    store = VectorStoreFactory.create(config.vector_store.provider, config.vector_store.config)
    return cast(VectorStore, store), embedder


def use_index(memory: AsyncMemory, store: Any, embedder: Any) -> None:
    """Make `memory` call `store` and `embedder` (the migration's routing layer)."""
    memory.vector_store = store
    memory.embedding_model = embedder


def use_entity_index(memory: AsyncMemory, config: MemoryConfig) -> None:
    """Open mem0's entity-link store next to `config`'s collection from now on (after an
    embedder switch: the old one holds the old embedder's vectors). The links made so far
    stay with the old collection; mem0 makes new ones as it extracts."""
    store = opened_entity_store(memory)
    memory.config.vector_store = config.vector_store
    memory.collection_name = config.vector_store.config.collection_name
    memory._entity_store = None
    if store is not None:
        store.close()


@contextmanager
def history_connection(memory: AsyncMemory) -> Iterator[sqlite3.Connection]:
    """mem0's history connection, held under mem0's own lock for as long as it is used."""
    db = memory.db
    with db._lock:
        yield db.connection


def opened_entity_store(memory: AsyncMemory) -> VectorStore | None:
    """The entity-link store if mem0 has opened it (the public property would open one)."""
    return cast(VectorStore | None, memory._entity_store)


def use_embedder_key(memory: AsyncMemory, api_key: str) -> None:
    """Send `api_key` with the embedder's next request (mem0's OpenAI embedder; during an
    embedder migration, every index's that has one)."""
    indexes = _indexes(memory)
    if indexes is None:
        _use_openai_key(memory.embedding_model, api_key, "embedder")
        return
    remote = [
        i.embedder for i in indexes if isinstance(getattr(i.embedder, "client", None), OpenAI)
    ]
    if not remote:
        raise TypeError("embedder: mem0's provider has no OpenAI client to give a key to")
    for embedder in remote:
        _use_openai_key(embedder, api_key, "embedder")


def use_llm_key(memory: AsyncMemory, api_key: str) -> None:
    """Send `api_key` with the extraction model's next request (mem0's OpenAI LLM)."""
    _use_openai_key(memory.llm, api_key, "llm")


def _use_openai_key(model: Any, api_key: str, field: str) -> None:
    client = model.client
    if not isinstance(client, OpenAI):
        raise TypeError(f"{field}: mem0's provider has no OpenAI client to give a key to")
    model.config.api_key = api_key  # what it was built from, so nothing keeps the old key
    client.api_key = api_key


def use_vector_store_key(memory: AsyncMemory, api_key: str) -> None:
    """Send `api_key` with every later call to the Qdrant server: from the store config mem0
    copies when it opens its entity store, the store's and an opened entity store's clients."""
    config = memory.config.vector_store.config
    if not isinstance(config, ServerStoreConfig):
        raise TypeError("vectorStore.server.apiKey: the vector store is not a Qdrant server")
    config.api_key = api_key  # first: an entity store opened from now on has the new key
    for store in (*_stores(memory), opened_entity_store(memory)):
        if isinstance(store, QdrantServerStore):
            store.use_api_key(api_key)


def use_vector_store_ca(memory: AsyncMemory, ca: str) -> None:
    """Verify the Qdrant server against `ca` (PEM) from the next call on, as
    use_vector_store_key hands over a key: the config mem0 copies for its entity store, and
    the clients of the store and of an opened entity store."""
    config = memory.config.vector_store.config
    if not isinstance(config, ServerStoreConfig):
        raise TypeError("vectorStore.server.ca: the vector store is not a Qdrant server")
    ca_context(ca, "vectorStore.server.ca")  # refused before anything changes
    config.ca = ca
    for store in (*_stores(memory), opened_entity_store(memory)):
        if isinstance(store, QdrantServerStore):
            store.use_ca(ca)


def _indexes(memory: AsyncMemory) -> list[Any] | None:
    """The indexes of an embedder migration's routing layer in front of mem0's store
    (service/migration/indexes.py), or None when the store is a plain one."""
    indexes = getattr(memory.vector_store, "indexes", None)
    return list(indexes.values()) if isinstance(indexes, dict) else None


def _stores(memory: AsyncMemory) -> list[Any]:
    """The stores behind `memory.vector_store`: every index's, else the store itself."""
    indexes = _indexes(memory)
    return [memory.vector_store] if indexes is None else [index.store for index in indexes]


def memory_hash(text: str) -> str:
    """The `hash` mem0 stores with a memory, and deduplicates by."""
    return hashlib.md5(text.encode()).hexdigest()


def memory_payload(
    text: str, index_text: str, metadata: dict[str, Any], now: str
) -> dict[str, Any]:
    """The payload mem0's infer=False insert stores for a new memory, with our keyword text."""
    return {
        **metadata,
        "data": text,
        "hash": memory_hash(text),
        "created_at": now,
        "updated_at": now,
        "text_lemmatized": index_text,
    }


async def create_memory(
    memory: AsyncMemory,
    memory_id: str,
    vector: list[float],
    text: str,
    index_text: str,
    metadata: dict[str, Any],
) -> None:
    """Write one memory as mem0's infer=False insert does (`_create_memory`), with our texts.

    Same payload and history row; what differs is the vector (embedded from what we chose)
    and the keyword text (`text_lemmatized`, which both our stores index).
    """
    now = datetime.now(UTC).isoformat()
    payload = memory_payload(text, index_text, metadata, now)
    with stage("store"):
        await asyncio.to_thread(
            memory.vector_store.insert, vectors=[vector], ids=[memory_id], payloads=[payload]
        )
    with stage("history"):
        await asyncio.to_thread(
            memory.db.add_history,
            memory_id,
            None,
            text,
            "ADD",
            created_at=now,
            updated_at=now,
            actor_id=metadata.get("actor_id"),
            role=metadata.get("role"),
        )


def record_added(memory: AsyncMemory, memory_id: str, payload: dict[str, Any]) -> bool:
    """Write the ADD history row `create_memory` writes, if the memory has none (a process
    killed between the memory's write and its history's); True when it was missing."""
    if memory.db.get_history(memory_id):
        return False
    times = {k: payload.get(k) for k in ("created_at", "updated_at", "actor_id", "role")}
    memory.db.add_history(memory_id, None, payload.get("data"), "ADD", **times)
    return True


async def retire_memory(
    memory: AsyncMemory, memory_id: str, text: str, fields: dict[str, Any], when: str
) -> None:
    """Mark a memory retired (payload patch: it stays, hidden by the service's filters) and
    record it in mem0's history as a DELETE, the event its search and listing now match."""
    await asyncio.to_thread(memory.vector_store.update, memory_id, None, fields)
    await asyncio.to_thread(
        memory.db.add_history,
        memory_id,
        text,
        None,
        "DELETE",
        created_at=when,
        updated_at=when,
        is_deleted=1,
    )


HISTORY_COLUMNS = (
    "id",
    "memory_id",
    "old_memory",
    "new_memory",
    "event",
    "created_at",
    "updated_at",
    "is_deleted",
    "actor_id",
    "role",
)


def history_values(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """History rows as value tuples in HISTORY_COLUMNS order (is_deleted as 0/1)."""
    return [
        tuple(int(bool(row.get(c))) if c == "is_deleted" else row.get(c) for c in HISTORY_COLUMNS)
        for row in rows
    ]


def history_ids_in_use(memory: AsyncMemory, ids: list[str]) -> dict[str, str]:
    """Which of these history row ids exist already: row id → the memory it belongs to."""
    if not isinstance(memory.db, SQLiteManager):  # the PostgreSQL history (pg_history.py)
        taken: dict[str, str] = memory.db.ids_in_use(ids)
        return taken
    found: dict[str, str] = {}
    with history_connection(memory) as connection:
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = connection.execute(
                f"SELECT id, memory_id FROM history WHERE id IN ({marks})", chunk
            ).fetchall()
            found.update({str(row_id): str(owner) for row_id, owner in rows})
    return found


def restore_history(memory: AsyncMemory, memory_id: str, rows: list[dict[str, Any]]) -> int:
    """Make `memory_id`'s history exactly `rows` (ids and timestamps as given), in one
    transaction: rows left by an earlier deletion of the same id are replaced, since the
    imported memory is that memory as it was exported. Returns the rows written."""
    if not isinstance(memory.db, SQLiteManager):
        written: int = memory.db.replace(memory_id, rows)
        return written
    columns = ", ".join(HISTORY_COLUMNS)
    marks = ", ".join("?" * len(HISTORY_COLUMNS))
    values = history_values(rows)
    with _history_transaction(memory) as connection:
        connection.execute("DELETE FROM history WHERE memory_id = ?", (memory_id,))
        connection.executemany(f"INSERT INTO history ({columns}) VALUES ({marks})", values)
    return len(values)


@contextmanager
def _history_transaction(memory: AsyncMemory) -> Iterator[sqlite3.Connection]:
    """mem0's history connection in one explicit transaction (as mem0's own writes use it)."""
    with history_connection(memory) as connection:
        connection.execute("BEGIN")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")


def purge_history(memory: AsyncMemory, memory_ids: Collection[str]) -> int:
    """Delete every history row of these memories (an erasure: their texts and the DELETE
    row mem0's delete wrote, which holds the text too); returns the rows deleted."""
    ids = sorted(memory_ids)
    if not isinstance(memory.db, SQLiteManager):
        purged: int = memory.db.purge(ids)
        return purged
    deleted = 0
    with _history_transaction(memory) as connection:
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            cursor = connection.execute(f"DELETE FROM history WHERE memory_id IN ({marks})", chunk)
            deleted += cursor.rowcount
    return deleted


def session_scope_ids(session_scope: str) -> dict[str, str]:
    """The ids of one of mem0's session scopes (`_build_session_scope`'s inverse)."""
    ids: dict[str, str] = {}
    for part in session_scope.split("&") if session_scope else []:
        key, _, value = part.partition("=")
        ids[key] = value.replace("%3D", "=").replace("%26", "&").replace("%25", "%")
    return ids


def purge_messages(memory: AsyncMemory, doomed: Callable[[dict[str, str]], bool]) -> int:
    """Delete the recent messages mem0 keeps (extraction context) of every session scope
    whose ids `doomed` accepts; returns the messages deleted."""
    if not isinstance(memory.db, SQLiteManager):
        scopes = [s for s in memory.db.session_scopes() if doomed(session_scope_ids(s))]
        purged: int = memory.db.purge_messages(scopes)
        return purged
    deleted = 0
    with _history_transaction(memory) as connection:
        found = connection.execute("SELECT DISTINCT session_scope FROM messages").fetchall()
        for (scope,) in found:
            if doomed(session_scope_ids(str(scope or ""))):
                sql = "DELETE FROM messages WHERE session_scope = ?"
                deleted += connection.execute(sql, (scope,)).rowcount
    return deleted


def checkpoint_history(memory: AsyncMemory) -> bool:
    """Empty the WAL of mem0's SQLite history into its file (after an erasure); True when
    done (PostgreSQL: the server's own log, nothing to do here)."""
    if not isinstance(memory.db, SQLiteManager):
        return True
    with history_connection(memory) as connection:
        return checkpoint_local(connection)


def use_history(memory: AsyncMemory, history: Any) -> None:
    """Put a history store with SQLiteManager's methods (pg_history.PgHistory) where mem0
    calls them: `AsyncMemory.db`, after closing the SQLite one mem0 opened."""
    memory.db.close()
    memory.db = history


def history_rows(memory: AsyncMemory, memory_id: str) -> list[dict[str, Any]]:
    """A memory's history rows, as mem0 keeps them (SQLite, or PgHistory)."""
    rows: list[dict[str, Any]] = memory.db.get_history(memory_id)
    return rows


def close_history(memory: AsyncMemory) -> None:
    """Close mem0's history store (PgHistory leaves the Database to its owner)."""
    memory.db.close()


def chat(memory: AsyncMemory, messages: list[dict[str, str]]) -> str:
    """One JSON-mode call to the extraction model mem0 was configured with (its `llm`)."""
    reply = memory.llm.generate_response(messages=messages, response_format={"type": "json_object"})
    return reply if isinstance(reply, str) else str(reply or "")


def memory_item(
    memory_id: str, score: float | None, payload: dict[str, Any], hidden: Collection[str] = ()
) -> MemoryItem:
    """A search result shaped like mem0's; `hidden` payload keys stay out of `metadata` too."""
    item: dict[str, Any] = {
        "id": memory_id,
        "memory": payload.get("data", ""),
        "hash": payload.get("hash"),
        "created_at": payload.get("created_at"),
        "updated_at": payload.get("updated_at"),
        "score": score,
    }
    item.update({key: payload[key] for key in PROMOTED_KEYS if key in payload})
    extra = {
        k: v
        for k, v in payload.items()
        if k not in MEM0_PAYLOAD_KEYS and k not in PROMOTED_KEYS and k not in hidden
    }
    if extra:
        item["metadata"] = extra
    return cast(MemoryItem, item)
