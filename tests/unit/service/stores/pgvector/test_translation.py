"""PgVectorStore's translations, without a database: mem0 filters to SQL (values and keys
always bound), payloads to jsonb, and the engine's words and datetimes it stores beside them."""

from __future__ import annotations

import json
import math
import random
import re
import uuid
from datetime import UTC, datetime

import pytest

from memorystore.service.stores.embedded import EdgeVectorStore
from memorystore.service.stores.filters import engine_filter
from memorystore.service.stores.pgvector.encoding import (
    datetime_micros,
    payload_json,
    point_uuid,
    word_ids,
)
from memorystore.service.stores.pgvector.schema import table_names
from memorystore.service.stores.pgvector.sql_filters import FilterSql, parse_path


def render(filters: dict | None) -> tuple[str, dict]:
    built = FilterSql("p")
    return built.where(filters).as_string(None), built.params


HOSTILE = [
    "'; DROP TABLE memorystore_vectors_memories; --",
    "Robert'); DROP TABLE students;--",
    "%s",
    "%(f0)s",
    "{}",
    "$1",
    "名字 ☃ 😀",
    "a\\'b",
]


def strings_in(value: object) -> set[str]:
    """Every string among the parameters, JSON-encoded ones decoded."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found |= {key, *strings_in(item)}
    elif isinstance(value, list):
        for item in value:
            found |= strings_in(item)
    elif isinstance(value, str):
        found.add(value)
        try:
            decoded = json.loads(value)
        except ValueError:
            return found
        if decoded != value:
            found |= strings_in(decoded)
    return found


CASES = [  # (filter for a value and a key, whether the value itself is a parameter)
    (lambda v, k: {"data": v}, True),
    (lambda v, k: {"data": {"ne": v}}, True),
    (lambda v, k: {"data": {"in": [v, "x"]}}, True),
    (lambda v, k: {"hash": {"nin": [v]}}, True),
    (lambda v, k: {"data": {"contains": v}}, False),  # bound as the ids of its words
    (lambda v, k: {"user_id": v}, True),
    (lambda v, k: {"user_id": "u", "OR": [{k: v}, {"NOT": [{k: {"eq": v}}]}]}, True),
    (lambda v, k: {k: {"gt": 1, "lt": 2}}, False),
]


@pytest.mark.parametrize("text", HOSTILE)
def test_values_and_keys_are_bound_never_spliced(text):
    """The SQL is the same whatever the value or key: nothing of them is in it."""
    key = f'"{text}"' if "\\" not in text else '"plain"'  # the engine's paths: no escapes
    for make, value_bound in CASES:
        clause, params = render(make(text, key))
        benign, _ = render(make("zzz", '"zzz"'))
        if "contains" in str(make("", "")) and not word_ids(text):
            benign = "(FALSE)"  # a text without words matches nothing
        assert clause == benign, make(text, key)
        assert set(re.findall(r"%\((\w+)\)s", clause)) == set(params)
        held = strings_in(params)
        assert not value_bound or text in held
        assert key == '"plain"' or text in held or "contains" in str(make("", ""))


@pytest.mark.parametrize(
    "filters",
    [
        {"'; DROP TABLE x; --": "a"},
        {"%s": 1},
        {"a b": "c"},
        {"age": {"between": [1, 2]}},
        {"age": {}},
        {"age": {"gt": 1, "eq": 2}},
        {"OR": {"team": "red"}},
        {"NOT": ["team"]},
        {"active": True},
        {"active": {"in": [True, False]}},
        {"score": 1.5},
        {"score": {"gt": "high"}},
        {"team": ["red", 1]},
        {"v": 2**63},
        {"created_at": {"gt": "2024-13-45"}},
        {"user_id": {"ne": "u1"}},
        {"user_id": ["u1", "u2"]},
        {"agent_id": ""},
        {"$not": [{"user_id": "u1"}]},
        {"AND": [{"NOT": [{"run_id": "r"}]}]},
    ],
)
def test_refused_filters_raise_the_embedded_stores_errors(filters):
    with pytest.raises(ValueError) as engine:
        engine_filter(filters)
    with pytest.raises(ValueError) as ours:
        render(filters)
    assert str(ours.value) == str(engine.value)


def test_no_constraint_is_true_and_wildcards_vanish():
    for filters in (None, {}, {"team": "*"}, {"AND": [{"team": "*"}]}, {"NOT": [{}]}):
        assert render(filters) == ("TRUE", {})


def test_a_top_level_match_is_answered_by_the_gin_index_and_integers_stay_integers():
    clause, params = render({"user_id": "u1"})
    assert clause == '(("p"."payload" @> %(f0)s::jsonb OR "p"."payload" @> %(f1)s::jsonb))'
    assert json.loads(params["f0"]) == {"user_id": "u1"}
    assert json.loads(params["f1"]) == {"user_id": ["u1"]}
    clause, _ = render({"n": 5})
    assert "strpos" in clause  # 5.0 contains 5 in jsonb, but is not the integer 5


def test_an_agent_filter_without_a_user_requires_an_empty_user_id():
    clause, params = render({"agent_id": "a1"})
    empty = re.search(r"""COALESCE\(\("p"\."payload" -> %\((\w+)\)s::text\), 'null'""", clause)
    assert empty is not None and params[empty.group(1)] == "user_id"
    assert " AND " in clause


def test_except_on_a_keyword_indexed_field_reads_strings_only():
    indexed, _ = render({"hash": {"ne": "h"}})
    plain, _ = render({"color": {"ne": "h"}})
    assert "= 'string' AND NOT" in indexed and "ELSE TRUE" not in indexed
    assert "ELSE TRUE" in plain


def test_a_text_without_words_matches_nothing():
    assert render({"data": {"contains": "..."}})[0] == "(FALSE)"
    clause, params = render({"data": {"contains": "Hello, WORLD"}})
    assert '"p"."words"' in clause
    assert word_ids("hello world") in params.values()


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("a", ["a"]),
        ("a.b", ["a", "b"]),
        ("a[]", ["a", None]),
        ("a[0].b", ["a", 0, "b"]),
        ("a[][]", ["a", None, None]),
        ('"a.b"', ["a.b"]),
        ('a."b.c"[1]', ["a", "b.c", 1]),
        ('"\'; DROP TABLE x; --"', ["'; DROP TABLE x; --"]),
        ('""', [""]),
        ("名字.x", ["名字", "x"]),
    ],
)
def test_parse_path_reads_the_engines_json_paths(key, path):
    normalized = engine_filter({key: "v"}).must[0].key  # what the engine made of it
    assert parse_path(normalized) == path


def test_payload_json_keeps_what_the_engine_distinguishes():
    payload = {"f": 1.0, "big": 1e16, "tiny": 1.5e-7, "i": 7, "u64": 2**63, "huge": 2**70}
    text = payload_json({**payload, "list": (1, 2.5, None, True), "s": "ü\"'"})
    assert '"f":1.0' in text and '"big":10000000000000000.0' in text
    assert '"tiny":0.00000015' in text and '"u64":9223372036854775808' in text
    decoded = json.loads(text)
    assert decoded["big"] == 1e16 and isinstance(decoded["big"], float)
    assert decoded["huge"] == float(2**70) and isinstance(decoded["huge"], float)  # a double
    assert decoded["list"] == [1, 2.5, None, True] and decoded["s"] == "ü\"'"
    with pytest.raises(ValueError, match="failed to convert NaN into payload number type"):
        payload_json({"x": math.nan})
    with pytest.raises(ValueError, match="failed to convert -inf into payload number type"):
        payload_json({"x": [-math.inf]})
    with pytest.raises(ValueError, match="NUL"):
        payload_json({"x": "a\x00b"})
    with pytest.raises(TypeError, match="'int' object is not an instance of 'str'"):
        payload_json({1: "a"})


def _utc_micros(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp()) * 1_000_000


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("2024-01-15T10:00:00Z", _utc_micros(2024, 1, 15, 10)),
        ("2024-01-15T10:00:00", _utc_micros(2024, 1, 15, 10)),  # naive: UTC
        ("2024-01-15 10:00", _utc_micros(2024, 1, 15, 10)),
        ("2024-01-15T12:00:00+02:00", _utc_micros(2024, 1, 15, 10)),
        ("2024-01-15T10:00:00+0200", _utc_micros(2024, 1, 15, 8)),
        ("2024-01-15", _utc_micros(2024, 1, 15)),
        (" 2024-1-5", _utc_micros(2024, 1, 5)),
        ("+002024-01-15", _utc_micros(2024, 1, 15)),
        ("2024-01-15T10:00:00.1234567Z", _utc_micros(2024, 1, 15, 10) + 123456),
        ("2024-01-15T10:00:00.5", _utc_micros(2024, 1, 15, 10) + 500000),
        ("0001-01-01", _utc_micros(1, 1, 1)),
        ("9999-12-31T23:59:59Z", _utc_micros(9999, 12, 31, 23, 59, 59)),
        ("1969-12-31T23:59:59Z", -1_000_000),
        ("2024-02-30", None),
        ("20240115", None),
        ("2024-01-15T10Z", None),
        ("hello", None),
        ("", None),
    ],
)
def test_datetime_micros_reads_what_the_engine_reads(text, micros):
    assert datetime_micros(text) == micros


def test_word_ids_are_the_words_the_engines_text_match_sees(tmp_path):
    """The engine's `contains` without a full-text index, on fuzzed Unicode: a point matches
    exactly when its text holds every word of the query."""
    rng = random.Random(3)
    alphabet = [*"abcAB Zz09_-'.,;:!?/\\\t\n", *"éÉßΣςσİıǅ杭州😀ﬁक²٣", "\u0307", "\u093f", "\u200b"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(200)]
    ids = [str(uuid.uuid4()) for _ in texts]
    store = EdgeVectorStore("words", 2, str(tmp_path))
    try:
        store.insert([[1.0, 0.0]] * len(texts), [{"t": t} for t in texts], ids)
        queries = texts[:100] + [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(100)
        ]
        for query in queries:
            found = {p.id for p in store.list({"t": {"contains": query}}, top_k=1000)[0]}
            wanted = set(word_ids(query))
            expected = {i for i, t in zip(ids, texts, strict=True) if wanted <= set(word_ids(t))}
            assert found == (expected if wanted else set()), repr(query)
    finally:
        store.close()


def test_table_names_fit_and_stay_distinct():
    assert table_names("memories")[:2] == (
        "memorystore_vectors_memories",
        "memorystore_terms_memories",
    )
    long_a, long_b = "m" * 64, "m" * 63 + "n"
    names = [*table_names(long_a), *table_names(long_b)]
    assert all(len(n.encode()) <= 63 for n in names)
    assert len(set(names)) == 6


def test_point_ids_are_uuids():
    point = str(uuid.uuid4())
    assert point_uuid(point.upper()) == point
    assert point_uuid(uuid.UUID(point).hex) == point
    with pytest.raises(ValueError, match="failed to parse 5 as UUID"):
        point_uuid(5)
