"""A managed Qdrant's collection layout (spec.vectorStore.managed shards / replicationFactor):
the service creates its collection with them, over Qdrant's real REST API.

No Qdrant server binary is obtainable here, so a stand-in on loopback answers the few REST
calls that opening a store makes (the server's version, the collection list, creating the
collection and its payload indexes) and records them. Everything in front of it is real:
the service config, `engine/mem0_config.py`, mem0's store factory, our store and qdrant-client.
"""

from __future__ import annotations

import importlib.metadata
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mem0.utils.factory import VectorStoreFactory

from memorystore.config import ConfigError, ServiceConfig
from memorystore.service.engine.mem0_config import mem0_config
from memorystore.service.stores.qdrant_server import QdrantServerStore
from support.waiting import wait_for


@dataclass
class StandInQdrant:
    """The REST calls a store makes when it opens a collection, answered like Qdrant."""

    existing: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> its params
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    url: str = ""

    def created(self) -> list[tuple[str, Any]]:
        """(collection, body) of each create-collection request."""
        return [
            (path.removeprefix("/collections/"), body)
            for method, path, body in self.requests
            if method == "PUT" and path.count("/") == 2
        ]

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        self.requests.append((method, path, body))
        parts = path.split("?")[0].strip("/").split("/")
        if method == "GET" and parts == [""]:  # the client's version check: same version
            version = importlib.metadata.version("qdrant-client")
            return 200, {"title": "qdrant - vector search engine", "version": version}
        if method == "GET" and parts == ["collections"]:
            names = [{"name": name} for name in self.existing]
            return 200, {"result": {"collections": names}, "status": "ok", "time": 0}
        if parts[0] == "collections" and len(parts) == 2:
            if method == "PUT":
                self.existing[parts[1]] = body
                return 200, {"result": True, "status": "ok", "time": 0}
            if method == "GET" and parts[1] in self.existing:
                return 200, {"result": _collection_info(), "status": "ok", "time": 0}
        if method == "PUT" and parts[0] == "collections" and parts[2:] == ["index"]:
            done = {"operation_id": 1, "status": "completed"}
            return 200, {"result": done, "status": "ok", "time": 0}
        return 404, {"status": {"error": f"stand-in: no {method} {path}"}, "time": 0}


def _collection_info() -> dict[str, Any]:
    """GET /collections/{name} as Qdrant answers it for mem0's collection shape."""
    return {
        "status": "green",
        "optimizer_status": "ok",
        "segments_count": 1,
        "points_count": 0,
        "indexed_vectors_count": 0,
        "config": {
            "params": {
                "vectors": {"size": 384, "distance": "Cosine"},
                "sparse_vectors": {"bm25": {"modifier": "idf"}},
                "shard_number": 1,
                "replication_factor": 1,
            },
            "hnsw_config": {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000},
            "optimizer_config": {
                "deleted_threshold": 0.2,
                "vacuum_min_vector_number": 1000,
                "default_segment_number": 0,
                "flush_interval_sec": 5,
            },
            "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
        },
        "payload_schema": {},
    }


@pytest.fixture
def qdrant() -> Iterator[StandInQdrant]:
    standin = StandInQdrant()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, payload = standin.answer(
                self.command, self.path, json.loads(raw) if raw else None
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _serve

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    standin.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield standin
        # qdrant-client asks for the server's version from a thread of its own: let it
        # finish, or it warns that the stand-in went away
        wait_for(lambda: ("GET", "/", None) in standin.requests, timeout=10, every=0.05)
    finally:
        server.shutdown()
        server.server_close()


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
        assert ("GET", "/collections/memories", None) in qdrant.requests
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
