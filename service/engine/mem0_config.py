"""Our ServiceConfig as mem0's MemoryConfig: providers, endpoints, secrets, the vector store.

Why apart from the engine: it is a pure translation (secrets are resolved here, so a missing
one fails at start-up naming its field), tested on its own and used by the benches to build a
bare AsyncMemory. Remote models are either Ollama or OpenAI-compatible; DashScope is the
latter at its compatible endpoint, for the embedder and the extraction model alike
(`_remote_model`).
"""

from __future__ import annotations

from typing import Any

from mem0.configs.base import MemoryConfig

from memorystore.config import SecretSource, ServiceConfig
from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS
from memorystore.service.engine.mem0_seam import (
    EDGE_PROVIDER,
    NO_LLM_PROVIDER,
    OFFLINE_EMBEDDER_PROVIDERS,
    PG_PROVIDER,
    SERVER_PROVIDER,
    EdgeStoreConfig,
    PgStoreConfig,
    ServerStoreConfig,
    embedder_config,
    llm_config,
    memory_config,
    vector_store_config,
)
from memorystore.service.state.postgres import Database

__all__ = ["DASHSCOPE_COMPATIBLE_URL", "mem0_config", "speaks_openai"]

DASHSCOPE_COMPATIBLE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"


def mem0_config(cfg: ServiceConfig, vectors: Database | None = None) -> MemoryConfig:
    """Translate our config into mem0's, resolving secrets (fails at start-up, naming fields).

    `vectors` is the Database of a PostgreSQL vector store (`postgres.configured`), which its
    owner (the engine) hands the store; required when the config names one."""
    emb = cfg.embedder
    dims = emb.vector_size()
    if emb.provider in OFFLINE_EMBEDDERS:
        embedder = embedder_config(
            OFFLINE_EMBEDDER_PROVIDERS[emb.provider],
            {
                "embedding_dims": dims,
                "model_kwargs": {
                    "threads": emb.threads,
                    "runtime": emb.resolved_runtime(),
                    "query_cache": emb.query_cache,
                    "language_centering": cfg.retrieval.language_centering,
                },
            },
        )
    else:
        key = _secret(emb.api_key, "embedder.apiKey")
        provider, conf = _remote_model(emb.provider, emb.model, emb.base_url, key)
        embedder = embedder_config(provider, {**conf, "embedding_dims": dims})

    if cfg.llm is None:
        llm = llm_config(NO_LLM_PROVIDER, {})
    else:
        key = _secret(cfg.llm.api_key, "llm.apiKey")
        provider, conf = _remote_model(cfg.llm.provider, cfg.llm.model, cfg.llm.base_url, key)
        llm = llm_config(provider, {**conf, "temperature": cfg.llm.temperature})

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
                index_after=vs.embedded.index_after,
            ),
        )
    elif vs.postgres is not None:
        if vectors is None:
            raise ValueError("vectorStore.postgres: the engine's Database must be given")
        store = vector_store_config(
            PG_PROVIDER,
            PgStoreConfig(
                collection_name=vs.collection,
                embedding_model_dims=dims,
                database=vectors,
                keyword_search=cfg.retrieval.hybrid,
                tokenizer=cfg.retrieval.tokenizer,
                hnsw_ef_search=vs.postgres.hnsw_ef_search,
            ),
        )
    else:
        assert vs.server is not None
        store = vector_store_config(
            SERVER_PROVIDER,
            ServerStoreConfig(
                collection_name=vs.collection,
                embedding_model_dims=dims,
                url=vs.server.url,
                api_key=_secret(vs.server.api_key, "vectorStore.server.apiKey"),
                ca=_secret(vs.server.ca, "vectorStore.server.ca"),
                shard_number=vs.server.shard_number,
                replication_factor=vs.server.replication_factor,
                keyword_search=cfg.retrieval.hybrid,
                tokenizer=cfg.retrieval.tokenizer,
            ),
        )
    if cfg.history.postgres is not None:  # mem0's own SQLite is replaced (use_history)
        return memory_config(store, llm, embedder, ":memory:")
    history = cfg.path_in_data_dir(cfg.history.path, "history.db")
    history.parent.mkdir(parents=True, exist_ok=True)
    return memory_config(store, llm, embedder, str(history))


def _remote_model(
    provider: str, model: str | None, base_url: str | None, api_key: str | None
) -> tuple[str, dict[str, Any]]:
    """mem0's provider and settings for a remote model (embedder or LLM): Ollama at its URL
    (no key), else OpenAI-compatible, DashScope at its compatible endpoint by default."""
    if not speaks_openai(provider):
        return "ollama", {"model": model, "ollama_base_url": base_url}
    conf: dict[str, Any] = {"model": model, "api_key": api_key}
    base = base_url or (DASHSCOPE_COMPATIBLE_URL if provider == "dashscope" else None)
    if base:
        conf["openai_base_url"] = base
    return "openai", conf


def speaks_openai(provider: str) -> bool:
    """Whether a remote model is reached through mem0's OpenAI provider, with an API key
    (`openai`, `dashscope`); the other remote provider, `ollama`, takes no key."""
    return provider not in OFFLINE_EMBEDDERS and provider != "ollama"


def _secret(source: SecretSource | None, field: str) -> str | None:
    """A configured secret's value, read now (a missing one fails naming `field`)."""
    return source.resolve(field).get_secret_value() if source is not None else None
