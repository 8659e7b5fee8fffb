"""A managed Qdrant's collection layout (spec.vectorStore.managed shards / replicationFactor):
the service creates its collection with them, over Qdrant's real REST API.

No Qdrant server runs in this suite yet, so a STAND-IN on loopback (`support.qdrant_standin`)
answers the few REST calls that opening a store makes (the server's version, the collection
list, creating the collection and its payload indexes) and records them. Everything in front
of it is real: the service config, `engine/mem0_config.py`, mem0's store factory, our store
and qdrant-client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mem0.utils.factory import VectorStoreFactory

from memorystore.config import ConfigError, ServiceConfig
from memorystore.service.engine.mem0_config import mem0_config
from memorystore.service.stores.qdrant_server import QdrantServerStore
from support.qdrant_standin import QdrantStandIn
from support.waiting import wait_for


@pytest.fixture
def qdrant() -> Iterator[QdrantStandIn]:
    with QdrantStandIn() as standin:
        yield standin
        # qdrant-client asks for the server's version from a thread of its own: let it
        # finish, or it warns that the stand-in went away
        wait_for(lambda: any(c.path == "/" for c in standin.calls), timeout=10, every=0.05)


def open_store(tmp_path: Path, server: dict[str, Any]) -> QdrantServerStore:
    """The store exactly as the service opens it from its config file's fields."""
    cfg = ServiceConfig.model_validate(
        {
            "dataDir": str(tmp_path),
            "apiKey": {"env": "UNUSED"},
            "vectorStore": {"server": server, "collection": "memories"},
        }
    )
    store_cfg = mem0_config(cfg).vector_store
    store = VectorStoreFactory.create(store_cfg.provider, store_cfg.config)
    assert isinstance(store, QdrantServerStore)
    return store


def test_the_collection_is_created_with_the_shards_and_copies_configured(tmp_path, qdrant):
    store = open_store(tmp_path, {"url": qdrant.url, "shardNumber": 6, "replicationFactor": 2})
    try:
        [(name, body)] = qdrant.created()
        assert name == "memories"
        assert (body["shard_number"], body["replication_factor"]) == (6, 2)
        # mem0's own shape of the collection is kept
        assert body["vectors"] == {"size": 384, "distance": "Cosine", "on_disk": False}
        assert body["sparse_vectors"] == {"bm25": {"modifier": "idf"}}
        assert store._has_bm25_slot
        # and the client is the plain one again afterwards
        assert type(store.client).__name__ == "QdrantClient"
    finally:
        store.close()


def test_an_existing_collection_is_left_as_it_is(tmp_path, qdrant):
    qdrant.existing["memories"] = {"shard_number": 1}
    store = open_store(tmp_path, {"url": qdrant.url, "shardNumber": 6, "replicationFactor": 2})
    try:
        assert qdrant.created() == []
        assert ("GET", "/collections/memories") in [(c.method, c.path) for c in qdrant.calls]
        assert store._has_bm25_slot
    finally:
        store.close()


def test_without_a_layout_the_server_decides(tmp_path, qdrant):
    # an external Qdrant: the operator writes neither field, the request carries neither
    store = open_store(tmp_path, {"url": qdrant.url})
    try:
        [(_, body)] = qdrant.created()
        assert "shard_number" not in body and "replication_factor" not in body
    finally:
        store.close()


def test_the_entity_collection_gets_the_same_layout(tmp_path, qdrant):
    # mem0 opens its entity-link store through the same factory on a copy of the config
    cfg = ServiceConfig.model_validate(
        {
            "dataDir": str(tmp_path),
            "apiKey": {"env": "UNUSED"},
            "vectorStore": {"server": {"url": qdrant.url, "shardNumber": 3}},
        }
    )
    store_cfg = mem0_config(cfg).vector_store
    entities = store_cfg.config.model_copy(update={"collection_name": "memories_entities"})
    store = VectorStoreFactory.create(store_cfg.provider, entities)
    try:
        [(name, body)] = qdrant.created()
        assert (name, body["shard_number"]) == ("memories_entities", 3)
        assert "replication_factor" not in body
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
