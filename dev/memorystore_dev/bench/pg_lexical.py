"""`memorystore bench pg-lexical`: which PostgreSQL keyword search serves English and Chinese.

Issue 17's PostgreSQL tier needs a lexical leg beside pgvector. Candidates, each ranking a
user's memories for a query on a real PostgreSQL 18 (the test harness's), against the
embedded engine's BM25 — today's lexical leg — in the same run, on the project's
multilingual data set (keyword search alone, no vectors):

- `fts-raw`: full-text search on the text, `simple` configuration (no stemming, a run of
  CJK characters is one token), any query word matching (`|`), ranked by `ts_rank_cd`;
- `fts-terms`: full-text search over the engine's own terms (the multilingual tokenizer:
  Chinese segmented into words, English stemmed, stopwords dropped), hashed to words, so the
  database matches what BM25 matches; ranked by `ts_rank`;
- `trgm`: pg_trgm, ranked by `word_similarity(query, text)`;
- `terms+trgm`: `fts-terms` and `trgm` fused by reciprocal rank (k = 60);
- `sql-bm25`: what the PostgreSQL tier ships (`service/stores/pgvector.py`): the engine's own BM25
  computed in SQL over a postings table of the engine's terms and weights;
- `edge-bm25`: the embedded engine's BM25 (the baseline).
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memorystore.service.retrieval import lexical
from memorystore.spec import LexicalTokenizer
from memorystore_dev.bench.multilingual import GROUPS, DataSet, Scores, load, scores

CONFIGS = ("fts-raw", "fts-terms", "trgm", "terms+trgm", "sql-bm25", "edge-bm25")
RRF_K = 60
TOKENIZER = LexicalTokenizer.MULTILINGUAL
TOP = 10


def term_words(text: str) -> str:
    """The engine's terms of `text` as words PostgreSQL's `simple` parser keeps whole."""
    return " ".join(f"t{term}" for term in sorted(lexical.terms(text, TOKENIZER)))


def raw_query(text: str) -> str:
    """Any word of the query (`simple` parsing), as a tsquery string; empty: no word."""
    words = [w for w in "".join(c if c.isalnum() else " " for c in text).split() if w]
    return " | ".join(f"'{w}'" for w in words)


SQL: dict[str, str] = {
    "fts-raw": (
        "SELECT id FROM m WHERE owner = %(user)s AND raw @@ to_tsquery('simple', %(q)s) "
        "ORDER BY ts_rank_cd(raw, to_tsquery('simple', %(q)s)) DESC, id LIMIT %(top)s"
    ),
    "fts-terms": (
        "SELECT id FROM m WHERE owner = %(user)s AND terms @@ to_tsquery('simple', %(q)s) "
        "ORDER BY ts_rank(terms, to_tsquery('simple', %(q)s)) DESC, id LIMIT %(top)s"
    ),
    "trgm": (
        "SELECT id FROM m WHERE owner = %(user)s AND word_similarity(%(q)s, body) > 0 "
        "ORDER BY word_similarity(%(q)s, body) DESC, id LIMIT %(top)s"
    ),
}


def query_text(config: str, text: str) -> str:
    if config == "fts-raw":
        return raw_query(text)
    if config == "fts-terms":
        return " | ".join(term_words(text).split())
    return text


def fused(*rankings: Sequence[str], k: int = RRF_K) -> list[str]:
    """Reciprocal-rank fusion of ranked id lists (ties: the order first seen)."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking, 1):
            score[memory_id] = score.get(memory_id, 0.0) + 1 / (k + rank)
    return sorted(score, key=lambda i: -score[i])[:TOP]


def postgres_rankings(dsn: str, data: DataSet) -> dict[str, list[list[str]]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(
            "CREATE TABLE m (id text PRIMARY KEY, owner text, body text, raw tsvector, "
            "terms tsvector)"
        )
        with db.cursor() as cur:
            cur.executemany(
                "INSERT INTO m VALUES (%s, %s, %s, to_tsvector('simple', %s), "
                "to_tsvector('simple', %s))",
                [(m.id, m.user, m.text, m.text, term_words(m.text)) for m in data.memories],
            )
        db.execute("CREATE INDEX ON m USING gin (raw)")
        db.execute("CREATE INDEX ON m USING gin (terms)")
        db.execute("CREATE INDEX ON m USING gin (body gin_trgm_ops)")
        ranked: dict[str, list[list[str]]] = {}
        for config, sql in SQL.items():
            lists = []
            for q in data.queries:
                text = query_text(config, q.text)
                if not text:
                    lists.append([])
                    continue
                rows = db.execute(sql, {"user": q.user, "q": text, "top": TOP}).fetchall()
                lists.append([r[0] for r in rows])
            ranked[config] = lists
    return ranked


def store_rankings(store: Any, data: DataSet) -> list[list[str]]:
    """Each query's keyword hits in its user's scope from one of the service's stores."""
    ids = {m.id: str(uuid.uuid5(uuid.NAMESPACE_URL, m.id)) for m in data.memories}
    back = {v: k for k, v in ids.items()}
    store.insert(
        vectors=[[1.0, 0.0]] * len(data.memories),
        ids=[ids[m.id] for m in data.memories],
        payloads=[{"data": m.text, "user_id": m.user} for m in data.memories],
    )
    return [
        [back[str(h.id)] for h in store.keyword_search(q.text, TOP, {"user_id": q.user}) or []]
        for q in data.queries
    ]


def edge_rankings(root: Path, data: DataSet) -> list[list[str]]:
    from memorystore.service.stores.embedded import EdgeVectorStore

    store = EdgeVectorStore(
        collection_name="lexical", embedding_model_dims=2, path=str(root), keyword_search=True
    )
    try:
        return store_rankings(store, data)
    finally:
        store.close()


def sql_bm25_rankings(dsn: str, data: DataSet) -> list[list[str]]:
    from memorystore.service.state.postgres import Database
    from memorystore.service.stores.pgvector.store import PgVectorStore

    database = Database(dsn, field="vectorStore.postgres")
    store = PgVectorStore(
        collection_name="lexical", embedding_model_dims=2, database=database, keyword_search=True
    )
    try:
        return store_rankings(store, data)
    finally:
        database.close()


def measure(data: DataSet, server_factory: Callable[[], Any]) -> dict[str, dict[str, Scores]]:
    with server_factory() as server, tempfile.TemporaryDirectory() as tmp:
        ranked = postgres_rankings(server.dsn, data)
        ranked["terms+trgm"] = [
            fused(a, b) for a, b in zip(ranked["fts-terms"], ranked["trgm"], strict=True)
        ]
        ranked["sql-bm25"] = sql_bm25_rankings(server.dsn, data)
        ranked["edge-bm25"] = edge_rankings(Path(tmp), data)
    return {config: scores(data.queries, ranked[config]) for config in CONFIGS}


def table(results: dict[str, dict[str, Scores]]) -> str:
    groups = (*GROUPS, "all")
    head = "| config | " + " | ".join(f"{g} hit@1 / hit@5 / MRR" for g in groups) + " |"
    lines = [head, "|---|" + "---:|" * len(groups)]
    for config, by_group in results.items():
        cells = []
        for g in groups:
            s = by_group[g]
            cells.append("–" if s.hit1 is None else f"{s.hit1:.2f} / {s.hit5:.2f} / {s.mrr:.2f}")
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_pg_lexical_bench(users: int | None = None, as_json: bool = False) -> int:
    from memorystore_dev.postgres import PostgresServer

    if users is not None and users < 1:
        print("memorystore bench pg-lexical: --users must be at least 1", file=sys.stderr)
        return 2
    data = load(users=users)
    results = measure(data, PostgresServer)
    if as_json:
        print(json.dumps({c: {g: vars(s) for g, s in r.items()} for c, r in results.items()}))
    else:
        print(f"{len(data.memories)} memories, {len(data.queries)} queries, keyword search only")
        print(table(results))
    return 0
