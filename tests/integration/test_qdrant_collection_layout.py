"""A managed Qdrant's collection layout (spec.vectorStore.managed shards / replicationFactor):
the service creates its collection with them, on a real Qdrant server (the vendored binary).
Everything is real: the service config, `engine/mem0_config.py`, mem0's store factory, our
store, qdrant-client and the server, which reports the layout it created.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from mem0.utils.factory import VectorStoreFactory

from memorystore.config import ConfigError, ServiceConfig
from memorystore.service.engine.mem0_config import mem0_config
from memorystore.service.stores.qdrant_server import QdrantServerStore
from memorystore_dev.qdrant import QdrantServer


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


def test_the_collection_is_created_with_the_shards_and_copies_configured(tmp_path, qdrant_server):
    name = fresh()
    store = open_store(config(tmp_path, qdrant_server, name, shardNumber=6, replicationFactor=2))
    try:
        made = params(qdrant_server, name)
        assert (made.shard_number, made.replication_factor) == (6, 2)
        # mem0's own shape of the collection is kept: the dense vector and the bm25 slot
        assert (made.vectors.size, made.vectors.distance.value) == (384, "Cosine")
        assert made.sparse_vectors["bm25"].modifier.value == "idf"
        assert store._has_bm25_slot
    finally:
        store.close()


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
