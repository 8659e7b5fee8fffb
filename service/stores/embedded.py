"""The vector store on the embedded Qdrant engine (``qdrant-edge-py``): no server to run.

The embedded default keeps each collection in one on-disk shard, ``<path>/<collection_name>``,
so a pod needs no Qdrant server. Semantics and return shapes follow mem0's own Qdrant store
(``mem0/vector_stores/qdrant.py``), which mem0's ``Memory``/``AsyncMemory`` are written against;
the contract is ``stores/protocol.VectorStore``, the filter language ``stores/filters.py``.

Concurrency (measured on qdrant-edge 0.9.0): one ``EdgeShard`` used unguarded by 8 writer and
8 reader threads (upserts, set_payload, deletes against query, sparse query, scroll, count)
raised no errors and lost no writes, so the engine is internally synchronized. Its calls also
hold the GIL throughout (another Python thread stalled 183 ms during a 195 ms upsert of 5000
points and 634 ms during a 649 ms flush), so threads get no parallelism inside the engine, and
a long call made through asyncio.to_thread still stalls the event loop. Reads are therefore
unlocked; one lock serializes writes and the handle's lifecycle, so close()/reset() never swap
the shard out under a write and a two-step partial update() is atomic w.r.t. other writes. A
read racing close() fails with the engine's "Shard is not initialized".

Durability (measured): updates go to a memory-mapped WAL (strace: no write, msync or fsync
during 20 upserts) and nothing is flushed in the background (none within 12 s). A process
killed with SIGKILL after acknowledged writes, without flush or close, loses none of them: the
next load replays the WAL. An OS crash or power loss can lose writes made since the last
flush(), which close() performs (it msyncs and fsyncs).

Erasure (measured on qdrant-edge 0.9.0): a delete leaves the payload in the segment's pages
and in the memory-mapped WAL (32 MiB, reused only when full); `optimize()` rewrites segments,
never the WAL, and the WAL cannot be emptied (its indexes number the segments' versions).
`purge()` therefore copies every live point as stored into a new shard that replaces the old
one, whose files are deleted: one copy of the store; reads go on, writes wait. A crash at any
step leaves a whole shard: `.<name>.purge` (the copy) is dropped at the next open, and
`.<name>.old` (the replaced shard) too, after the copy takes its place if the crash came
between the two renames.

Index (measured on qdrant-edge 0.9.0): points land in plain segments, which a search scans
(12.6 ms for 100k 384-dimensional vectors on this project's 2-core machine); only the
engine's `optimize()` builds their HNSW graph (2.2 ms after it). It holds the GIL for its
whole run (44 s at 100k: every other thread, the event loop included, would stop), and the
shard's WAL lock admits one process. So `build_index()` copies the flushed shard
(`.<name>.index`), has a child process (`python -m memorystore.service.stores.edge_indexer`)
optimize the copy, replays onto it the writes made meanwhile (recorded as they are applied),
and swaps it in as a purge does. Writes wait only for the copy and the replay; reads go on.
Whatever replaces or drops the shard (purge, reset, close) first kills a build in flight and
deletes its copy, so no erased text outlives a purge in a copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import qdrant_edge as qe

from memorystore.service.retrieval import lexical
from memorystore.service.stores.edge_files import ShardFiles
from memorystore.service.stores.filters import engine_filter
from memorystore.service.stores.protocol import (
    FacetValue,
    Filters,
    OutputData,
    Payload,
    PointId,
    VectorStore,
)
from memorystore.spec import INDEX_AFTER, LexicalTokenizer

__all__ = [
    "INDEX_AFTER",
    "KEYWORD_INDEX_FIELDS",
    "TENANT_FIELD",
    "EdgeVectorStore",
    "IndexBuildFailed",
    "dense_vector",
    "point_of",
]

BM25_VECTOR = "bm25"
# Fields mem0 scopes and deduplicates by, the re-index's filter (service/retrieval/reindex.py) and
# the retired memories' marker every search excludes (retirement.active_only); user_id is the
# tenant, so the engine can co-locate it.
KEYWORD_INDEX_FIELDS = (
    "user_id",
    "agent_id",
    "run_id",
    "actor_id",
    "hash",
    "index_version",
    "lifecycle",
)
TENANT_FIELD = "user_id"
_CONFIG_FILE = "edge_config.json"
PURGE_PAGE = 512  # points copied per operation when the shard is rewritten
# the graph's shape (Qdrant's defaults); one indexing thread leaves the service a core
HNSW = qe.HnswIndexConfig(
    m=16, ef_construct=100, full_scan_threshold=10_000, max_indexing_threads=1
)
_INDEXER = "memorystore.service.stores.edge_indexer"


class IndexBuildFailed(RuntimeError):
    """The child process that builds the HNSW graph failed; the live shard is untouched."""


class EdgeVectorStore:
    """A `VectorStore` on one embedded Qdrant shard (cosine dense + BM25 sparse)."""

    def __init__(
        self,
        collection_name: str,
        embedding_model_dims: int,
        path: str,
        keyword_search: bool = False,
        tokenizer: str = LexicalTokenizer.MULTILINGUAL,
        index_after: int = INDEX_AFTER,
        **_ignored: object,
    ) -> None:
        """Open ``<path>/<collection_name>``, creating it if absent.

        mem0's factory passes its whole vector-store config, hence ``**_ignored``. BM25 vectors
        are always stored so that ``keyword_search`` can be switched on later without a reindex.
        """
        self.collection_name = collection_name
        self.embedding_model_dims = embedding_model_dims
        self.root = Path(path)
        self.files = ShardFiles(self.root, collection_name)
        self.path = self.files.live
        self._keyword_search = keyword_search
        self.tokenizer = LexicalTokenizer(tokenizer)
        self._bm25 = lexical.encoder(self.tokenizer)
        self._lock = threading.Lock()
        self._shard: qe.EdgeShard | None = None
        # reads in flight, and whether the shard is being swapped (purge): a swap waits for
        # the reads and new reads wait for the swap, so no read meets a closed shard
        self._gate = threading.Condition()
        self._readers = 0
        self._swapping = False
        self.index_after = index_after  # 0: never build the graph (every search scans)
        # while a graph is built aside: the writes to replay onto it, the child building it,
        # and the epoch it was copied in (whatever replaces the shard bumps the epoch)
        self._journal: list[qe.UpdateOperation] | None = None
        self._indexer: subprocess.Popen[bytes] | None = None
        self._epoch = 0
        self.create_col()

    # --- lifecycle -------------------------------------------------------------------------

    def create_col(self, *_ignored: object, **_ignored_kw: object) -> None:
        """Open this store's shard, creating it if absent; a no-op while it is open.

        mem0's base signature passes a name, size and distance, but a store is bound to one
        shard with cosine distance and ``embedding_model_dims``, so they are ignored.
        """
        with self._lock:
            if self._shard is None:
                self._shard = self._open_shard()

    def close(self) -> None:
        """Flush and release the shard (and its WAL lock) so the path can be reopened."""
        with self._lock:
            self._cancel_index()
            self._close_shard()

    def delete_col(self) -> None:
        """Close the shard and delete its directory; the store stays closed."""
        with self._lock:
            self._cancel_index()
            self._drop_shard()

    def reset(self) -> None:
        """Delete every point by dropping the shard and creating an empty one in its place."""
        with self._lock:
            self._cancel_index()
            self._drop_shard()
            self._shard = self._open_shard()

    def list_cols(self) -> list[str]:
        """Names of the collections (shard directories) under this store's root path."""
        if not self.root.is_dir():
            return []
        return sorted(
            d.name
            for d in self.root.iterdir()
            if not d.name.startswith(".") and (d / _CONFIG_FILE).is_file()
        )

    def col_info(self) -> dict[str, Any]:
        """Size and location of this collection."""
        with self._read() as shard:
            info = shard.info()
        return {
            "name": self.collection_name,
            "path": str(self.path),
            "points_count": info.points_count,
            "segments_count": info.segments_count,
            "vector_size": self.embedding_model_dims,
        }

    # --- writes ----------------------------------------------------------------------------

    def insert(
        self,
        vectors: list[list[float]],
        payloads: list[Payload] | None = None,
        ids: Sequence[PointId] | None = None,
    ) -> None:
        """Upsert points in one operation, each with its dense and BM25 vector."""
        points = [
            self._point(idx if ids is None else ids[idx], vector, payloads[idx] if payloads else {})
            for idx, vector in enumerate(vectors)
        ]
        self._write(qe.UpdateOperation.upsert_points(points))

    def update(
        self,
        vector_id: PointId,
        vector: list[float] | None = None,
        payload: Payload | None = None,
    ) -> None:
        """Replace the point when given both parts, else patch what is given (like mem0).

        A payload-only update merges into the stored payload and leaves the BM25 vector as it
        was, exactly as mem0's Qdrant store does with ``set_payload``.
        """
        if vector is not None and payload is not None:
            self._write(qe.UpdateOperation.upsert_points([self._point(vector_id, vector, payload)]))
            return
        operations: list[qe.UpdateOperation] = []
        if payload is not None:
            operations.append(qe.UpdateOperation.set_payload([vector_id], payload))
        if vector is not None:
            operations.append(
                qe.UpdateOperation.update_vectors([qe.PointVectors(vector_id, vector)])
            )
        self._write(*operations)

    def reindex(
        self, vector_id: PointId, payload: Payload, vector: list[float] | None = None
    ) -> None:
        """Rewrite one point: this payload, its BM25 terms encoded from it now, and `vector`
        (the stored dense vector when None). A point deleted meanwhile stays deleted."""
        with self._lock:
            shard = self._open()
            if vector is None:
                records = shard.retrieve([vector_id], False, True)
                if not records:
                    return
                vector = dense_vector(records[0].vector)
            point = self._point(vector_id, vector, payload)
            self._apply(shard, qe.UpdateOperation.upsert_points([point]))

    def delete(self, vector_id: PointId) -> None:
        """Delete one point; deleting an unknown id is a no-op."""
        self._write(qe.UpdateOperation.delete_points([vector_id]))

    def purge(self) -> int:
        """Rewrite the shard with only its live points, so nothing deleted stays on disk
        (payload pages, WAL); returns the points kept. Writes wait; reads go on, on the old
        shard until the new one takes its place (see the module's "Erasure")."""
        with self._lock:
            self._cancel_index()  # its copy holds what this purge erases
            shard = self._open()
            shard.flush()
            copy = self.files.purge_copy
            if copy.exists():
                shutil.rmtree(copy)
            fresh = qe.EdgeShard.create(str(copy), self._config())
            try:
                _index_fields(fresh)
                kept = _copy_points(shard, fresh)
                fresh.flush()
            finally:
                fresh.close()
            self._replace(copy)
            return kept

    # --- index -----------------------------------------------------------------------------

    def unindexed(self) -> int:
        """Points whose dense vector is in no HNSW graph yet (a search scans them).

        The engine counts indexed vectors of every kind together, and a plain segment's BM25
        vectors already count (their index is mutable), so the dense ones are the rest."""
        with self._read() as shard:
            info = shard.info()
            sparse = shard.count(
                qe.CountRequest(
                    exact=True, filter=qe.Filter(must=[qe.HasVectorCondition(BM25_VECTOR)])
                )
            )
        return max(0, info.points_count - (info.indexed_vectors_count - sparse))

    def index_due(self) -> bool:
        """Whether enough points wait outside the graph for a build (`index_after`)."""
        return (
            self.index_after > 0
            and self._indexer is None
            and (self.unindexed() >= self.index_after)
        )

    def build_index(self) -> bool:
        """Build the HNSW graph of every segment large enough, in a child process on a copy,
        and swap the result in (see the module's "Index"). False when another build runs or
        the shard was replaced meanwhile (the copy is dropped); IndexBuildFailed when the
        child fails. Blocks for the build's length: call it from a worker thread."""
        copy = self.files.index_copy
        with self._lock:
            if self._indexer is not None:
                return False
            shard = self._open()
            shard.flush()
            if copy.exists():
                shutil.rmtree(copy)
            shutil.copytree(self.path, copy)
            epoch = self._epoch
            self._journal = []
            child = self._indexer = subprocess.Popen(
                [sys.executable, "-m", _INDEXER, str(copy), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        _, err = child.communicate()
        with self._lock:
            if epoch != self._epoch:  # cancelled: _cancel_index dropped the copy
                return False
            journal, self._journal, self._indexer = self._journal or [], None, None
            if child.returncode != 0:
                shutil.rmtree(copy, ignore_errors=True)
                tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
                raise IndexBuildFailed(
                    f"index build of {self.path} exited with {child.returncode}: {tail[0]}"
                )
            try:
                built = qe.EdgeShard.load(str(copy), self._config())
                try:
                    for operation in journal:
                        built.update(operation)
                    built.flush()
                finally:
                    built.close()
            except BaseException:  # the live shard is untouched; the copy goes
                shutil.rmtree(copy, ignore_errors=True)
                raise
            self._replace(copy)
        return True

    # --- reads -----------------------------------------------------------------------------

    def search(
        self,
        query: str,
        vectors: list[float],
        top_k: int = 5,
        filters: Filters | None = None,
    ) -> list[OutputData]:
        """Dense search; ``score`` is the cosine similarity (higher is closer)."""
        request = self._request(qe.Query.Nearest(vectors), top_k, engine_filter(filters))
        with self._read() as shard:
            return [_output(hit) for hit in shard.query(request)]

    def search_batch(
        self,
        queries: list[str],
        vectors_list: list[list[float]],
        top_k: int = 1,
        filters: Filters | None = None,
    ) -> list[list[OutputData]]:
        """Run several dense searches as one planned batch, results in input order."""
        query_filter = engine_filter(filters)
        batch = qe.QueryBatchRequest(
            [self._request(qe.Query.Nearest(v), top_k, query_filter) for v in vectors_list]
        )
        with self._read() as shard:
            found = shard.query_batch(batch)
        return [[_output(hit) for hit in hits] for hits in found]

    def keyword_search(
        self, query: str, top_k: int = 5, filters: Filters | None = None
    ) -> list[OutputData] | None:
        """BM25 search over the sparse vectors, or None (mem0's "unsupported") when disabled.

        Documents are indexed from the payload's ``text_lemmatized`` (the service puts the
        speaker and date there) or else its ``data``.
        """
        if not self._keyword_search:
            return None
        nearest = qe.Query.Nearest(self._bm25.embed_query(query), using=BM25_VECTOR)
        request = self._request(nearest, top_k, engine_filter(filters))
        with self._read() as shard:
            return [_output(hit) for hit in shard.query(request)]

    def cosine(
        self, vectors: list[float], ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        """The dense score of `vectors` against just these points (keyword hits' similarity)."""
        return self._scores(qe.Query.Nearest(vectors), ids, filters)

    def keyword_scores(
        self, query: str, ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        """The BM25 score of `query` against just these points (dense hits')."""
        if not self._keyword_search:
            return {}
        return self._scores(
            qe.Query.Nearest(self._bm25.embed_query(query), using=BM25_VECTOR), ids, filters
        )

    def _scores(
        self, query: qe.Query, ids: Sequence[str], filters: Filters | None
    ) -> dict[str, float]:
        if not ids:
            return {}
        scope = engine_filter(filters)
        only = qe.Filter(must=[qe.HasIdCondition(set(ids)), *([scope] if scope else [])])
        request = qe.QueryRequest(limit=len(ids), query=query, filter=only)
        with self._read() as shard:
            return {str(hit.id): hit.score for hit in shard.query(request)}

    def get(self, vector_id: PointId) -> OutputData | None:
        """The point with this id, or None when there is none."""
        try:
            with self._read() as shard:
                records = shard.retrieve([vector_id], True, False)
        except ValueError:  # Not parseable as a point id, so no point can have it.
            return None
        return _output(records[0]) if records else None

    def points(self, batch: int = 1000) -> Iterator[tuple[str, list[float], Payload]]:
        """Every point as (id, dense vector, payload), a page at a time (backups)."""
        return map(point_of, self._scroll(batch, whole=True))

    def ids(self, batch: int = 1000) -> Iterator[str]:
        """Every point's id, a page at a time, without reading vectors or payloads."""
        return (str(record.id) for record in self._scroll(batch, whole=False))

    def _scroll(self, batch: int, whole: bool) -> Iterator[Any]:
        offset: Any = None
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=batch, with_payload=whole, with_vector=whole
            )
            with self._read() as shard:
                records, offset = shard.scroll(request)
            yield from records
            if offset is None:
                return

    def count(self, filters: Filters | None = None) -> int:
        """Exact number of points matching the filters."""
        request = qe.CountRequest(exact=True, filter=engine_filter(filters))
        with self._read() as shard:
            return shard.count(request)

    def facet_counts(self, key: str, limit: int) -> dict[FacetValue, int]:
        """Points per distinct value of a keyword-indexed field, read from its index."""
        with self._read() as shard:
            hits = shard.facet(qe.FacetRequest(key, limit=limit, exact=True))
        return {hit.value: hit.count for hit in hits}

    # --- internals -------------------------------------------------------------------------

    def _open(self) -> qe.EdgeShard:
        shard = self._shard
        if shard is None:
            raise RuntimeError(f"EdgeVectorStore for {self.path} is closed")
        return shard

    @contextmanager
    def _read(self) -> Iterator[qe.EdgeShard]:
        """The open shard for one read; a purge's swap waits until the read is done."""
        with self._gate:
            while self._swapping:
                self._gate.wait()
            shard = self._open()
            self._readers += 1
        try:
            yield shard
        finally:
            with self._gate:
                self._readers -= 1
                if not self._readers:
                    self._gate.notify_all()

    @contextmanager
    def _swap(self) -> Iterator[None]:
        """No read in flight and none starting while the body replaces the shard."""
        with self._gate:
            self._swapping = True
            while self._readers:
                self._gate.wait()
        try:
            yield
        finally:
            with self._gate:
                self._swapping = False
                self._gate.notify_all()

    def _replace(self, copy: Path) -> None:
        """Put the finished `copy` in the shard's place (with the lock held); reads wait for
        the swap, a crash half-way is finished at the next open (`ShardFiles.recover`)."""
        with self._swap():
            self._close_shard()
            self.files.swap_in(copy)
            self._shard = self._open_shard()

    def _cancel_index(self) -> None:
        """Stop a build in flight and delete its copy (with the lock held): the shard is
        about to be replaced or dropped, so the copy would be stale, or hold erased text."""
        self._epoch += 1
        child, self._indexer, self._journal = self._indexer, None, None
        if child is not None:
            child.kill()
            child.wait()
            shutil.rmtree(self.files.index_copy, ignore_errors=True)

    def _config(self) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(
                size=self.embedding_model_dims, distance=qe.Distance.Cosine
            ),
            sparse_vectors={BM25_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            hnsw_config=HNSW,
        )

    def _write(self, *operations: qe.UpdateOperation) -> None:
        with self._lock:
            shard = self._open()
            for operation in operations:
                self._apply(shard, operation)

    def _apply(self, shard: qe.EdgeShard, operation: qe.UpdateOperation) -> None:
        """One write (with the lock held), recorded for the index build in flight, if any."""
        shard.update(operation)
        if self._journal is not None:
            self._journal.append(operation)

    def _close_shard(self) -> None:
        if self._shard is not None:
            self._shard.flush()
            self._shard.close()
            self._shard = None

    def _drop_shard(self) -> None:
        self._close_shard()
        if self.path.exists():
            shutil.rmtree(self.path)

    def _open_shard(self) -> qe.EdgeShard:
        self.files.recover()
        config = self._config()
        config_file = self.path / _CONFIG_FILE
        if config_file.is_file():
            # The engine's own mismatch error is a bare Exception; name both sizes instead.
            stored = json.loads(config_file.read_text()).get("vectors", {}).get("", {}).get("size")
            if stored is not None and stored != self.embedding_model_dims:
                raise ValueError(
                    f"Shard {self.path} stores {stored}-dimensional vectors, but "
                    f"embedding_model_dims is {self.embedding_model_dims}"
                )
            shard = qe.EdgeShard.load(str(self.path), config)
        else:
            shard = qe.EdgeShard.create(str(self.path), config)
        _index_fields(shard)
        return shard

    def _point(self, point_id: PointId, vector: list[float], payload: Payload) -> qe.Point:
        named: dict[str, Any] = {"": vector}
        text = lexical.keyword_text(payload)
        if text:
            named[BM25_VECTOR] = self._bm25.embed_document(text)
        return qe.Point(point_id, named, payload)

    @staticmethod
    def _request(query: qe.Query, top_k: int, query_filter: qe.Filter | None) -> qe.QueryRequest:
        return qe.QueryRequest(limit=top_k, query=query, filter=query_filter, with_payload=True)

    # Defined last: inside the class body the name ``list`` is this method from here on, so
    # earlier annotations such as ``list[float]`` still mean the builtin.
    def list(
        self, filters: Filters | None = None, top_k: int = 100
    ) -> tuple[list[OutputData], str | None]:
        """``(points, next_offset)`` like qdrant-client's scroll, which mem0 indexes with [0]."""
        request = qe.ScrollRequest(
            limit=top_k, filter=engine_filter(filters), with_payload=True, with_vector=False
        )
        with self._read() as shard:
            records, next_offset = shard.scroll(request)
        return [_output(r) for r in records], None if next_offset is None else str(next_offset)


def _index_fields(shard: qe.EdgeShard) -> None:
    """The keyword indexes every shard of the store has (created where missing)."""
    indexed = shard.info().payload_schema
    for field in KEYWORD_INDEX_FIELDS:
        if field not in indexed:
            params = qe.KeywordIndexParams(is_tenant=field == TENANT_FIELD)
            shard.update(qe.UpdateOperation.create_field_index(field, params))


def _copy_points(source: qe.EdgeShard, target: qe.EdgeShard) -> int:
    """Every live point of `source` into `target` as stored (ids, all vectors, payload)."""
    copied = 0
    offset: Any = None
    while True:
        request = qe.ScrollRequest(
            offset=offset, limit=PURGE_PAGE, with_payload=True, with_vector=True
        )
        records, offset = source.scroll(request)
        if records:
            points = [qe.Point(r.id, r.vector or {}, r.payload or {}) for r in records]
            target.update(qe.UpdateOperation.upsert_points(points))
            copied += len(points)
        if offset is None:
            return copied


def dense_vector(stored: Any) -> list[float]:
    """A point's dense vector as both engines hand it back: alone, or under the unnamed key
    beside the named sparse `bm25` vector."""
    vector = stored[""] if isinstance(stored, dict) else stored
    return list(vector or [])


def point_of(record: Any) -> tuple[str, list[float], Payload]:
    """(id, dense vector, payload) of a scrolled point, from either engine (`points`)."""
    return str(record.id), dense_vector(record.vector), dict(record.payload or {})


def _output(point: qe.ScoredPoint | qe.Record) -> OutputData:
    # The engine hands UUID ids back as uuid.UUID; mem0 compares them as strings.
    return OutputData(
        id=str(point.id), score=getattr(point, "score", None), payload=point.payload or {}
    )


if TYPE_CHECKING:  # mypy holds the store to the contract
    _IS_A_VECTOR_STORE: type[VectorStore] = EdgeVectorStore
