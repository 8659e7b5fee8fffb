"""The PostgreSQL store's tables and indexes, created only where missing.

Why its own module: the schema is created lazily by the store (the service starts while the
database is down) and by replicas at once, under the migration lock, adding only what is
missing, because DDL on an existing table would lock out its writers.

Per collection: ``memorystore_vectors_<collection>`` (``id uuid``, ``vector vector(dims)``,
``payload``, ``words`` and ``times`` jsonb; HNSW and GIN indexes) and
``memorystore_terms_<collection>`` (the BM25 postings, deleted with their point).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from memorystore.service.state.postgres import MIGRATION_LOCK, Database, DatabaseUnavailable

__all__ = ["TERMS_PREFIX", "VECTORS_PREFIX", "Tables", "table_names"]

VECTORS_PREFIX = "memorystore_vectors_"
TERMS_PREFIX = "memorystore_terms_"
_MAX_IDENTIFIER = 63  # PostgreSQL's NAMEDATALEN - 1: longer names are silently truncated


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


@dataclass(frozen=True)
class Tables:
    """One collection's tables (their names from `table_names`) and how to create them."""

    collection: str
    dims: int
    vectors_table: str
    terms_table: str
    index_stem: str

    @classmethod
    def of(cls, collection: str, dims: int) -> Tables:
        return cls(collection, dims, *table_names(collection))

    @property
    def vectors(self) -> sql.Identifier:
        return sql.Identifier(self.vectors_table)

    @property
    def terms(self) -> sql.Identifier:
        return sql.Identifier(self.terms_table)

    def create(self, database: Database) -> None:
        """Tables and indexes, in one transaction under the migration lock (replicas
        creating them at once wait for each other)."""
        vectors = self.vectors
        with database.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            self._create_extension(conn, database)
            stored = conn.execute(
                "SELECT a.atttypmod FROM pg_attribute a "
                "WHERE a.attrelid = to_regclass(%s) AND a.attname = 'vector'",
                (vectors.as_string(conn),),
            ).fetchone()
            if stored is not None and stored[0] != self.dims:
                raise ValueError(
                    f"Table {self.vectors_table} stores {stored[0]}-dimensional vectors, but "
                    f"embedding_model_dims is {self.dims}"
                )
            # only what is missing: DDL on an existing table would lock out its writers
            for name, statements in self._objects():
                found = conn.execute("SELECT to_regclass(%s)", (name.as_string(conn),))
                if found.fetchone() == (None,):
                    for statement in statements:
                        conn.execute(statement)

    def drop(self, database: Database) -> None:
        """Drop both tables, under the migration lock."""
        with database.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(self.terms, self.vectors))

    def _objects(self) -> list[tuple[sql.Identifier, list[sql.Composed]]]:
        """Each table and index of the collection, with the statements that create it."""
        vectors, terms = self.vectors, self.terms
        hnsw, gin, by_point = (
            sql.Identifier(f"{self.index_stem}_{name}")
            for name in ("hnsw", "payload", "terms_point")
        )
        create_vectors = sql.SQL(
            "CREATE TABLE {} (id uuid PRIMARY KEY, vector vector({}) NOT NULL, "
            "payload jsonb NOT NULL, words jsonb NOT NULL DEFAULT '{{}}', "
            "times jsonb NOT NULL DEFAULT '{{}}')"
        ).format(vectors, sql.Literal(self.dims))
        named = sql.SQL("COMMENT ON TABLE {} IS {}").format(vectors, sql.Literal(self.collection))
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

    def _create_extension(self, conn: psycopg.Connection[Any], database: Database) -> None:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            return
        try:
            with conn.transaction():  # a savepoint: the error message is ours
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            raise DatabaseUnavailable(
                f"{database.field}: the vector collection {self.collection!r} needs "
                "the pgvector extension, which this role may not create: the database owner "
                "must run `CREATE EXTENSION vector` in this database"
            ) from None
        except (psycopg.errors.UndefinedFile, psycopg.errors.FeatureNotSupported) as exc:
            raise DatabaseUnavailable(
                f"{database.field}: the vector collection {self.collection!r} needs "
                f"pgvector, which this PostgreSQL server lacks: {database.describe(exc)}"
            ) from None
