"""mem0 vector store on PostgreSQL + pgvector: the embedded store's behaviour, shared by replicas.

Why it exists: the embedded engine (``edge_store.EdgeVectorStore``) keeps a collection in one
on-disk shard that one process owns. With ``vectorStore.postgres`` every replica of the service
reads and writes the same collection in PostgreSQL, and a write is one transaction. The
embedded store is the reference: same methods, return shapes, filter language, error messages
and BM25 scores, so the service cannot tell them apart.

Layout, per collection (names from ``table_names``; every identifier is quoted):

- ``memorystore_vectors_<collection>``: ``id uuid``, ``vector vector(dims)`` (unit length, as
  the engine stores cosine vectors), ``payload jsonb``, and two shadows of the payload the
  engine's filters need but SQL cannot compute: ``words`` (every string replaced by the ids of
  its words, tokenised by the engine: what ``contains`` matches) and ``times`` (every string
  the engine reads as a datetime replaced by its UTC microseconds: what datetime ranges
  compare). HNSW (``vector_cosine_ops``) and GIN (``jsonb_path_ops``) indexes.
- ``memorystore_terms_<collection>``: the BM25 postings ``(term, point_id, weight)`` from
  ``lexical.encoder(tokenizer).embed_document`` of ``text_lemmatized`` or else ``data``,
  deleted with their point. Term ``-1`` marks a point that has any term, so that N counts
  the points the engine counts.

Keyword search is the engine's BM25 in SQL: score = Σ over the query's terms t of
idf(t) × weight(doc, t) × query value(t), idf(t) = ln((N − n_t + 0.5)/(n_t + 0.5) + 1), N the
points with at least one term (the engine counts neither empty nor stopword-only texts), n_t
those holding t.

Measured against the engine (tests/integration/test_pg_store.py; qdrant-edge 0.9.0, pgvector
0.8.1, PostgreSQL 18):

- BM25: the 336 English and Chinese memories of the multilingual bench, its 274 queries over
  the whole collection and over the asker's scope, top 10 and every match (1096 searches):
  the same ids in the same order on all of them once equal scores are taken as ties, scores
  within 1.1e-7 relative. Strictly identical lists: about 55 %, because the engine orders
  equal scores arbitrarily (not even the same way for two limits); here ties go by id.
- Dense: 3000 random 64-dimensional vectors, 100 queries, top 10: 100 % the engine's hits
  within a scope (a third of the points); over the whole collection 98.7-99.5 % with
  ``hnsw_ef_search`` 100 (HNSW is approximate, the engine exact at this size), 100 % with 200.
  Scores within 1.3e-7. A scope holding 5 of 3000 points, all far from the query, returns
  its 5 nearest (an HNSW scan without iterative scan returns none of them).
- Filters: a Hypothesis property test (random payloads and mem0 filters: the same ids listed,
  searched and counted, or the same ValueError) passes 200 examples in CI; campaigns of
  6000 random examples (about 33,000 filters) found no difference.
- Cost, 50,000 memories of 384 dimensions (800,000 postings) on a 2-core test machine:
  keyword search 28 ms median in a user's scope (98 ms over the whole collection: N and n_t
  are counted per query, never cached, so they are exact across replicas), dense search
  7 ms in a scope, a write about 9 ms a memory (HNSW, GIN and postings in one transaction).

Filters are translated from what the embedded store builds (``edge_store._create_filter``), so
validation, errors and the identity rules are the engine's by construction; each condition is
then the engine's check in SQL, every value and key a bound parameter. Where the engine is
odd, this store is too (see ``FilterSql``).

Differences, on purpose: point ids must be UUIDs (the engine also takes integers; mem0 only
ever uses UUIDs); the NUL character cannot be stored (jsonb refuses it: ValueError); the
engine's keyword statistics drift after deletes until its shard is reloaded (it keeps counting
deleted points), this store's never do; equal scores are ordered by id; ``reindex`` never
re-creates a point deleted meanwhile, even when given a vector. Needs pgvector 0.8 (HNSW
iterative scans).

Nothing touches the database before the first operation (or ``create_col``), so the service
starts while the database is down and says so on /readyz. The Database is shared
(``postgres.shared``) and owned by the engine: ``close`` never closes it.
"""

import functools
import hashlib
import json
import math
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
import qdrant_edge as qe
from mem0.vector_stores.base import VectorStoreBase
from psycopg import sql

from memorystore.service.retrieval import lexical
from memorystore.service.state import postgres
from memorystore.service.stores.embedded import KEYWORD_INDEX_FIELDS, OutputData, _create_filter
from memorystore.spec import LexicalTokenizer

VECTORS_PREFIX = "memorystore_vectors_"
TERMS_PREFIX = "memorystore_terms_"
# The posting that marks a point holding at least one term (BM25's N); real term ids are
# the encoder's unsigned hashes.
HAS_TERMS = -1
_MAX_IDENTIFIER = 63  # PostgreSQL's NAMEDATALEN - 1: longer names are silently truncated
_INT4_MAX = 2**31 - 1
_HNSW_EF_SEARCH_MAX = 1000  # pgvector's upper bound for hnsw.ef_search

Path = list[str | int | None]  # a JSON path: key, array index, or None for "every element"


class PgVectorStore(VectorStoreBase):
    """mem0 vector store on PostgreSQL + pgvector (cosine dense + the engine's BM25 in SQL)."""

    def __init__(
        self,
        collection_name: str,
        embedding_model_dims: int,
        dsn: str,
        field: str = "vectorStore.postgres",
        pool_size: int = 10,
        statement_timeout_seconds: float = 10.0,
        connect_timeout_seconds: float = 5.0,
        keyword_search: bool = False,
        tokenizer: str = LexicalTokenizer.MULTILINGUAL,
        hnsw_ef_search: int = 100,
        **_ignored: object,
    ) -> None:
        """Bind to the collection; the database is not touched until the first operation.

        mem0's factory passes its whole vector-store config, hence ``**_ignored``. BM25
        postings are always stored so that ``keyword_search`` can be switched on later.
        """
        self.collection_name = collection_name
        self.embedding_model_dims = embedding_model_dims
        self.database = postgres.shared(
            dsn,
            field=field,
            pool_size=pool_size,
            statement_timeout_seconds=statement_timeout_seconds,
            connect_timeout_seconds=connect_timeout_seconds,
        )
        self.vectors_table, self.terms_table, self._index_stem = table_names(collection_name)
        self._vectors = sql.Identifier(self.vectors_table)
        self._terms = sql.Identifier(self.terms_table)
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
            self._create_schema()
            self._ready = True

    def close(self) -> None:
        """Refuse further use; the shared Database stays open (the engine owns it)."""
        with self._lock:
            self._closed = True

    def delete_col(self) -> None:
        """Drop the collection's tables; the store stays closed."""
        with self._lock:
            with self.database.transaction() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (postgres.MIGRATION_LOCK,))
                conn.execute(
                    sql.SQL("DROP TABLE IF EXISTS {}, {}").format(self._terms, self._vectors)
                )
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
        payloads: list[dict[str, Any]] | None = None,
        ids: list[str | int] | None = None,
    ) -> None:
        """Upsert points in one transaction, each with its vector, payload and BM25 postings."""
        rows: dict[str, _Row] = {}  # the last of repeated ids wins, as in a sequence of upserts
        for idx, vector in enumerate(vectors):
            point_id = point_uuid(idx if ids is None else ids[idx])
            rows[point_id] = self._row(point_id, vector, payloads[idx] if payloads else {})
        if not rows:
            return
        self._check()
        with self.database.transaction() as conn:
            self._upsert(conn, [rows[key] for key in sorted(rows)])  # sorted: no deadlocks

    def update(
        self,
        vector_id: str | int,
        vector: list[float] | None = None,
        payload: dict[str, Any] | None = None,
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
                "words": payload_json(self._words(kept)),
                "times": payload_json(_times(kept)),
            }
            for column, patch in (("payload", "patch"), ("words", "words"), ("times", "times")):
                assignments.append(
                    sql.SQL("{c} = ({c} - %(dropped)s::text[]) || {p}::jsonb").format(
                        c=sql.Identifier(column), p=sql.Placeholder(patch)
                    )
                )
        if vector is not None:
            params["vector"] = self._vector_text(vector)
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
        self, vector_id: str | int, payload: dict[str, Any], vector: list[float] | None = None
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
                self._replace_postings(conn, [row])

    def delete(self, vector_id: str | int) -> None:
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
        filters: dict[str, Any] | None = None,
    ) -> list[OutputData]:
        """Dense search; ``score`` is the cosine similarity (higher is closer)."""
        return self.search_batch([query], [vectors], top_k, filters)[0]

    def search_batch(
        self,
        queries: list[str],
        vectors_list: list[list[float]],
        top_k: int = 1,
        filters: dict[str, Any] | None = None,
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
                bound = params | {"q": _vector_literal(vector), "k": top_k}
                rows = conn.execute(nearest, bound).fetchall()
                if len(rows) < top_k:
                    rows = conn.execute(exact, bound).fetchall()
                results.append([OutputData(str(r[0]), _similarity(r[2]), r[1]) for r in rows])
        return results

    def keyword_search(
        self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[OutputData] | None:
        """The engine's BM25 over the postings, or None (mem0's "unsupported") when disabled.

        Documents are indexed from the payload's ``text_lemmatized`` (the service puts the
        speaker and date there) or else its ``data``.
        """
        if not self._keyword_search:
            return None
        where, params = self._where(filters)
        self._check()
        terms = self._bm25.embed_query(query)
        if not terms.indices:
            return []
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
            "ON p.id = s.point_id WHERE {where} ORDER BY s.score DESC, p.id LIMIT %(k)s"
        ).format(terms=self._terms, vectors=self._vectors, where=where)
        params |= {
            "terms": list(terms.indices),
            "values": [float(v) for v in terms.values],
            "has_terms": HAS_TERMS,
            "k": top_k,
        }
        rows = self._rows(statement, params)
        return [OutputData(str(r[0]), float(r[1]), r[2]) for r in rows]

    def cosine(
        self, vectors: list[float], ids: list[str], filters: dict[str, Any] | None = None
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
            params | {"q": _vector_literal(vectors), "ids": wanted},
        )
        return {str(r[0]): _similarity(r[1]) for r in rows}

    def get(self, vector_id: str | int) -> OutputData | None:
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

    def points(self, batch: int = 1000) -> Iterator[tuple[str, list[float], dict[str, Any]]]:
        """Every point as (id, dense vector, payload), a page at a time (backups)."""
        columns = sql.SQL("SELECT id, vector::real[], payload FROM {} ").format(self._vectors)
        first = columns + sql.SQL("ORDER BY id LIMIT %(n)s")
        later = columns + sql.SQL("WHERE id > %(after)s::uuid ORDER BY id LIMIT %(n)s")
        after: str | None = None
        while True:
            rows = self._rows(first if after is None else later, {"after": after, "n": batch})
            for point_id, vector, payload in rows:
                yield str(point_id), list(vector), payload
            if len(rows) < batch:
                return
            after = str(rows[-1][0])

    def count(self, filters: dict[str, Any] | None = None) -> int:
        """Exact number of points matching the filters."""
        where, params = self._where(filters)
        ((found,),) = self._rows(
            sql.SQL("SELECT count(*) FROM {} AS p WHERE {}").format(self._vectors, where), params
        )
        return int(found)

    def facet_counts(self, key: str, limit: int) -> dict[Any, int]:
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
                self._create_schema()
                self._ready = True

    def _create_schema(self) -> None:
        """Tables and indexes, in one transaction under the migration lock (replicas
        creating them at once wait for each other)."""
        vectors = self._vectors
        with self.database.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (postgres.MIGRATION_LOCK,))
            self._create_extension(conn)
            stored = conn.execute(
                "SELECT a.atttypmod FROM pg_attribute a "
                "WHERE a.attrelid = to_regclass(%s) AND a.attname = 'vector'",
                (vectors.as_string(conn),),
            ).fetchone()
            if stored is not None and stored[0] != self.embedding_model_dims:
                raise ValueError(
                    f"Table {self.vectors_table} stores {stored[0]}-dimensional vectors, but "
                    f"embedding_model_dims is {self.embedding_model_dims}"
                )
            # only what is missing: DDL on an existing table would lock out its writers
            for name, statements in self._schema_objects():
                found = conn.execute("SELECT to_regclass(%s)", (name.as_string(conn),))
                if found.fetchone() == (None,):
                    for statement in statements:
                        conn.execute(statement)

    def _schema_objects(self) -> list[tuple[sql.Identifier, list[sql.Composable]]]:
        """Each table and index of the collection, with the statements that create it."""
        vectors, terms = self._vectors, self._terms
        hnsw, gin, by_point = (
            sql.Identifier(f"{self._index_stem}_{name}")
            for name in ("hnsw", "payload", "terms_point")
        )
        create_vectors = sql.SQL(
            "CREATE TABLE {} (id uuid PRIMARY KEY, vector vector({}) NOT NULL, "
            "payload jsonb NOT NULL, words jsonb NOT NULL DEFAULT '{{}}', "
            "times jsonb NOT NULL DEFAULT '{{}}')"
        ).format(vectors, sql.Literal(self.embedding_model_dims))
        named = sql.SQL("COMMENT ON TABLE {} IS {}").format(
            vectors, sql.Literal(self.collection_name)
        )
        create_terms = sql.SQL(
            "CREATE TABLE {} (term bigint NOT NULL, point_id uuid NOT NULL "
            "REFERENCES {} (id) ON DELETE CASCADE, weight real NOT NULL, "
            "PRIMARY KEY (term, point_id))"
        ).format(terms, vectors)
        index = sql.SQL("CREATE INDEX {} ON {} {}")
        return [
            (vectors, [create_vectors, named]),
            (hnsw, [index.format(hnsw, vectors, sql.SQL("USING hnsw (vector vector_cosine_ops)"))]),
            (gin, [index.format(gin, vectors, sql.SQL("USING gin (payload jsonb_path_ops)"))]),
            (terms, [create_terms]),
            (by_point, [index.format(by_point, terms, sql.SQL("(point_id)"))]),
        ]

    def _create_extension(self, conn: psycopg.Connection[Any]) -> None:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            return
        try:
            with conn.transaction():  # a savepoint: the error message is ours
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            raise postgres.DatabaseUnavailable(
                f"{self.database.field}: the vector collection {self.collection_name!r} needs "
                "the pgvector extension, which this role may not create: the database owner "
                "must run `CREATE EXTENSION vector` in this database"
            ) from None
        except (psycopg.errors.UndefinedFile, psycopg.errors.FeatureNotSupported) as exc:
            raise postgres.DatabaseUnavailable(
                f"{self.database.field}: the vector collection {self.collection_name!r} needs "
                f"pgvector, which this PostgreSQL server lacks: {self.database.describe(exc)}"
            ) from None

    def _where(self, filters: dict[str, Any] | None) -> tuple[sql.Composable, dict[str, Any]]:
        built = FilterSql("p")
        return built.where(filters), built.params

    def _check_dims(self, vector: list[float]) -> None:
        if len(vector) != self.embedding_model_dims:
            raise ValueError(
                f"Vector dimension error: expected dim: {self.embedding_model_dims}, "
                f"got {len(vector)}"
            )

    def _vector_text(self, vector: list[float]) -> str:
        """The vector as pgvector text, scaled to unit length (the engine stores cosine
        vectors normalised; a zero vector stays zero)."""
        self._check_dims(vector)
        norm = math.sqrt(math.fsum(float(x) * float(x) for x in vector))
        return _vector_literal([float(x) / norm for x in vector] if norm > 0 else vector)

    def _words(self, payload: dict[str, Any]) -> dict[str, Any]:
        return _shadow(payload, _word_ids) or {}

    def _row(self, point_id: str, vector: list[float] | None, payload: dict[str, Any]) -> "_Row":
        text = lexical.keyword_text(payload)
        postings: list[tuple[int, float]] = []
        if text:
            encoded = self._bm25.embed_document(text)
            postings = list(zip(encoded.indices, encoded.values, strict=True))
        return _Row(
            point_id,
            None if vector is None else self._vector_text(vector),
            payload_json(payload),
            payload_json(self._words(payload)),
            payload_json(_times(payload)),
            postings,
        )

    def _upsert(self, conn: psycopg.Connection[Any], rows: list["_Row"]) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (id, vector, payload, words, times) SELECT * FROM unnest("
                "%(ids)s::uuid[], %(vectors)s::vector[], %(payloads)s::jsonb[], "
                "%(words)s::jsonb[], %(times)s::jsonb[]) "
                "ON CONFLICT (id) DO UPDATE SET vector = EXCLUDED.vector, "
                "payload = EXCLUDED.payload, words = EXCLUDED.words, times = EXCLUDED.times"
            ).format(self._vectors),
            {
                "ids": [r.id for r in rows],
                "vectors": [r.vector for r in rows],
                "payloads": [r.payload for r in rows],
                "words": [r.words for r in rows],
                "times": [r.times for r in rows],
            },
        )
        self._replace_postings(conn, rows)

    def _replace_postings(self, conn: psycopg.Connection[Any], rows: list["_Row"]) -> None:
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE point_id = ANY(%s::uuid[])").format(self._terms),
            ([r.id for r in rows],),
        )
        terms: list[int] = []
        points: list[str] = []
        weights: list[float] = []
        for row in rows:
            if not row.postings:
                continue
            for term, weight in [(HAS_TERMS, 0.0), *row.postings]:
                terms.append(term)
                points.append(row.id)
                weights.append(weight)
        if terms:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (term, point_id, weight) "
                    "SELECT * FROM unnest(%s::bigint[], %s::uuid[], %s::real[])"
                ).format(self._terms),
                (terms, points, weights),
            )

    # Defined last: inside the class body the name ``list`` is this method from here on, so
    # earlier annotations such as ``list[float]`` still mean the builtin.
    def list(
        self, filters: dict[str, Any] | None = None, top_k: int = 100
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


@dataclass(slots=True)
class _Row:
    """One point ready to write: the parameters of its row, and its BM25 postings."""

    id: str
    vector: str | None
    payload: str
    words: str
    times: str
    postings: list[tuple[int, float]]


def table_names(collection: str) -> tuple[str, str, str]:
    """(vectors table, terms table, index-name stem) of a collection.

    PostgreSQL truncates identifiers beyond 63 bytes, which would merge two long collection
    names: a name that does not fit is shortened and suffixed with a digest of the whole.
    """
    digest = hashlib.blake2b(collection.encode(), digest_size=6).hexdigest()

    def fitted(prefix: str) -> str:
        name = prefix + collection
        if len(name.encode()) <= _MAX_IDENTIFIER:
            return name
        room = _MAX_IDENTIFIER - len(prefix.encode()) - len(digest) - 1
        head = collection.encode()[:room].decode(errors="ignore")
        return f"{prefix}{head}_{digest}"

    return fitted(VECTORS_PREFIX), fitted(TERMS_PREFIX), f"memorystore_{digest}"


def point_uuid(value: str | int) -> str:
    """A point id as PostgreSQL's canonical UUID text; ValueError like the engine's when it
    is not a UUID."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ValueError(f"failed to parse {value} as UUID") from None


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _similarity(distance: float) -> float:
    """Cosine similarity from pgvector's distance; 0 for a zero vector (the engine's score),
    whose distance is NaN."""
    return 0.0 if math.isnan(distance) else 1.0 - float(distance)


# --- payload encoding and shadows --------------------------------------------------------------


def payload_json(value: Any) -> str:
    """JSON for jsonb that keeps what the engine distinguishes: a float always has a decimal
    point (jsonb would store 1e16 as 10000000000000000, an integer to the filters), integers
    beyond u64 become floats (the engine keeps a double), NaN and infinities are refused
    with the engine's message."""
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"'{type(key).__name__}' object is not an instance of 'str'")
            items.append(f"{_json_string(key)}:{payload_json(item)}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(payload_json(item) for item in value) + "]"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if -(2**63) <= value < 2**64 else _json_float(float(value))
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    raise TypeError(f"'{type(value).__name__}' object cannot be stored in a payload")


def _json_float(value: float) -> str:
    if not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        raise ValueError(f"failed to convert {shown} into payload number type")
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    return text if "." in text else text + ".0"


def _json_string(text: str) -> str:
    if "\x00" in text:
        raise ValueError("PostgreSQL cannot store the NUL character (\\u0000) in a payload")
    return json.dumps(text)


def _shadow(value: Any, leaf: Callable[[str], Any]) -> Any:
    """`value` with every string replaced by leaf(string) and everything else by None,
    pruned where nothing is left (arrays keep their positions for index paths)."""
    if isinstance(value, str):
        return leaf(value)
    if isinstance(value, dict):
        kept = {k: s for k, v in value.items() if (s := _shadow(v, leaf)) is not None}
        return kept or None
    if isinstance(value, list | tuple):
        items = [_shadow(v, leaf) for v in value]
        return items if any(item is not None for item in items) else None
    return None


@functools.cache
def _word_encoder() -> qe.Bm25:
    """The engine's word tokenizer as its text match uses it without a full-text index:
    split at every non-alphanumeric character, lowercased, no stemming, no stopwords
    (checked against the engine's MatchText on fuzzed Unicode:
    tests/unit/service/stores/test_pgvector_translation.py)."""
    return qe.Bm25(
        qe.Bm25Config(
            tokenizer=qe.TokenizerType.Word,
            lowercase=True,
            stopwords=qe.StopwordsSet(languages=set(), custom=set()),
            stemmer=qe.DisabledStemmer(),
        )
    )


def word_ids(text: str) -> list[str]:
    """The ids of a text's words (the engine's hashes), as sorted decimal strings."""
    return sorted({str(i) for i in _word_encoder().embed_query(text).indices})


def _word_ids(text: str) -> str | None:
    return " ".join(word_ids(text)) or None


def _times(payload: dict[str, Any]) -> dict[str, Any]:
    return _shadow(payload, datetime_micros) or {}


_SHOWN_DATETIME_RE = re.compile(
    r"^([+-]?\d+)-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d+))? UTC$"
)


def datetime_micros(text: str) -> int | None:
    """UTC microseconds of a string the engine reads as a datetime, else None.

    Parsed by the engine itself (its range bound, the same parser as for payload values),
    which accepts more than ISO 8601 (' 2024-1-5', '2024-01-15 10:00', '+002024-01-15') and
    keeps microseconds.
    """
    try:
        shown = qe.RangeDateTime(gte=text).gte
    except ValueError:
        return None
    return shown_micros(shown) if shown is not None else None


def shown_micros(shown: str) -> int:
    """Microseconds since 1970 of the engine's datetime text ('2024-01-15 08:00:00.5 UTC')."""
    found = _SHOWN_DATETIME_RE.match(shown)
    if found is None:
        raise RuntimeError(f"unexpected datetime from qdrant-edge: {shown!r}")
    year, month, day, hour, minute, second = (int(found.group(i)) for i in range(1, 7))
    micros = int((found.group(7) or "0")[:6].ljust(6, "0"))
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return seconds * 1_000_000 + micros


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar, any year (H. Hinnant)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


# --- mem0 filter dict -> SQL (over what edge_store builds for the engine) -----------------------


def parse_path(key: str) -> Path:
    """A JSON path as the engine normalises it: 'a.b', 'a[]', 'a[0].b', '"a.b"' (quoted
    key). The engine has already refused malformed paths."""
    steps: Path = []
    i = 0
    while i < len(key):
        char = key[i]
        if char == ".":
            i += 1
        elif char == '"':
            end = key.index('"', i + 1)
            steps.append(key[i + 1 : end])
            i = end + 1
        elif char == "[":
            end = key.index("]", i)
            inner = key[i + 1 : end]
            steps.append(int(inner) if inner else None)
            i = end + 1
        else:
            end = i
            while end < len(key) and key[end] not in '.["':
                end += 1
            steps.append(key[i:end])
            i = end
    return steps


Test = Callable[[sql.Composable], sql.Composable]


class FilterSql:
    """A WHERE clause over table alias `alias` equal to the engine's filter, with named
    parameters (`params`); values and keys are always bound, never spliced.

    The translation starts from edge_store._create_filter's engine filter, so what is
    refused, how AND/OR/NOT and their $-aliases combine, the '*' wildcard, identity keys and
    the confinement are the embedded store's. Each condition is the engine's check
    (qdrant-edge 0.9.0, Qdrant's condition checker), including its odd corners:

    - a path's value that is an array matches when any element matches; arrays inside it are
      not flattened further; 'a.b' does not step into an array (only 'a[].b' does);
    - integers match integers only: 1.0 is not 1, and strings never match numbers;
    - ne/nin (MatchExcept) match a point having at least one value outside the list (so
      ["a", "b"] is "≠ a"); a missing field, null or [] never matches. On a field the engine
      keyword-indexes (KEYWORD_INDEX_FIELDS) string exclusion reads the index, which holds
      only strings: there, only string values count (5 is not "≠ a" on `hash`, it is on any
      other field);
    - an empty `nin` list is a string list: on a keyword-indexed field it matches the points
      with a string value;
    - contains/icontains match whole words of a string value, lowercased, in any order, with
      the engine's tokenizer (every non-alphanumeric character separates; no stemming);
      a text without words matches nothing;
    - numeric ranges compare doubles (2**53 + 1 is not above 2**53); a range with only None
      bounds matches every number; datetime ranges compare strings the engine parses as
      datetimes (microseconds, UTC; naive means UTC);
    - the confinement's "no user" is a missing user_id, null or [] (not "" and not [null]).
    """

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.params: dict[str, Any] = {}

    def where(self, filters: dict[str, Any] | None) -> sql.Composable:
        """The clause for a mem0 filter dict (TRUE when nothing constrains)."""
        built = _create_filter(filters)
        return sql.SQL("TRUE") if built is None else self.filter(built)

    def filter(self, built: qe.Filter) -> sql.Composable:
        parts = [self.condition(c) for c in built.must or []]
        if built.should is not None:
            options = [self.condition(c) for c in built.should]
            parts.append(sql.SQL("({})").format(sql.SQL(" OR ").join(options or [_FALSE])))
        parts += [sql.SQL("NOT {}").format(self.condition(c)) for c in built.must_not or []]
        return sql.SQL("({})").format(sql.SQL(" AND ").join(parts)) if parts else sql.SQL("TRUE")

    def condition(self, condition: Any) -> sql.Composable:
        if isinstance(condition, qe.Filter):
            return self.filter(condition)
        if isinstance(condition, qe.FieldCondition):
            return self.field(condition)
        if isinstance(condition, qe.IsEmptyCondition):
            return self.is_empty(parse_path(condition.key))
        if isinstance(condition, qe.HasIdCondition):
            ids = sorted(point_uuid(str(i)) for i in condition.point_ids)
            return sql.SQL("({}.id = ANY({}))").format(
                sql.Identifier(self.alias), self.param(ids, "uuid[]")
            )
        raise TypeError(f"unsupported filter condition: {condition!r}")

    def field(self, condition: qe.FieldCondition) -> sql.Composable:
        path = parse_path(condition.key)
        match, bounds = condition.match, condition.range
        if isinstance(match, qe.MatchValue):
            return self.match_value(path, match.value)
        if isinstance(match, qe.MatchAny):
            return self.match_any(path, list(match.value))
        if isinstance(match, qe.MatchExcept):
            return self.match_except(path, list(match.value), condition.key)
        if isinstance(match, qe.MatchText):
            words = word_ids(match.text)
            if not words:
                return _FALSE
            held = self.param(words, "text[]")
            return self.any_value(
                "words",
                path,
                lambda e: sql.SQL(
                    "(jsonb_typeof({e}) = 'string' AND string_to_array({e} #>> '{{}}', ' ') @> {w})"
                ).format(e=e, w=held),
            )
        if isinstance(bounds, qe.RangeFloat):
            return self.any_value("payload", path, self._range(bounds, "float8", float))
        if isinstance(bounds, qe.RangeDateTime):
            return self.any_value("times", path, self._range(bounds, "bigint", shown_micros))
        raise TypeError(f"unsupported field condition on {condition.key!r}")

    def match_value(self, path: Path, value: Any) -> sql.Composable:
        if isinstance(value, bool):  # edge_store refuses these before the engine sees them
            raise ValueError(f"Boolean filter values are not supported: {value!r}")
        if isinstance(value, str) and "\x00" in value:  # cannot be stored: matches nothing
            return _FALSE
        if len(path) != 1 or not isinstance(path[0], str):
            return self.any_value("payload", path, self._value_test(value))
        # a top-level key: in a form the GIN index answers (scopes above all), exact for
        # strings; 5.0 contains 5 in jsonb, so an integer is also checked as one
        key = path[0]
        indexed = sql.SQL("({p} @> {a} OR {p} @> {b})").format(
            p=self._column("payload"),
            a=self.param(json.dumps({key: value}), "jsonb"),
            b=self.param(json.dumps({key: [value]}), "jsonb"),
        )
        if isinstance(value, str):
            return indexed
        exact = self.any_value("payload", path, self._value_test(value))
        return sql.SQL("({} AND {})").format(indexed, exact)

    def match_any(self, path: Path, values: list[Any]) -> sql.Composable:
        if any(isinstance(v, bool) for v in values):
            raise ValueError(f"Boolean filter values are not supported: {values!r}")
        strings = [v for v in values if isinstance(v, str) and "\x00" not in v]
        if not strings and not any(isinstance(v, int) for v in values):
            return _FALSE
        if all(isinstance(v, str) for v in values):
            held = self.param(strings, "text[]")
            return self.any_value(
                "payload",
                path,
                lambda e: sql.SQL(
                    "(jsonb_typeof({e}) = 'string' AND ({e} #>> '{{}}') = ANY({s}))"
                ).format(e=e, s=held),
            )
        return self.any_value("payload", path, self._integer_in([int(v) for v in values]))

    def match_except(self, path: Path, values: list[Any], key: str) -> sql.Composable:
        if any(isinstance(v, bool) for v in values):
            raise ValueError(f"Boolean filter values are not supported: {values!r}")
        if all(isinstance(v, str) for v in values):  # also the empty list, as the engine
            held = self.param([v for v in values if "\x00" not in v], "text[]")
            if key in KEYWORD_INDEX_FIELDS:  # read from the keyword index: strings only
                test = "(jsonb_typeof({e}) = 'string' AND NOT ({e} #>> '{{}}') = ANY({s}))"
            else:
                test = (
                    "(CASE jsonb_typeof({e}) WHEN 'null' THEN FALSE WHEN 'string' "
                    "THEN NOT ({e} #>> '{{}}') = ANY({s}) ELSE TRUE END)"
                )
            return self.any_value("payload", path, lambda e: sql.SQL(test).format(e=e, s=held))
        held = self.param([str(int(v)) for v in values], "text[]")
        return self.any_value(
            "payload",
            path,
            lambda e: sql.SQL(
                "(CASE jsonb_typeof({e}) WHEN 'null' THEN FALSE WHEN 'number' THEN NOT "
                "(strpos({e}::text, '.') = 0 AND {e}::text = ANY({s})) ELSE TRUE END)"
            ).format(e=e, s=held),
        )

    def is_empty(self, path: Path) -> sql.Composable:
        """The engine's IsEmpty: no value at the path but null or []."""
        sources, value = self._walk("payload", path)
        empty = sql.SQL("(COALESCE({v}, 'null'::jsonb) IN ('null'::jsonb, '[]'::jsonb))").format(
            v=value
        )
        if not sources:
            return empty
        return sql.SQL("(NOT EXISTS (SELECT 1 FROM {} WHERE NOT {}))").format(
            sql.SQL(", ").join(sources), empty
        )

    def any_value(self, column: str, path: Path, test: Test) -> sql.Composable:
        """Whether any value at `path` of `column` passes `test`: an array's elements are
        each a value (one level, as the engine flattens), a missing path has none."""
        sources, value = self._walk(column, path)
        element = sql.SQL("_e.v")
        if not sources:
            return sql.SQL(
                "(CASE WHEN {v} IS NULL THEN FALSE WHEN jsonb_typeof({v}) = 'array' THEN "
                "EXISTS (SELECT 1 FROM jsonb_array_elements({v}) AS _e(v) WHERE {t}) "
                "ELSE COALESCE({s}, FALSE) END)"
            ).format(v=value, t=test(element), s=test(value))
        flattened = sql.SQL(
            "jsonb_array_elements(CASE WHEN jsonb_typeof({v}) = 'array' THEN {v} "
            "ELSE jsonb_build_array({v}) END) AS _e(v)"
        ).format(v=value)
        return sql.SQL("(EXISTS (SELECT 1 FROM {} WHERE COALESCE({}, FALSE)))").format(
            sql.SQL(", ").join([*sources, flattened]), test(element)
        )

    def param(self, value: Any, cast: str) -> sql.Composable:
        """A bound parameter cast to `cast` (a type name written in this module)."""
        name = f"f{len(self.params)}"
        self.params[name] = value
        return sql.SQL("{}::" + cast).format(sql.Placeholder(name))

    def _column(self, column: str) -> sql.Composable:
        return sql.Identifier(self.alias, column)

    def _walk(self, column: str, path: Path) -> tuple[list[sql.Composable], sql.Composable]:
        """FROM items for the path's `[]` steps and the expression of the value reached.
        A key steps into an object only, an index into an array only (jsonb's -> does
        exactly that), `[]` into each element of an array."""
        sources: list[sql.Composable] = []
        value: sql.Composable = self._column(column)
        for step in path:
            if step is None:
                alias = sql.Identifier(f"_w{len(sources)}")
                sources.append(
                    sql.SQL(
                        "jsonb_array_elements(CASE WHEN jsonb_typeof({v}) = 'array' THEN {v} "
                        "ELSE '[]'::jsonb END) AS {a}(v)"
                    ).format(v=value, a=alias)
                )
                value = sql.SQL("{}.v").format(alias)
            elif isinstance(step, int):
                if step > _INT4_MAX:  # no array is that long
                    value = sql.SQL("NULL::jsonb")
                else:
                    value = sql.SQL("({} -> {})").format(value, self.param(step, "int"))
            else:
                value = sql.SQL("({} -> {})").format(value, self.param(step, "text"))
        return sources, value

    def _value_test(self, value: str | int) -> Test:
        return self._string_equals(value) if isinstance(value, str) else self._integer_in([value])

    def _string_equals(self, value: str) -> Test:
        held = self.param(json.dumps(value), "jsonb")
        return lambda e: sql.SQL("({} = {})").format(e, held)

    def _integer_in(self, values: list[int]) -> Test:
        """An integer (no decimal point: payload_json writes every float with one) among
        `values`."""
        held = self.param([str(v) for v in values], "text[]")
        return lambda e: sql.SQL(
            "(jsonb_typeof({e}) = 'number' AND strpos({e}::text, '.') = 0 AND {e}::text = ANY({s}))"
        ).format(e=e, s=held)

    def _range(self, bounds: Any, cast: str, convert: Callable[[Any], Any]) -> Test:
        checks: list[tuple[str, sql.Composable]] = []
        for name, operator in (("gt", ">"), ("gte", ">="), ("lt", "<"), ("lte", "<=")):
            bound = getattr(bounds, name)
            if bound is not None:
                checks.append((operator, self.param(convert(bound), cast)))

        def test(e: sql.Composable) -> sql.Composable:
            # CASE, not AND: SQL may evaluate a conjunction in any order, and the cast of
            # a non-number fails
            compared = [
                sql.SQL("({})::" + cast + " " + op + " {}").format(e, bound) for op, bound in checks
            ]
            return sql.SQL("(CASE WHEN jsonb_typeof({}) = 'number' THEN {} ELSE FALSE END)").format(
                e, sql.SQL(" AND ").join(compared) if compared else sql.SQL("TRUE")
            )

        return test


_FALSE = sql.SQL("FALSE")
