"""The vector store on a Qdrant server (spec.vectorStore.managed / external): mem0's own.

Why a subclass of mem0's `Qdrant` store rather than a store of our own: mem0's store already
speaks to a server through qdrant-client, gives the collection a `bm25` sparse slot (IDF
computed by the server) and writes and searches as mem0 is tested. What it lacks is added
here, held to the contract every store keeps (tests/integration/test_store_contract.py, on a
real server): the engine's filter translation (stores/server_filters.py), the embedded
store's payload indexes, ids, results and errors, an offline BM25 encoder (mem0's is
fastembed, a model download), the cosine look-up, facet and exact counts, re-indexing,
backups' scroll, the managed collection layout, TLS against a given CA, and StoreUnavailable
(a 503) for every call the server does not answer or keeps failing (its client guarded by
stores/qdrant_guard.py). That means overriding mem0 internals: this
module is the one place besides `engine/mem0_seam.py` that touches them; the seam's
docstring lists each and `tests/unit/service/engine/test_mem0_seam.py` checks them against
the installed mem0.

The server's API key and CA can change while the service runs (mounted files re-read by
ops/secret_files.py): qdrant-client fixes both when a client is built, so `use_api_key` and
`use_ca` build another client and swap it in; calls already running finish on the old one,
which is closed a grace period later (or at `close`).
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Iterable, Iterator, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse
from qdrant_client.models import (
    Filter,
    HasIdCondition,
    Record,
    ScoredPoint,
    SparseVector,
    SparseVectorParams,
    VectorParams,
)

from memorystore.service.retrieval import lexical
from memorystore.service.stores.embedded import (
    KEYWORD_INDEX_FIELDS,
    TENANT_FIELD,
    dense_vector,
    point_of,
)
from memorystore.service.stores.protocol import (
    FacetValue,
    Filters,
    OutputData,
    Payload,
    PointId,
    StoreUnavailable,
    VectorStore,
)
from memorystore.service.stores.qdrant_guard import Guarded
from memorystore.service.stores.server_filters import server_filter
from memorystore.spec import LexicalTokenizer

__all__ = [
    "RETIRED_CLIENT_GRACE_S",
    "OfflineBm25",
    "QdrantServerStore",
    "ca_context",
    "point_id",
    "server_client",
]

log = logging.getLogger("memorystore.service")
# mem0's Qdrant store logs every insert at INFO ("Inserting 1 vectors into collection …"): a
# line per memory written, nothing an operator acts on
logging.getLogger("mem0.vector_stores.qdrant").setLevel(logging.WARNING)
# how long a client replaced by `use_api_key` stays open for the calls already running on it:
# far beyond qdrant-client's REST timeout (5 s unless configured) and one scroll batch
RETIRED_CLIENT_GRACE_S = 60.0
DELETED = "closed: its collection was deleted (create_col makes it again)"


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
        def insert(
            self,
            vectors: list[list[float]],
            payloads: list[Payload] | None = None,
            ids: Sequence[PointId] | None = None,
        ) -> None: ...
        def delete(self, vector_id: PointId) -> None: ...
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


def ca_context(ca: str, field: str = "vectorStore.server.ca") -> ssl.SSLContext:
    """A TLS context that trusts `ca` (PEM) only; ValueError naming `field` when it holds no
    certificate (never its text)."""
    try:
        return ssl.create_default_context(cadata=ca)
    except (ssl.SSLError, ValueError):
        raise ValueError(f"{field}: not a PEM CA certificate") from None


def server_client(url: str | None, api_key: str | None, ca: str | None = None) -> QdrantClient:
    """A client of the server at `url` with `api_key`, built as mem0's `Qdrant` constructor
    builds its own, verifying the server's certificate against `ca` (PEM) when given."""
    params: dict[str, Any] = {}
    if api_key:
        params["api_key"] = api_key
    if url:
        params["url"] = url
    if ca:
        params["verify"] = ca_context(ca)
        # qdrant-client 1.19.1 checks the server's version with a bare httpx.get that ignores
        # `verify` (common/version_check.py), so against a private CA it always fails and
        # warns; the check is skipped there (the chart pins a compatible server version).
        params["check_compatibility"] = False
    return QdrantClient(**params)


def point_id(value: PointId) -> int | str:
    """A point id as Qdrant takes it: an unsigned integer, or a UUID in its canonical form;
    anything else is refused as the embedded engine refuses it (ValueError, naming it)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    try:
        return str(UUID(str(value)))
    except ValueError:
        raise ValueError(f"failed to parse {value} as UUID") from None


def _output(point: Record) -> OutputData:
    return OutputData(id=str(point.id), score=None, payload=dict(point.payload or {}))


class QdrantServerStore(Qdrant):
    """mem0's Qdrant store, held to the contract of the other stores (stores/protocol.py,
    tests/integration/test_store_contract.py runs the same suite on all three): the engine's
    filter translation (stores/server_filters.py), the embedded store's payload indexes, ids,
    results and errors; plus an offline BM25 encoder, a cosine lookup and an exact count.

    mem0 already gives the collection a `bm25` sparse slot (IDF computed by the server) but
    encodes with fastembed, which downloads its model; the same qdrant-edge encoder as the
    embedded store is used instead, so hybrid retrieval works the same on both.

    `shard_number` and `replication_factor` (a managed Qdrant's spec.vectorStore.managed
    shards and replicationFactor) are used when the collection is created; an existing
    collection is left as it is (one of another dimension is refused). Unset: the server's
    defaults. `keyword_search` is spec.retrieval.hybrid, as on the other stores: the BM25
    terms are always stored, so it can be switched on later without a reindex.
    """

    _bm25_encoder: OfflineBm25 | None

    def __init__(
        self,
        *args: Any,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        tokenizer: str = LexicalTokenizer.MULTILINGUAL,
        keyword_search: bool = False,
        ca: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.tokenizer = LexicalTokenizer(tokenizer)
        self._keyword_search = keyword_search
        # set before mem0's constructor, which creates the collection
        self.shard_number = shard_number
        self.replication_factor = replication_factor
        self.where = f"Qdrant server at {_without_credentials(str(kwargs.get('url') or ''))}"
        self._url: str | None = None if kwargs.get("client") else kwargs.get("url")
        self._api_key: str | None = kwargs.get("api_key")
        self._ca = ca
        if self._url is not None:  # our client: mem0's would not verify against `ca`
            kwargs["client"] = server_client(self._url, self._api_key, ca)
        # why calls are refused ("closed", or "closed: its collection was deleted")
        self._closed: str | None = None
        self._retired: dict[int, tuple[QdrantClient, threading.Timer]] = {}
        self._retired_lock = threading.Lock()
        # mem0's constructor creates the collection: a server that is not up yet must not stop
        # the service from starting (the engine creates it once the server answers, and
        # /readyz says why meanwhile)
        self._constructing = True
        try:
            super().__init__(*args, **kwargs)
        finally:
            self._constructing = False

    @property
    def client(self) -> QdrantClient:
        """The current client, whose calls raise StoreUnavailable when the server does not
        answer (every call: mem0's inherited methods use this too, so a request meeting an
        absent server is a 503, not a 500); refused once the store is closed or its
        collection deleted, as the other stores refuse (a RuntimeError saying so)."""
        if self._closed is not None:
            where = f"collection {self.collection_name} ({self.where})"
            raise RuntimeError(f"QdrantServerStore for {where} is {self._closed}")
        return self._client

    @client.setter
    def client(self, client: QdrantClient) -> None:
        guarded = client if isinstance(client, Guarded) else Guarded(client, self.unavailable)
        self._client = cast(QdrantClient, guarded)

    # --- the collection -------------------------------------------------------------------

    def create_col(
        self, vector_size: int | None = None, on_disk: bool | None = None, distance: Any = None
    ) -> None:
        """Create the collection when it is missing (dense vectors, mem0's `bm25` sparse slot,
        the configured layout, the payload indexes); an existing one is left as it is, but one
        of another dimension is refused naming both sizes. After `delete_col` the store is
        usable again. Written here rather than inherited: mem0's reads `list_cols()` as
        qdrant-client's response, which this store answers with names like the others."""
        if self._closed == DELETED:
            self._closed = None
        size = self.embedding_model_dims if vector_size is None else vector_size
        try:
            if self.client.collection_exists(self.collection_name):
                params = self.client.get_collection(self.collection_name).config.params
                self._has_bm25_slot = bool(
                    params.sparse_vectors and "bm25" in params.sparse_vectors
                )
                self._check_dimension(params.vectors, size)
            else:
                self._check_peers()
                self.client.create_collection(
                    collection_name=self.collection_name,
                    vectors_config=VectorParams(
                        size=size,
                        distance=models.Distance.COSINE if distance is None else distance,
                        on_disk=self.on_disk if on_disk is None else on_disk,
                    ),
                    sparse_vectors_config={
                        "bm25": SparseVectorParams(modifier=models.Modifier.IDF)
                    },
                    shard_number=self.shard_number,  # None: the server's default
                    replication_factor=self.replication_factor,
                )
                self._has_bm25_slot = True
            self._create_payload_indexes()
        except StoreUnavailable as exc:  # the guarded client's (every call goes through it)
            if not self._constructing:
                raise
            log.warning("%s; the collection is created when the start-up retries", exc)

    def _check_peers(self) -> None:
        """Qdrant gives a new collection one copy of each shard per peer it has at that moment
        (up to the replication factor) and adds none when more peers join later. So with a
        replication factor above the peers that have joined (a StatefulSet's pods start
        together, and pod 0 answers first), the collection waits: StoreUnavailable, which
        /readyz shows and the start-up retries, until there are enough."""
        wanted = self.replication_factor or 1
        if wanted <= 1:
            return
        status = self.client.cluster_status()
        joined = len(getattr(status, "peers", None) or {}) or 1  # no cluster: this one node
        if joined < wanted:
            raise StoreUnavailable(
                f"collection {self.collection_name} ({self.where}) not created yet: "
                f"replicationFactor {wanted} needs {wanted} Qdrant peers and {joined} "
                "have joined"
            )

    def _check_dimension(self, vectors: Any, size: int) -> None:
        dense = vectors.get("") if isinstance(vectors, dict) else vectors
        stored = getattr(dense, "size", None)
        if stored is not None and stored != size:
            raise ValueError(
                f"Collection {self.collection_name} stores {stored}-dimensional vectors "
                f"({self.where}), but embedding_model_dims is {size}"
            )

    def _create_payload_indexes(self) -> None:
        """The payload indexes the embedded store has (the tenant's co-located), and a word
        index on `data` so `contains` matches whole words there as on the other stores (a
        server without one matches substrings, on any other field too). Creating an existing
        index is a no-op."""
        for field in KEYWORD_INDEX_FIELDS:
            schema = models.KeywordIndexParams(
                type=models.KeywordIndexType.KEYWORD, is_tenant=field == TENANT_FIELD
            )
            self.client.create_payload_index(self.collection_name, field, field_schema=schema)
        words = models.TextIndexParams(
            type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.WORD, lowercase=True
        )
        self.client.create_payload_index(self.collection_name, "data", field_schema=words)

    def col_info(self) -> dict[str, Any]:
        """Size and place of this collection, as the other stores give them."""
        info = self.client.get_collection(self.collection_name)
        return {
            "name": self.collection_name,
            "url": _without_credentials(self._url or ""),
            "points_count": info.points_count,
            "segments_count": info.segments_count,
            "vector_size": self.embedding_model_dims,
        }

    def list_cols(self) -> list[str]:
        """The names of the server's collections (also once this one is deleted)."""
        client = self.client if self._closed != DELETED else self._client
        return sorted(c.name for c in client.get_collections().collections)

    def delete_col(self) -> None:
        """Delete the collection; the store refuses calls until `create_col`."""
        self.client.delete_collection(collection_name=self.collection_name)
        self._closed = DELETED

    def reset(self) -> None:
        """Delete every point: the collection dropped and created again, with its indexes."""
        self.delete_col()
        self.create_col()

    def unavailable(self, exc: BaseException) -> StoreUnavailable:
        """`exc` (the server cannot be reached, or keeps failing) as the reason /readyz gives."""
        if isinstance(exc, UnexpectedResponse):
            return StoreUnavailable(f"the vector store ({self.where}) answered {exc.status_code}")
        return StoreUnavailable(
            f"the vector store ({self.where}) cannot be reached: {type(exc).__name__}"
        )

    # --- points ---------------------------------------------------------------------------

    def _create_filter(self, filters: Filters) -> Filter | None:
        """The engine's translation, shared by every store (stores/server_filters.py), in
        place of mem0's: the same points selected, the same filters refused by name."""
        return server_filter(filters)

    def insert(
        self,
        vectors: list[list[float]],
        payloads: list[Payload] | None = None,
        ids: Sequence[PointId] | None = None,
    ) -> None:
        super().insert(vectors, payloads, None if ids is None else [point_id(i) for i in ids])

    def delete(self, vector_id: PointId) -> None:
        super().delete(point_id(vector_id))

    def get(self, vector_id: PointId) -> OutputData | None:
        """The point with this id, or None (also for an id no point can have)."""
        try:
            wanted = point_id(vector_id)
        except ValueError:
            return None
        records = self.client.retrieve(self.collection_name, ids=[wanted], with_payload=True)
        return _output(records[0]) if records else None

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
        if not self._keyword_search or not self._has_bm25_slot:
            return None
        hits = self.client.query_points(
            collection_name=self.collection_name,
            query=self._sparse_query(query),
            using="bm25",
            query_filter=self._create_filter(filters) if filters else None,
            limit=top_k,
        )
        return hits.points

    def _sparse_query(self, query: str) -> SparseVector:
        terms = self._get_bm25_encoder().model.embed_query(query)
        return SparseVector(indices=list(terms.indices), values=list(terms.values))

    def cosine(
        self, vectors: list[float], ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        return self._scores(vectors, None, ids, filters)

    def keyword_scores(
        self, query: str, ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        if not self._keyword_search or not self._has_bm25_slot:
            return {}
        return self._scores(self._sparse_query(query), "bm25", ids, filters)

    def _scores(
        self,
        query: list[float] | SparseVector,
        using: str | None,
        ids: Sequence[str],
        filters: Filters | None,
    ) -> dict[str, float]:
        if not ids:
            return {}
        scope = self._create_filter(filters) if filters else None
        only = Filter(must=[HasIdCondition(has_id=list(ids)), *([scope] if scope else [])])
        hits = self.client.query_points(
            collection_name=self.collection_name,
            query=query,
            using=using,
            query_filter=only,
            limit=len(ids),
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
        return map(point_of, self._scroll(batch, whole=True))

    def ids(self, batch: int = 1000) -> Iterator[str]:
        """Every point's id, a page at a time, without vectors or payloads on the wire."""
        return (str(record.id) for record in self._scroll(batch, whole=False))

    def _scroll(self, batch: int, whole: bool) -> Iterator[Record]:
        offset: Any = None
        while True:
            records: list[Record]
            records, offset = self.client.scroll(
                self.collection_name,
                limit=batch,
                offset=offset,
                with_payload=whole,
                with_vectors=whole,
            )
            yield from records
            if offset is None:
                return

    def count(self, filters: Filters | None = None) -> int:
        flt = self._create_filter(filters) if filters else None
        return self.client.count(self.collection_name, count_filter=flt, exact=True).count

    # --- the key, and closing ---------------------------------------------------------------

    def use_api_key(self, api_key: str | None) -> None:
        """Send `api_key` from the next call on: a client built with it replaces the current
        one, which the calls already running keep using and which is closed
        RETIRED_CLIENT_GRACE_S later (or at `close`). Only for a store built from a URL."""
        self._built_from_url("key")
        self._api_key = api_key
        self._new_client()

    def use_ca(self, ca: str) -> None:
        """Verify the server against `ca` (PEM) from the next call on, as `use_api_key`
        hands over a key (a renewed CA, re-read from its mounted file)."""
        self._built_from_url("CA")
        ca_context(ca)  # refused before anything changes
        self._ca = ca
        self._new_client()

    def _built_from_url(self, what: str) -> None:
        if self._url is None:
            raise ValueError(f"{self.where}: built on a given client, it has no {what} to change")

    def _new_client(self) -> None:
        """A client with the current key and CA in place of the current one, which the calls
        already running keep using and which is closed RETIRED_CLIENT_GRACE_S later."""
        assert self._url is not None
        client = server_client(self._url, self._api_key, self._ca)
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
        """Close the client, and any replaced one still waiting out its grace period; the
        store refuses calls from then on. Idempotent."""
        if self._closed == "closed":
            return
        with self._retired_lock:
            retired, self._retired = list(self._retired.values()), {}
        for client, timer in retired:
            timer.cancel()
            client.close()
        self._client.close()
        self._closed = "closed"

    # Defined last: inside the class body the name ``list`` is this method from here on, so
    # earlier annotations such as ``list[float]`` still mean the builtin.
    def list(
        self, filters: Filters | None = None, top_k: int = 100
    ) -> tuple[list[OutputData], str | None]:
        """``(points, next_offset)`` like qdrant-client's scroll, in id order; `top_k` 0
        gives no point and the first id as the offset, as the engine does."""
        records: list[Record]
        records, offset = self.client.scroll(
            collection_name=self.collection_name,
            scroll_filter=self._create_filter(filters) if filters else None,
            limit=max(top_k, 1),
            with_payload=True,
            with_vectors=False,
        )
        if top_k <= 0:
            return [], str(records[0].id) if records else None
        return [_output(r) for r in records], None if offset is None else str(offset)


if TYPE_CHECKING:  # mypy holds the store to the contract
    _IS_A_VECTOR_STORE: type[VectorStore] = QdrantServerStore
