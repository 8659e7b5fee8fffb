"""One point as the PostgreSQL store writes it: its vectors row and its BM25 postings.

Why apart from the store: every write (insert, a full update, reindex) encodes a point the
same way, and the postings are what keyword search scores (`store.keyword_search`), so how a
point becomes rows is written once. Term ``HAS_TERMS`` marks a point that has any term, so
that BM25's N counts the points the engine counts (neither empty nor stopword-only texts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import qdrant_edge as qe
from psycopg import sql

from memorystore.service.retrieval import lexical
from memorystore.service.stores.pgvector.encoding import (
    payload_json,
    times_of,
    vector_literal,
    words_of,
)
from memorystore.service.stores.pgvector.schema import Tables
from memorystore.service.stores.protocol import Payload

__all__ = ["HAS_TERMS", "Row", "check_dims", "replace_postings", "row_of", "upsert", "vector_text"]

# The posting that marks a point holding at least one term (BM25's N); real term ids are
# the encoder's unsigned hashes.
HAS_TERMS = -1


@dataclass(slots=True)
class Row:
    """One point ready to write: the parameters of its row, and its BM25 postings."""

    id: str
    vector: str | None
    payload: str
    words: str
    times: str
    postings: list[tuple[int, float]]


def check_dims(vector: Sequence[float], dims: int) -> None:
    if len(vector) != dims:
        raise ValueError(f"Vector dimension error: expected dim: {dims}, got {len(vector)}")


def vector_text(vector: list[float], dims: int) -> str:
    """The vector as pgvector text, scaled to unit length (the engine stores cosine
    vectors normalised; a zero vector stays zero)."""
    check_dims(vector, dims)
    norm = math.sqrt(math.fsum(float(x) * float(x) for x in vector))
    return vector_literal([float(x) / norm for x in vector] if norm > 0 else vector)


def row_of(
    point_id: str, vector: list[float] | None, payload: Payload, dims: int, bm25: qe.Bm25
) -> Row:
    """The point's row (vector, payload and its shadows) and its postings, encoded now."""
    text = lexical.keyword_text(payload)
    postings: list[tuple[int, float]] = []
    if text:
        encoded = bm25.embed_document(text)
        postings = list(zip(encoded.indices, encoded.values, strict=True))
    return Row(
        point_id,
        None if vector is None else vector_text(vector, dims),
        payload_json(payload),
        payload_json(words_of(payload)),
        payload_json(times_of(payload)),
        postings,
    )


def upsert(conn: psycopg.Connection[Any], tables: Tables, rows: list[Row]) -> None:
    """Insert or replace these points and their postings (in the caller's transaction)."""
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (id, vector, payload, words, times) SELECT * FROM unnest("
            "%(ids)s::uuid[], %(vectors)s::vector[], %(payloads)s::jsonb[], "
            "%(words)s::jsonb[], %(times)s::jsonb[]) "
            "ON CONFLICT (id) DO UPDATE SET vector = EXCLUDED.vector, "
            "payload = EXCLUDED.payload, words = EXCLUDED.words, times = EXCLUDED.times"
        ).format(tables.vectors),
        {
            "ids": [r.id for r in rows],
            "vectors": [r.vector for r in rows],
            "payloads": [r.payload for r in rows],
            "words": [r.words for r in rows],
            "times": [r.times for r in rows],
        },
    )
    replace_postings(conn, tables, rows)


def replace_postings(conn: psycopg.Connection[Any], tables: Tables, rows: list[Row]) -> None:
    """These points' postings, in place of what they had."""
    conn.execute(
        sql.SQL("DELETE FROM {} WHERE point_id = ANY(%s::uuid[])").format(tables.terms),
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
            ).format(tables.terms),
            (terms, points, weights),
        )
