"""The vector-store contract: what mem0 and the service call on a store, in one place.

Why a Protocol: three stores (the embedded engine, PostgreSQL with pgvector, a Qdrant server)
stand behind `AsyncMemory.vector_store`, and the service calls more on them than mem0's base
class declares (keyword search, cosine look-ups, facet counts, re-indexing, backups). Written
down here, mypy holds each store to it and the engine, re-index, backup and export code type
their calls against it. `tests/integration/test_store_contract.py` runs its behaviour on the
embedded and PostgreSQL stores.

Results are records with qdrant-client's attributes (`id`, `payload`, and `score` for
hits): mem0 reads them that way, and the Qdrant server store returns qdrant-client's own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

__all__ = [
    "FacetValue",
    "Filters",
    "OutputData",
    "Payload",
    "PointId",
    "ScoredRecord",
    "StoreUnavailable",
    "StoredRecord",
    "VectorStore",
]

Payload = dict[str, Any]
# mem0's filter language (stores/filters.py): field conditions, AND/OR/NOT groups
Filters = dict[str, Any]
PointId = str | int  # what callers pass; the service only ever uses UUID strings
FacetValue = str | int | bool


class StoredRecord(Protocol):
    """A stored point as `get` and `list` return it (qdrant-client's `Record` has these)."""

    @property
    def id(self) -> str | int | UUID: ...

    @property
    def payload(self) -> Payload | None: ...


class ScoredRecord(StoredRecord, Protocol):
    """A search hit: a stored point and its score (higher is closer)."""

    @property
    def score(self) -> float | None: ...


@dataclass(slots=True)
class OutputData:
    """The record the embedded and PostgreSQL stores return, with the attributes mem0 reads
    from qdrant-client's ScoredPoint/Record (ids as strings: mem0 compares them so)."""

    id: str
    score: float | None
    payload: Payload


@runtime_checkable
class VectorStore(Protocol):
    """One collection of points (a dense vector, a payload, BM25 terms) as the service uses it.

    mem0 calls the first group (its `VectorStoreBase`); the service adds the second.
    """

    # --- what mem0 calls -----------------------------------------------------------------

    def insert(
        self,
        vectors: list[list[float]],
        payloads: list[Payload] | None = None,
        ids: Sequence[PointId] | None = None,
    ) -> None: ...

    def search(
        self, query: str, vectors: list[float], top_k: int = 5, filters: Filters | None = None
    ) -> Sequence[ScoredRecord]: ...

    def search_batch(
        self,
        queries: list[str],
        vectors_list: list[list[float]],
        top_k: int = 1,
        filters: Filters | None = None,
    ) -> Sequence[Sequence[ScoredRecord]]: ...

    def keyword_search(
        self, query: str, top_k: int = 5, filters: Filters | None = None
    ) -> Sequence[ScoredRecord] | None:
        """BM25 hits, or None when keyword search is off (mem0's "unsupported")."""
        ...

    def update(
        self, vector_id: PointId, vector: list[float] | None = None, payload: Payload | None = None
    ) -> None:
        """Both parts: replace the point; one part: patch it (a payload merges)."""
        ...

    def delete(self, vector_id: PointId) -> None: ...

    def get(self, vector_id: PointId) -> StoredRecord | None: ...

    def reset(self) -> None: ...

    def delete_col(self) -> None: ...

    # --- what the service adds -----------------------------------------------------------

    def cosine(
        self, vectors: list[float], ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        """The dense score of `vectors` against just these points (keyword hits')."""
        ...

    def keyword_scores(
        self, query: str, ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        """The BM25 score of `query` against just these points (dense hits'), on the same
        scale as `keyword_search`; a point sharing no term is absent. Empty when keyword
        search is off."""
        ...

    def count(self, filters: Filters | None = None) -> int:
        """Exact number of points matching `filters`."""
        ...

    def facet_counts(self, key: str, limit: int) -> dict[FacetValue, int]:
        """Points per distinct value of a keyword-indexed field (the entity inventory)."""
        ...

    def points(self, batch: int = 1000) -> Iterator[tuple[str, list[float], Payload]]:
        """Every point as (id, dense vector, payload), a page at a time (backups)."""
        ...

    def ids(self, batch: int = 1000) -> Iterator[str]:
        """Every point's id and nothing else, a page at a time (an embedder migration
        compares two indexes by their ids, once with every write paused)."""
        ...

    def reindex(
        self, vector_id: PointId, payload: Payload, vector: list[float] | None = None
    ) -> None:
        """Rewrite one point's payload and BM25 terms (and its vector, when given)."""
        ...

    def create_col(self) -> None:
        """Create what is missing (the collection, its tables); the engine's `prepare`."""
        ...

    def close(self) -> None: ...

    # Defined last: inside the class body the name ``list`` is this method from here on, so
    # earlier annotations such as ``list[float]`` still mean the builtin.
    def list(
        self, filters: Filters | None = None, top_k: int = 100
    ) -> tuple[Sequence[StoredRecord], object]:
        """`(points, next_offset)`, qdrant-client's scroll shape (mem0 reads `[0]`)."""
        ...


class StoreUnavailable(ConnectionError):
    """The vector store cannot be reached. The message says which store and why, and never
    holds a secret: /readyz and the operator's status show it."""
