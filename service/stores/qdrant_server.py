"""The vector store on a Qdrant server (spec.vectorStore.managed / external): mem0's own.

Why a subclass of mem0's `Qdrant` store rather than a store of our own: mem0's store already
speaks to a server through qdrant-client, gives the collection a `bm25` sparse slot (IDF
computed by the server) and is what mem0 is tested against. What it lacks is added here: an
offline BM25 encoder (mem0's is fastembed, a model download), the service's identity rules in
its filters, the cosine look-up, facet counts, exact counts, re-indexing, backups' scroll, and
the managed collection layout. That means overriding mem0 internals: this module is the one
place besides `engine/mem0_seam.py` that touches them; the seam's docstring lists each and
`tests/unit/service/engine/test_mem0_seam.py` checks them against the installed mem0.

The server's API key can change while the service runs (a mounted Secret re-read by
ops/secret_files.py): qdrant-client fixes the key when a client is built, so `use_api_key`
builds another client, as mem0's constructor does, and swaps it in; calls already running
finish on the old one, which is closed a grace period later (or at `close`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import grpc
import httpx
import numpy as np
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException
from qdrant_client.models import (
    FieldCondition,
    Filter,
    HasIdCondition,
    IsEmptyCondition,
    MatchValue,
    PayloadField,
    Record,
    ScoredPoint,
    SparseVector,
)

from memorystore.scope import IDENTITY_KEYS, OWNER_KEY, confined_to_no_user
from memorystore.service.retrieval import lexical
from memorystore.service.stores.embedded import dense_vector
from memorystore.service.stores.filters import literal_id, refuse_nested_identity
from memorystore.service.stores.protocol import (
    FacetValue,
    Filters,
    Payload,
    PointId,
    StoreUnavailable,
    VectorStore,
)
from memorystore.spec import LexicalTokenizer

__all__ = ["RETIRED_CLIENT_GRACE_S", "OfflineBm25", "QdrantServerStore", "server_client"]

log = logging.getLogger("memorystore.service")
# how long a client replaced by `use_api_key` stays open for the calls already running on it:
# far beyond qdrant-client's REST timeout (5 s unless configured) and one scroll batch
RETIRED_CLIENT_GRACE_S = 60.0
# what qdrant-client raises when the server does not answer (REST: httpx's errors wrapped;
# gRPC: an RpcError): the server is away, not the request wrong
UNREACHABLE: tuple[type[BaseException], ...] = (
    ResponseHandlingException,
    httpx.TransportError,
    grpc.RpcError,
    OSError,
)


def _without_credentials(url: str) -> str:
    """A URL as it may be shown: no user or password in it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


if TYPE_CHECKING:

    class Qdrant:
        """mem0's Qdrant store as this module uses it, typed (mem0 ships no type information,
        so mypy would take the class for Any and hold the subclass to nothing): the attributes
        its constructor sets, the methods inherited as they are, the ones overridden."""

        client: QdrantClient
        collection_name: str
        embedding_model_dims: int
        on_disk: bool
        _bm25_encoder: Any
        _has_bm25_slot: bool

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...
        def create_col(self, vector_size: int, on_disk: bool, distance: Any = ...) -> None: ...
        def insert(
            self,
            vectors: list[list[float]],
            payloads: list[Payload] | None = None,
            ids: Sequence[PointId] | None = None,
        ) -> None: ...
        def search(
            self, query: str, vectors: list[float], top_k: int = 5, filters: Filters | None = None
        ) -> list[ScoredPoint]: ...
        def search_batch(
            self,
            queries: list[str],
            vectors_list: list[list[float]],
            top_k: int = 1,
            filters: Filters | None = None,
        ) -> list[list[ScoredPoint]]: ...
        def update(
            self,
            vector_id: PointId,
            vector: list[float] | None = None,
            payload: Payload | None = None,
        ) -> None: ...
        def delete(self, vector_id: PointId) -> None: ...
        def get(self, vector_id: PointId) -> Record | None: ...
        def reset(self) -> None: ...
        def delete_col(self) -> None: ...
        def _build_field_condition(self, key: str, value: Any) -> FieldCondition | None: ...
        def _create_filter(self, filters: Filters) -> Filter | None: ...
        def list(
            self, filters: Filters | None = None, top_k: int = 100
        ) -> tuple[list[Record], int | str | UUID | None]: ...

else:
    from mem0.vector_stores.qdrant import Qdrant


class OfflineBm25:
    """qdrant-edge's BM25 encoder where mem0 expects fastembed's (a model download).

    mem0 reads `.indices.tolist()` / `.values.tolist()` off each result, as from fastembed.
    """

    def __init__(self, tokenizer: LexicalTokenizer) -> None:
        self.model = lexical.encoder(tokenizer)

    def embed(self, texts: list[str]) -> Iterable[SimpleNamespace]:
        for text in texts:
            vector = self.model.embed_document(text)
            yield SimpleNamespace(
                indices=np.asarray(vector.indices), values=np.asarray(vector.values)
            )


class _CreatingWith:
    """A Qdrant client whose `create_collection` adds `extra` keyword arguments; everything
    else is the client's own."""

    def __init__(self, client: Any, extra: dict[str, Any]) -> None:
        self._client = client
        self._extra = extra

    def create_collection(self, *args: Any, **kwargs: Any) -> Any:
        return self._client.create_collection(*args, **kwargs, **self._extra)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def server_client(url: str | None, api_key: str | None) -> QdrantClient:
    """A client of the server at `url` with `api_key`, built as mem0's `Qdrant` constructor
    builds its own from the same two settings (the only ones ServerStoreConfig gives it)."""
    params: dict[str, Any] = {}
    if api_key:
        params["api_key"] = api_key
    if url:
        params["url"] = url
    return QdrantClient(**params)


class QdrantServerStore(Qdrant):
    """mem0's Qdrant store, with an offline BM25 encoder, a cosine lookup and an exact count.

    mem0 already gives the collection a `bm25` sparse slot (IDF computed by the server) but
    encodes with fastembed, which downloads its model; the same qdrant-edge encoder as the
    embedded store is used instead, so hybrid retrieval works the same on both.

    `shard_number` and `replication_factor` (a managed Qdrant's spec.vectorStore.managed
    shards and replicationFactor) are used when the collection is created; an existing
    collection is left as it is. Unset: the server's defaults.
    """

    _bm25_encoder: OfflineBm25 | None

    def __init__(
        self,
        *args: Any,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        tokenizer: str = LexicalTokenizer.MULTILINGUAL,
        **kwargs: Any,
    ) -> None:
        self.tokenizer = LexicalTokenizer(tokenizer)
        # set before mem0's constructor, which creates the collection
        self.shard_number = shard_number
        self.replication_factor = replication_factor
        self.where = f"Qdrant server at {_without_credentials(str(kwargs.get('url') or ''))}"
        self._url: str | None = None if kwargs.get("client") else kwargs.get("url")
        self._retired: dict[int, tuple[QdrantClient, threading.Timer]] = {}
        self._retired_lock = threading.Lock()
        # create_col wraps the client for one call: a key change waits rather than be undone
        self._client_swap = threading.Lock()
        # mem0's constructor creates the collection: a server that is not up yet must not stop
        # the service from starting (the engine creates it once the server answers, and
        # /readyz says why meanwhile)
        self._constructing = True
        try:
            super().__init__(*args, **kwargs)
        finally:
            self._constructing = False

    def create_col(
        self, vector_size: int | None = None, on_disk: bool | None = None, distance: Any = None
    ) -> None:
        """mem0's `Qdrant.create_col` (a missing collection is created, an existing one left
        as it is), with the configured layout; without arguments, this store's own size."""
        size = self.embedding_model_dims if vector_size is None else vector_size
        disk = self.on_disk if on_disk is None else on_disk
        layout = {
            key: value
            for key, value in (
                ("shard_number", self.shard_number),
                ("replication_factor", self.replication_factor),
            )
            if value is not None
        }
        extra = {} if distance is None else {"distance": distance}
        try:
            if not layout:
                super().create_col(size, disk, **extra)
                return
            with self._client_swap:
                client = self.client
                self.client = cast(QdrantClient, _CreatingWith(client, layout))
                try:
                    super().create_col(size, disk, **extra)
                finally:
                    self.client = client
        except UNREACHABLE as exc:
            if not self._constructing:
                raise self.unavailable(exc) from None
            log.warning(
                "%s: the collection is created once the server answers", self.unavailable(exc)
            )

    def unavailable(self, exc: BaseException) -> StoreUnavailable:
        """`exc` (the server cannot be reached) as the reason /readyz gives."""
        return StoreUnavailable(
            f"the vector store ({self.where}) cannot be reached: {type(exc).__name__}"
        )

    def _build_field_condition(self, key: str, value: Any) -> FieldCondition | None:
        if key in IDENTITY_KEYS:  # literal: never mem0's '*' wildcard, never an operator
            return FieldCondition(key=key, match=MatchValue(value=literal_id(key, value)))
        return super()._build_field_condition(key, value)

    def _create_filter(self, filters: Filters) -> Filter | None:
        """mem0's translation with the identity rules of every store (stores/filters.py).

        mem0 recurses through this method for AND/OR/NOT items; identity keys were refused
        there by the top-level call, so the confinement below applies to the top level only.
        """
        if filters:
            refuse_nested_identity(filters)
        built = super()._create_filter(filters)
        if not filters or not confined_to_no_user(filters):
            return built
        empty = IsEmptyCondition(is_empty=PayloadField(key=OWNER_KEY))
        return Filter(must=[empty] if built is None else [built, empty])

    def facet_counts(self, key: str, limit: int) -> dict[FacetValue, int]:
        hits = self.client.facet(self.collection_name, key=key, limit=limit, exact=True).hits
        return {hit.value: hit.count for hit in hits}

    def _get_bm25_encoder(self) -> OfflineBm25:
        if self._bm25_encoder is None:
            self._bm25_encoder = OfflineBm25(self.tokenizer)
        return self._bm25_encoder

    def keyword_search(
        self, query: str, top_k: int = 5, filters: Filters | None = None
    ) -> list[ScoredPoint] | None:
        if not self._has_bm25_slot:
            return None
        terms = self._get_bm25_encoder().model.embed_query(query)
        sparse = SparseVector(indices=list(terms.indices), values=list(terms.values))
        hits = self.client.query_points(
            collection_name=self.collection_name,
            query=sparse,
            using="bm25",
            query_filter=self._create_filter(filters) if filters else None,
            limit=top_k,
        )
        return hits.points

    def cosine(
        self, vectors: list[float], ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        if not ids:
            return {}
        scope = self._create_filter(filters) if filters else None
        only = Filter(must=[HasIdCondition(has_id=list(ids)), *([scope] if scope else [])])
        hits = self.client.query_points(
            collection_name=self.collection_name, query=vectors, query_filter=only, limit=len(ids)
        )
        return {str(hit.id): hit.score for hit in hits.points}

    def reindex(
        self, vector_id: PointId, payload: Payload, vector: list[float] | None = None
    ) -> None:
        """EdgeVectorStore.reindex on a server: mem0's insert re-encodes the BM25 terms."""
        if vector is None:
            points = self.client.retrieve(self.collection_name, ids=[vector_id], with_vectors=True)
            if not points:
                return
            vector = dense_vector(points[0].vector)
        self.insert(vectors=[vector], payloads=[payload], ids=[vector_id])

    def points(self, batch: int = 1000) -> Iterator[tuple[str, list[float], Payload]]:
        """EdgeVectorStore.points on a server: scroll the collection with vectors (backups)."""
        offset: Any = None
        while True:
            records: list[Record]
            records, offset = self.client.scroll(
                self.collection_name,
                limit=batch,
                offset=offset,
                with_payload=True,
                with_vectors=True,
            )
            for record in records:
                yield str(record.id), dense_vector(record.vector), dict(record.payload or {})
            if offset is None:
                return

    def count(self, filters: Filters | None = None) -> int:
        try:
            return self._count(filters)
        except UNREACHABLE as exc:
            raise self.unavailable(exc) from None

    def _count(self, filters: Filters | None = None) -> int:
        flt = self._create_filter(filters) if filters else None
        return self.client.count(self.collection_name, count_filter=flt, exact=True).count

    def use_api_key(self, api_key: str | None) -> None:
        """Send `api_key` from the next call on: a client built with it replaces the current
        one, which the calls already running keep using and which is closed
        RETIRED_CLIENT_GRACE_S later (or at `close`). Only for a store built from a URL."""
        if self._url is None:
            raise ValueError(f"{self.where}: built on a given client, it has no key to change")
        client = server_client(self._url, api_key)
        with self._client_swap:
            old, self.client = self.client, client
        timer = threading.Timer(RETIRED_CLIENT_GRACE_S, self._close_retired, (id(old),))
        timer.daemon = True
        with self._retired_lock:
            self._retired[id(old)] = (old, timer)
        timer.start()

    def _close_retired(self, key: int) -> None:
        with self._retired_lock:
            retired = self._retired.pop(key, None)
        if retired is not None:
            retired[0].close()

    def close(self) -> None:
        """Close the client, and any replaced one still waiting out its grace period."""
        with self._retired_lock:
            retired, self._retired = list(self._retired.values()), {}
        for client, timer in retired:
            timer.cancel()
            client.close()
        self.client.close()


if TYPE_CHECKING:  # mypy holds the store to the contract
    _IS_A_VECTOR_STORE: type[VectorStore] = QdrantServerStore
