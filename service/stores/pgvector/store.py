"""The vector store on PostgreSQL + pgvector: the embedded store's behaviour, shared by replicas.

The package docstring (`stores/pgvector/__init__.py`) says why it exists and how closely it
matches the engine. Here: the store's operations, each a bound-parameter statement on the
Database the engine owns and hands it (a store never opens or closes one).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, LiteralString

from psycopg import sql

from memorystore.service.retrieval import lexical
from memorystore.service.state.postgres import Database
from memorystore.service.stores.embedded import KEYWORD_INDEX_FIELDS
from memorystore.service.stores.pgvector.encoding import (
    payload_json,
    point_uuid,
    times_of,
    vector_literal,
    words_of,
)
from memorystore.service.stores.pgvector.rows import (
    HAS_TERMS,
    Row,
    check_dims,
    replace_postings,
    row_of,
    upsert,
    vector_text,
)
from memorystore.service.stores.pgvector.schema import VECTORS_PREFIX, Tables
from memorystore.service.stores.pgvector.sql_filters import FilterSql
from memorystore.service.stores.protocol import (
    FacetValue,
    Filters,
    OutputData,
    Payload,
    PointId,
    VectorStore,
)
from memorystore.spec import LexicalTokenizer

__all__ = ["PgVectorStore"]

_HNSW_EF_SEARCH_MAX = 1000  # pgvector's upper bound for hnsw.ef_search


class PgVectorStore:
    """A `VectorStore` on PostgreSQL + pgvector (cosine dense + the engine's BM25 in SQL)."""

    def __init__(
        self,
        collection_name: str,
        embedding_model_dims: int,
        database: Database,
        keyword_search: bool = False,
        tokenizer: str = LexicalTokenizer.MULTILINGUAL,
        hnsw_ef_search: int = 100,
        **_ignored: object,
    ) -> None:
        """Bind to the collection in `database` (its owner's: the engine's); the database
        is not touched until the first operation.

        mem0's factory passes its whole vector-store config, hence ``**_ignored``. BM25
        postings are always stored so that ``keyword_search`` can be switched on later.
        """
        self.collection_name = collection_name
        self.embedding_model_dims = embedding_model_dims
        self.database = database
        self.tables = Tables.of(collection_name, embedding_model_dims)
        self.vectors_table = self.tables.vectors_table
        self.terms_table = self.tables.terms_table
        self._index_stem = self.tables.index_stem
        self._vectors = self.tables.vectors
        self._terms = self.tables.terms
        self._keyword_search = keyword_search
        self.tokenizer = LexicalTokenizer(tokenizer)
        self._bm25 = lexical.encoder(self.tokenizer)
        self.hnsw_ef_search = hnsw_ef_search
        self._lock = threading.Lock()
        self._ready = False  # the schema was ensured by this instance
        self._closed = False

    # --- lifecycle -------------------------------------------------------------------------

    def create_col(self, *_ignored: object, **_ignored_kw: object) -> None:
        """Create the tables and indexes if absent (and reopen a closed store).

        mem0's base signature passes a name, size and distance, but a store is bound to one
        collection with cosine distance and ``embedding_model_dims``, so they are ignored.
        """
        with self._lock:
            self._closed = False
            self.tables.create(self.database)
            self._ready = True

    def close(self) -> None:
        """Refuse further use; the Database stays open (its owner, the engine, closes it)."""
        with self._lock:
            self._closed = True

    def delete_col(self) -> None:
        """Drop the collection's tables; the store stays closed."""
        with self._lock:
            self.tables.drop(self.database)
            self._closed = True
            self._ready = False

    def reset(self) -> None:
        """Delete every point; the tables stay (and a closed store is open again, as the
        embedded store's reset re-creates its shard)."""
        with self._lock:
            self._closed = False
        self._check()
        with self.database.transaction() as conn:
            conn.execute(sql.SQL("TRUNCATE {}, {}").format(self._terms, self._vectors))

    def list_cols(self) -> list[str]:
        """Names of the collections this store's schema holds in the database."""
        with self.database.connection() as conn:
            rows = conn.execute(
                "SELECT obj_description(c.oid, 'pg_class') FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') "
                "AND starts_with(c.relname, %s)",
                (VECTORS_PREFIX,),
            ).fetchall()
        return sorted(name for (name,) in rows if name)

    def col_info(self) -> dict[str, Any]:
        """Size and location of this collection."""
        ((points,),) = self._rows(sql.SQL("SELECT count(*) FROM {}").format(self._vectors))
        return {
            "name": self.collection_name,
            "table": self.vectors_table,
            "points_count": int(points),
            "vector_size": self.embedding_model_dims,
        }

    # --- writes ----------------------------------------------------------------------------

    def insert(
        self,
        vectors: list[list[float]],
        payloads: list[Payload] | None = None,
        ids: Sequence[PointId] | None = None,
    ) -> None:
        """Upsert points in one transaction, each with its vector, payload and BM25 postings."""
        rows: dict[str, Row] = {}  # the last of repeated ids wins, as in a sequence of upserts
        for idx, vector in enumerate(vectors):
            point_id = point_uuid(idx if ids is None else ids[idx])
            rows[point_id] = self._row(point_id, vector, payloads[idx] if payloads else {})
        if not rows:
            return
        self._check()
        with self.database.transaction() as conn:
            upsert(conn, self.tables, [rows[key] for key in sorted(rows)])  # sorted: no deadlocks

    def update(
        self,
        vector_id: PointId,
        vector: list[float] | None = None,
        payload: Payload | None = None,
    ) -> None:
        """Replace the point when given both parts, else patch what is given (like mem0).

        A payload-only update merges into the stored payload (top-level keys; a key set to
        None is removed, as the engine's set_payload does) and leaves the BM25 postings as
        they were. A partial update of a missing point raises "No point with id ...".
        """
        point_id = point_uuid(vector_id)
        if vector is not None and payload is not None:
            self.insert([vector], [payload], [point_id])
            return
        if vector is None and payload is None:
            return
        assignments: list[sql.Composable] = []
        params: dict[str, Any] = {"id": point_id}
        if payload is not None:
            kept = {k: v for k, v in payload.items() if v is not None}
            params |= {
                "dropped": list(payload),
                "patch": payload_json(kept),
                "words": payload_json(words_of(kept)),
                "times": payload_json(times_of(kept)),
            }
            for column, patch in (("payload", "patch"), ("words", "words"), ("times", "times")):
                assignments.append(
                    sql.SQL("{c} = ({c} - %(dropped)s::text[]) || {p}::jsonb").format(
                        c=sql.Identifier(column), p=sql.Placeholder(patch)
                    )
                )
        if vector is not None:
            params["vector"] = vector_text(vector, self.embedding_model_dims)
            assignments.append(sql.SQL("vector = %(vector)s::vector"))
        self._check()
        with self.database.transaction() as conn:
            updated = conn.execute(
                sql.SQL("UPDATE {} SET {} WHERE id = %(id)s::uuid").format(
                    self._vectors, sql.SQL(", ").join(assignments)
                ),
                params,
            ).rowcount
        if not updated:
            raise LookupError(f"No point with id {point_id}")

    def reindex(
        self, vector_id: PointId, payload: Payload, vector: list[float] | None = None
    ) -> None:
        """Rewrite one point: this payload, its BM25 terms encoded from it now, and `vector`
        (the stored one when None). A point deleted meanwhile stays deleted, with or without
        a new vector (the embedded store re-creates it when given one)."""
        point_id = point_uuid(vector_id)
        row = self._row(point_id, vector, payload)
        self._check()
        with self.database.transaction() as conn:
            vector_part = sql.SQL(", vector = %(vector)s::vector" if vector is not None else "")
            updated = conn.execute(
                sql.SQL(
                    "UPDATE {} SET payload = %(payload)s::jsonb, words = %(words)s::jsonb, "
                    "times = %(times)s::jsonb{} WHERE id = %(id)s::uuid"
                ).format(self._vectors, vector_part),
                {
                    "id": point_id,
                    "vector": row.vector,
                    "payload": row.payload,
                    "words": row.words,
                    "times": row.times,
                },
            ).rowcount
            if updated:
                replace_postings(conn, self.tables, [row])

    def delete(self, vector_id: PointId) -> None:
        """Delete one point and its postings; deleting an unknown id is a no-op."""
        point_id = point_uuid(vector_id)
        self._check()
        with self.database.transaction() as conn:
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE id = %s::uuid").format(self._vectors), (point_id,)
            )

    # --- reads -----------------------------------------------------------------------------

    def search(
        self,
        query: str,
        vectors: list[float],
        top_k: int = 5,
        filters: Filters | None = None,
    ) -> list[OutputData]:
        """Dense search; ``score`` is the cosine similarity (higher is closer)."""
        return self.search_batch([query], [vectors], top_k, filters)[0]

    def search_batch(
        self,
        queries: list[str],
        vectors_list: list[list[float]],
        top_k: int = 1,
        filters: Filters | None = None,
    ) -> list[list[OutputData]]:
        """Several dense searches in one transaction, results in input order.

        HNSW filters after it walks the graph, so a selective filter could starve a plain
        index scan; pgvector 0.8's iterative scan keeps walking until `top_k` rows pass, and
        the rows are re-sorted by distance (``relaxed_order`` may return them slightly out
        of order). The walk stops after ``hnsw.max_scan_tuples`` (20000 by default) and can
        miss points (duplicates, dead rows), so a short answer is asked again in a form the
        HNSW index cannot serve: exact, and cheap when it is short because the filter holds
        few points (the GIN index finds them). (Not by switching enable_indexscan off: psycopg
        prepares a statement run repeatedly, and a prepared plan ignores that switch.)
        """
        where, params = self._where(filters)
        for vector in vectors_list:
            self._check_dims(vector)
        self._check()
        statement = (
            "WITH hits AS MATERIALIZED (SELECT p.id, p.payload, p.vector <=> %(q)s::vector AS d "
            "FROM {} AS p WHERE {} ORDER BY {} LIMIT %(k)s) "
            "SELECT id, payload, d FROM hits ORDER BY d, id"
        )
        nearest = sql.SQL(statement).format(
            self._vectors, where, sql.SQL("p.vector <=> %(q)s::vector")
        )
        # the same order in a form no index serves: an exact scan (of the filter's points)
        exact = sql.SQL(statement).format(
            self._vectors, where, sql.SQL("(p.vector <=> %(q)s::vector) + 0")
        )
        results: list[list[OutputData]] = []
        with self.database.transaction() as conn:
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), "
                "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                (str(min(_HNSW_EF_SEARCH_MAX, max(self.hnsw_ef_search, top_k, 1))),),
            )
            for vector in vectors_list:
                bound = params | {"q": vector_literal(vector), "k": top_k}
                rows = conn.execute(nearest, bound).fetchall()
                if len(rows) < top_k:
                    rows = conn.execute(exact, bound).fetchall()
                results.append([OutputData(str(r[0]), _similarity(r[2]), r[1]) for r in rows])
        return results

    def keyword_search(
        self, query: str, top_k: int = 5, filters: Filters | None = None
    ) -> list[OutputData] | None:
        """The engine's BM25 over the postings, or None (mem0's "unsupported") when disabled.

        Documents are indexed from the payload's ``text_lemmatized`` (the service puts the
        speaker and date there) or else its ``data``.
        """
        if not self._keyword_search:
            return None
        rows = self._bm25_rows(query, filters, top_k, None)
        return [OutputData(i, score, payload) for i, score, payload in rows]

    def keyword_scores(
        self, query: str, ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        """The BM25 score of `query` against just these points (dense hits')."""
        if not self._keyword_search or not ids:
            return {}
        wanted = sorted({point_uuid(i) for i in ids})
        return {i: score for i, score, _ in self._bm25_rows(query, filters, len(wanted), wanted)}

    def _bm25_rows(
        self, query: str, filters: Filters | None, limit: int, ids: list[Any] | None
    ) -> list[tuple[str, float, Payload]]:
        """(id, BM25 score, payload), best first: the engine's scoring over the postings,
        IDF over the whole table, restricted to `ids` when given."""
        where, params = self._where(filters)
        self._check()
        terms = self._bm25.embed_query(query)
        if not terms.indices:
            return []
        only = sql.SQL("p.id = ANY(%(ids)s::uuid[]) AND ") if ids is not None else sql.SQL("")
        statement = sql.SQL(
            "WITH q AS (SELECT * FROM unnest(%(terms)s::bigint[], %(values)s::float8[]) "
            "AS q(term, value)), "
            "n AS (SELECT count(*)::float8 AS n FROM {terms} WHERE term = %(has_terms)s), "
            "idf AS (SELECT q.term, q.value * ln((n.n - c.n + 0.5) / (c.n + 0.5) + 1) AS w "
            "FROM q CROSS JOIN n CROSS JOIN LATERAL "
            "(SELECT count(*)::float8 AS n FROM {terms} t WHERE t.term = q.term) AS c), "
            "scored AS (SELECT t.point_id, sum(idf.w * t.weight) AS score "
            "FROM idf JOIN {terms} t ON t.term = idf.term GROUP BY t.point_id) "
            "SELECT p.id, s.score, p.payload FROM scored s JOIN {vectors} AS p "
            "ON p.id = s.point_id WHERE {only}{where} ORDER BY s.score DESC, p.id LIMIT %(k)s"
        ).format(terms=self._terms, vectors=self._vectors, only=only, where=where)
        params |= {
            "terms": list(terms.indices),
            "values": [float(v) for v in terms.values],
            "has_terms": HAS_TERMS,
            "k": limit,
            "ids": ids,
        }
        return [(str(r[0]), float(r[1]), r[2]) for r in self._rows(statement, params)]

    def cosine(
        self, vectors: list[float], ids: Sequence[str], filters: Filters | None = None
    ) -> dict[str, float]:
        """The dense score of `vectors` against just these points (keyword hits' similarity)."""
        if not ids:
            return {}
        where, params = self._where(filters)
        wanted = sorted({point_uuid(i) for i in ids})
        self._check_dims(vectors)
        rows = self._rows(
            sql.SQL(
                "SELECT p.id, p.vector <=> %(q)s::vector FROM {} AS p "
                "WHERE p.id = ANY(%(ids)s::uuid[]) AND {}"
            ).format(self._vectors, where),
            params | {"q": vector_literal(vectors), "ids": wanted},
        )
        return {str(r[0]): _similarity(r[1]) for r in rows}

    def get(self, vector_id: PointId) -> OutputData | None:
        """The point with this id, or None when there is none."""
        try:
            point_id = point_uuid(vector_id)
        except ValueError:  # Not parseable as a point id, so no point can have it.
            return None
        rows = self._rows(
            sql.SQL("SELECT payload FROM {} WHERE id = %s::uuid").format(self._vectors),
            (point_id,),
        )
        return OutputData(point_id, None, rows[0][0]) if rows else None

    def points(self, batch: int = 1000) -> Iterator[tuple[str, list[float], Payload]]:
        """Every point as (id, dense vector, payload), a page at a time (backups)."""
        for point_id, vector, payload in self._pages("id, vector::real[], payload", batch):
            yield str(point_id), list(vector), payload

    def ids(self, batch: int = 1000) -> Iterator[str]:
        """Every point's id, a page at a time (the primary key's index alone)."""
        for (point_id,) in self._pages("id", batch):
            yield str(point_id)

    def _pages(self, columns: LiteralString, batch: int) -> Iterator[tuple[Any, ...]]:
        """Rows of `columns` in id order, a page at a time."""
        select = sql.SQL("SELECT {} FROM {} ").format(sql.SQL(columns), self._vectors)
        first = select + sql.SQL("ORDER BY id LIMIT %(n)s")
        later = select + sql.SQL("WHERE id > %(after)s::uuid ORDER BY id LIMIT %(n)s")
        after: str | None = None
        while True:
            rows = self._rows(first if after is None else later, {"after": after, "n": batch})
            yield from rows
            if len(rows) < batch:
                return
            after = str(rows[-1][0])

    def count(self, filters: Filters | None = None) -> int:
        """Exact number of points matching the filters."""
        where, params = self._where(filters)
        ((found,),) = self._rows(
            sql.SQL("SELECT count(*) FROM {} AS p WHERE {}").format(self._vectors, where), params
        )
        return int(found)

    def facet_counts(self, key: str, limit: int) -> dict[FacetValue, int]:
        """Points per distinct string value of a keyword-indexed field, most frequent first.

        As the engine's facet: only the fields it indexes (KEYWORD_INDEX_FIELDS), only string
        values (an array's strings each count, a point once per value), ties by value.
        """
        if key not in KEYWORD_INDEX_FIELDS:
            raise ValueError(
                f"No appropriate index for faceting: `{key}`. Please create one to facet on "
                "this field. Check https://qdrant.tech/documentation/concepts/indexing/"
                "#payload-index to see which payload schemas support Match conditions"
            )
        rows = self._rows(
            sql.SQL(
                "SELECT e.v #>> '{{}}' AS value, count(DISTINCT p.id) AS n FROM {} AS p "
                "CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN "
                "jsonb_typeof(p.payload -> %(key)s) = 'array' THEN p.payload -> %(key)s "
                "ELSE jsonb_build_array(p.payload -> %(key)s) END) AS e(v) "
                "WHERE jsonb_typeof(e.v) = 'string' "
                "GROUP BY 1 ORDER BY count(DISTINCT p.id) DESC, "
                "(e.v #>> '{{}}') COLLATE \"C\" LIMIT %(limit)s"
            ).format(self._vectors),
            {"key": key, "limit": limit},
        )
        return {value: int(n) for value, n in rows}

    # --- internals -------------------------------------------------------------------------

    def _rows(self, statement: Any, params: Any = None) -> list[tuple[Any, ...]]:
        """One read on a pooled connection, once the store is usable (`_check`)."""
        self._check()
        with self.database.connection() as conn:
            return conn.execute(statement, params).fetchall()

    def _check(self) -> None:
        """Refuse use when closed; ensure the schema once (retried until it succeeds)."""
        if self._closed:
            raise RuntimeError(f"PgVectorStore for {self.vectors_table} is closed")
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                self.tables.create(self.database)
                self._ready = True

    def _where(self, filters: Filters | None) -> tuple[sql.Composable, dict[str, Any]]:
        built = FilterSql("p")
        return built.where(filters), built.params

    def _check_dims(self, vector: list[float]) -> None:
        check_dims(vector, self.embedding_model_dims)

    def _row(self, point_id: str, vector: list[float] | None, payload: Payload) -> Row:
        return row_of(point_id, vector, payload, self.embedding_model_dims, self._bm25)

    # Defined last: inside the class body the name ``list`` is this method from here on, so
    # earlier annotations such as ``list[float]`` still mean the builtin.
    def list(
        self, filters: Filters | None = None, top_k: int = 100
    ) -> tuple[list[OutputData], str | None]:
        """``(points, next_offset)`` like qdrant-client's scroll, which mem0 indexes with [0]:
        points in id order, next_offset the id of the first point of the next page."""
        where, params = self._where(filters)
        rows = self._rows(
            sql.SQL(
                "SELECT p.id, p.payload FROM {} AS p WHERE {} ORDER BY p.id LIMIT %(k)s"
            ).format(self._vectors, where),
            params | {"k": top_k + 1},
        )
        page = [OutputData(str(r[0]), None, r[1]) for r in rows[:top_k]]
        return page, str(rows[top_k][0]) if len(rows) > top_k else None


def _similarity(distance: float) -> float:
    """Cosine similarity from pgvector's distance; 0 for a zero vector (the engine's score),
    whose distance is NaN."""
    return 0.0 if math.isnan(distance) else 1.0 - float(distance)


if TYPE_CHECKING:  # mypy holds the store to the contract
    _IS_A_VECTOR_STORE: type[VectorStore] = PgVectorStore
