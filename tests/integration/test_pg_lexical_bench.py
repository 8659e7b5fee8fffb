"""`memorystore bench pg-lexical` on a slice, with the real PostgreSQL: why the PostgreSQL
tier's keyword leg should index the engine's own terms rather than PostgreSQL's parser."""

from __future__ import annotations

import psycopg
import pytest

from memorystore_dev.bench.multilingual import GROUPS, load
from memorystore_dev.bench.pg_lexical import (
    CONFIGS,
    SQL,
    fused,
    measure,
    query_text,
    table,
    term_words,
)
from memorystore_dev.postgres import PostgresServer

pytestmark = pytest.mark.timeout(300)


def test_engine_terms_find_a_chinese_word_that_postgres_own_parser_cannot():
    with PostgresServer() as server, psycopg.connect(server.dsn, autocommit=True) as db:
        db.execute("CREATE TABLE m (id text, owner text, body text, raw tsvector, terms tsvector)")
        text = "我住在杭州西湖区，离公司大概三公里。"
        db.execute(
            "INSERT INTO m VALUES ('a', 'u', %s, to_tsvector('simple', %s), "
            "to_tsvector('simple', %s))",
            (text, text, term_words(text)),
        )

        def found(config: str, query: str) -> list[str]:
            q = query_text(config, query)
            rows = db.execute(SQL[config], {"user": "u", "q": q, "top": 5}).fetchall()
            return [r[0] for r in rows]

        assert found("fts-terms", "杭州") == ["a"]  # the engine segments 杭州 out of the text
        assert found("fts-raw", "杭州") == []  # `simple` keeps the whole run as one token
        assert found("fts-terms", "上海") == []


def test_the_bench_runs_on_a_slice_and_prints_every_group(capsys):
    data = load(users=3)
    results = measure(data, PostgresServer)
    assert list(results) == list(CONFIGS)
    for by_group in results.values():
        assert by_group["all"].queries == len(data.queries)
        for group in GROUPS:
            score = by_group[group]
            if score.queries:
                assert 0 <= score.hit1 <= score.hit5 <= 1
    # the PostgreSQL tier's keyword leg is the engine's BM25: equal up to tie order
    for group in (*GROUPS, "all"):
        ours, engine = results["sql-bm25"][group], results["edge-bm25"][group]
        if ours.queries:
            assert abs(ours.hit5 - engine.hit5) <= 0.03, (group, ours, engine)
    printed = table(results)
    print(printed)
    assert printed.count("\n") == len(CONFIGS) + 1


def test_reciprocal_rank_fusion_rewards_agreement():
    assert fused(["a", "b", "c"], ["b", "a"]) == ["a", "b", "c"]  # a: 1/61 + 1/62
    assert fused(["x"], ["y", "x"])[0] == "x"
    assert fused([], []) == []
