"""The store and embedder mem0 and the service call while a store may hold two indexes: reads
go to the live index, writes to every index, each with its own embedder's vectors.

Why a routing layer under mem0 rather than beside it: every write path (mem0's adds and
updates, the write pipeline, erasures, re-index, restores) already goes through
`AsyncMemory.vector_store` and `.embedding_model`, so routing there doubles every write
without touching any of them.

No read mixes models: a vector this embedder makes carries the name of the index whose
embedder made it (`Vector.made_for`), and a search with it goes to that index, even when reads
switched between the embedding and the search (the index reads left stays complete during
its grace period). A write's vector goes to its own index; every other index gets the
memory re-embedded by its own embedder from the texts the payload says it is indexed by
(`stored_index_texts`, as a re-index computes them).

An index that a write could not reach (its embedder failed) loses that memory rather than
keeping an old copy: the back-fill copies what an index being built lacks, and the switch
checks the ids first, so nothing missing is ever read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from memorystore.service.migration.state import State
from memorystore.service.retrieval.indexing import PREV_KEY, stored_index_texts
from memorystore.service.retrieval.reindex import INDEX_KEY
from memorystore.service.stores.protocol import (
    FacetValue,
    Filters,
    Payload,
    PointId,
    ScoredRecord,
    StoredRecord,
    VectorStore,
)
from memorystore.spec import EmbedderSettings, RetrievalSettings

__all__ = ["Index", "RoutedEmbedder", "RoutedStore", "Vector"]

log = logging.getLogger("memorystore.service.migration")

# payload keys the indexed texts are made from: a patch of one of them changes the vector
_TEXT_KEYS = frozenset({"data", "actor_id", "date", PREV_KEY})


class Vector(list[float]):
    """An embedding, with the index whose embedder made it."""

    __slots__ = ("made_for",)

    def __init__(self, values: Sequence[float], index: str) -> None:
        super().__init__(values)
        self.made_for = index


@dataclass
class Index:
    name: str  # the embedder's identity (EmbedderSettings.index_name)
    settings: EmbedderSettings
    store: VectorStore
    embedder: Any  # mem0's EmbeddingBase: embed(text, action), embed_batch(texts, action)
    version: str  # what a memory indexed here is stamped with (retrieval/reindex.py)

    def vectors(self, texts: list[str], action: Any = "add") -> list[Vector]:
        """This index's embeddings of `texts`, marked as its own (one batch when the
        embedder takes batches)."""
        batch = getattr(self.embedder, "embed_batch", None)
        if batch is not None:
            made = batch(texts, action)
        else:
            made = [self.embedder.embed(text, action) for text in texts]
        return [Vector(v, self.name) for v in made]


def _tag(vector: Any) -> str | None:
    return getattr(vector, "made_for", None)


class RoutedStore:
    """A `VectorStore` over one or two indexes, routed by the migration's state."""

    def __init__(
        self, indexes: Mapping[str, Index], state: State, settings: RetrievalSettings
    ) -> None:
        self.settings = settings
        self._route = (state, dict(indexes))
        self.write_errors = 0  # writes an index other than the live one missed

    # --- the route ------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._route[0]

    @property
    def indexes(self) -> dict[str, Index]:
        return dict(self._route[1])

    def live(self) -> Index:
        state, indexes = self._route
        return indexes[state.live]

    def route(self, state: State, indexes: Mapping[str, Index]) -> None:
        """Move reads and writes at once (one assignment: a caller reads either route)."""
        missing = [name for name in state.writes if name not in indexes]
        if missing:
            raise ValueError(f"no index {missing[0]!r} is open")
        self._route = (state, dict(indexes))

    def _for(self, vectors: Any) -> VectorStore:
        """The store a query vector belongs in: its own index while it exists, else live."""
        state, indexes = self._route
        index = indexes.get(_tag(vectors) or state.live) or indexes[state.live]
        return index.store

    # --- reads: the live index ------------------------------------------------------------

    def search(
        self, query: str, vectors: list[float], top_k: int = 5, filters: Filters | None = None
    ) -> Sequence[ScoredRecord]:
        return self._for(vectors).search(query, vectors, top_k, filters)

    def search_batch(
        self,
        queries: list[str],
        vectors_list: list[list[float]],
        top_k: int = 1,
        filters: Filters | None = None,
    ) -> Sequence[Sequence[ScoredRecord]]:
        store = self._for(vectors_list[0] if vectors_list else None)
        return store.search_batch(queries, vectors_list, top_k, filters)

    def keyword_search(
        self, query: str, top_k: int = 5, filters: Filters | None = None
    ) -> Sequence[ScoredRecord] | None:
        return self.live().store.keyword_search(query, top_k, filters)

    def cosine(
        self, vectors: list[float], ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        return self._for(vectors).cosine(vectors, ids, filters)

    def keyword_scores(
        self, query: str, ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        return self.live().store.keyword_scores(query, ids, filters)

    def get(self, vector_id: PointId) -> StoredRecord | None:
        return self.live().store.get(vector_id)

    def count(self, filters: Filters | None = None) -> int:
        return self.live().store.count(filters)

    def facet_counts(self, key: str, limit: int) -> dict[FacetValue, int]:
        return self.live().store.facet_counts(key, limit)

    def points(self, batch: int = 1000) -> Iterator[tuple[str, list[float], Payload]]:
        return self.live().store.points(batch)

    def ids(self, batch: int = 1000) -> Iterator[str]:
        return self.live().store.ids(batch)

    # --- writes: every index --------------------------------------------------------------

    def insert(
        self,
        vectors: list[list[float]],
        payloads: list[Payload] | None = None,
        ids: Sequence[PointId] | None = None,
    ) -> None:
        state, indexes = self._route
        for name in state.writes:
            index = indexes[name]
            if all((_tag(v) or state.live) == name for v in vectors):
                index.store.insert(vectors, self.stamped(index, payloads), ids)
                continue
            if ids is None or payloads is None:  # mem0 always gives both; nothing to key by
                raise ValueError("a write to two indexes needs its ids and payloads")
            self._guarded(index, ids, partial(self._copy, index, payloads, ids))

    def update(
        self, vector_id: PointId, vector: list[float] | None = None, payload: Payload | None = None
    ) -> None:
        state, indexes = self._route
        live = indexes[state.live]
        live.store.update(vector_id, vector, payload)
        for name in state.writes[1:]:
            index = indexes[name]
            if vector is None and payload is not None and not (_TEXT_KEYS & payload.keys()):
                self._guarded(index, [vector_id], partial(self._patch, index, vector_id, payload))
            else:
                self._guarded(index, [vector_id], partial(self._recopy, index, vector_id))

    def reindex(
        self, vector_id: PointId, payload: Payload, vector: list[float] | None = None
    ) -> None:
        state, indexes = self._route
        indexes[state.live].store.reindex(vector_id, payload, vector)
        for name in state.writes[1:]:
            index = indexes[name]
            if vector is None:
                self._guarded(index, [vector_id], partial(self._rewrite, index, vector_id))
            else:
                self._guarded(index, [vector_id], partial(self._recopy, index, vector_id))

    def delete(self, vector_id: PointId) -> None:
        state, indexes = self._route
        for name in state.writes:
            indexes[name].store.delete(vector_id)

    def purge(self) -> int:
        """Every index's files rewritten without deleted points (an erasure reaches all)."""
        kept = {}
        for index in self._all():
            purge: Callable[[], int] | None = getattr(index.store, "purge", None)
            if purge is not None:
                kept[index.name] = purge()
        return kept.get(self.state.live, 0)

    def reset(self) -> None:
        for index in self._all():
            index.store.reset()

    def delete_col(self) -> None:
        for index in self._all():
            index.store.delete_col()

    def create_col(self) -> None:
        for index in self._all():
            index.store.create_col()

    def close(self) -> None:
        for index in self._all():
            index.store.close()

    def _all(self) -> list[Index]:
        state, indexes = self._route
        return [indexes[name] for name in state.writes]

    # --- one index's copy of a write ------------------------------------------------------

    def _guarded(self, index: Index, ids: Sequence[PointId], write: Callable[[], None]) -> None:
        """Write to an index other than the live one; on failure, take the memories out of
        it (the back-fill copies them again) and go on: the live index has the write."""
        try:
            write()
        except Exception:
            self.write_errors += 1
            log.exception("the %s index missed a write of %d memories", index.name, len(ids))
            for memory_id in ids:
                try:
                    index.store.delete(memory_id)
                except Exception:
                    log.exception("memory %s could not be taken out of %s", memory_id, index.name)

    def stamped(self, index: Index, payloads: list[Payload] | None) -> list[Payload] | None:
        """The payloads with `index`'s version where they carry one (centring differs
        between offline and remote embedders)."""
        if payloads is None:
            return None
        return [
            {**p, INDEX_KEY: index.version}
            if INDEX_KEY in p and p[INDEX_KEY] != index.version
            else p
            for p in payloads
        ]

    def dense_text(self, payload: Payload) -> str:
        """What a memory with this payload is embedded from (its context from the live
        index), as the write pipeline and a re-index compute it."""
        live = self.live().store

        def stored(memory_id: str) -> Payload | None:
            record = live.get(memory_id)
            return None if record is None else dict(record.payload or {})

        return stored_index_texts(payload, self.settings, stored).dense

    def _copy(self, index: Index, payloads: Sequence[Payload], ids: Sequence[PointId]) -> None:
        vectors = index.vectors([self.dense_text(p) for p in payloads])
        index.store.insert(list(vectors), self.stamped(index, list(payloads)), ids)

    def _recopy(self, index: Index, vector_id: PointId) -> None:
        """The memory as the live index now holds it, embedded for `index`."""
        record = self.live().store.get(vector_id)
        if record is None:
            index.store.delete(vector_id)
            return
        self._copy(index, [dict(record.payload or {})], [vector_id])

    def _patch(self, index: Index, vector_id: PointId, payload: Payload) -> None:
        if index.store.get(vector_id) is not None:  # absent: the back-fill copies it whole
            index.store.update(vector_id, None, payload)

    def _rewrite(self, index: Index, vector_id: PointId) -> None:
        """A re-index of the payload alone: the live payload, stamped for `index`."""
        record = self.live().store.get(vector_id)
        if record is None or index.store.get(vector_id) is None:
            return
        payload = self.stamped(index, [dict(record.payload or {})])
        assert payload is not None
        index.store.reindex(vector_id, payload[0], None)

    # Defined last: inside the class body the name ``list`` is this method from here on.
    def list(
        self, filters: Filters | None = None, top_k: int = 100
    ) -> tuple[Sequence[StoredRecord], object]:
        return self.live().store.list(filters, top_k)


class RoutedEmbedder:
    """The live index's embedder, its vectors marked with the index they belong to."""

    def __init__(self, store: RoutedStore) -> None:
        self._store = store

    def embed(self, text: str, memory_action: Any = None) -> Vector:
        return self._store.live().vectors([text], memory_action)[0]

    def embed_batch(self, texts: list[str], memory_action: Any = "add") -> list[Vector]:
        return self._store.live().vectors(texts, memory_action)

    def __getattr__(self, name: str) -> Any:
        """Anything else of mem0's embedder (its config, client): the live one's."""
        return getattr(self._store.live().embedder, name)
