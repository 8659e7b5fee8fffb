"""The vector-store contract, run on the three stores: the embedded engine (EdgeVectorStore,
on disk), PostgreSQL with pgvector (PgVectorStore) and a real Qdrant server (QdrantServerStore,
the managed and external tiers; the vendored server, memorystore_dev.qdrant). The service takes
any of them as a `stores.protocol.VectorStore` and must not see a difference, so each test here
states once what all do and runs on each (ids `embedded`, `postgres`, `qdrant`), instead of
copies of it drifting apart.

What only one store has stays beside it: the embedded store's on-disk shards and crash
recovery in tests/unit/service/stores/test_embedded.py; PostgreSQL's tables, postings,
migrations and privileges, and the tests that hold its answers against the engine's, in
tests/integration/test_pg_store.py; the Qdrant server's key rotation, collection layout and
faults in tests/integration/test_qdrant_server.py."""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from memorystore.service.state.postgres import Database
from memorystore.service.stores.embedded import EdgeVectorStore
from memorystore.service.stores.pgvector.store import PgVectorStore
from memorystore.service.stores.protocol import VectorStore
from memorystore.service.stores.qdrant_server import QdrantServerStore
from memorystore_dev.postgres import PostgresServer
from memorystore_dev.qdrant import QdrantServer
from support.vector_stores import KEYWORD_ROWS

pytestmark = pytest.mark.timeout(600)

DIMS = 4
KINDS = ["embedded", "postgres", "qdrant"]
Store = EdgeVectorStore | PgVectorStore | QdrantServerStore
StoreFactory = Callable[..., Store]


def new_id() -> str:
    return str(uuid.uuid4())


def build(kind: str, where: str | Database | QdrantServer, **options: Any) -> Store:
    """A store of `kind` on `where` (the embedded store's directory, a PostgreSQL Database,
    or a Qdrant server): the embedded one's collection is "memories" and the others' a fresh
    one, unless named."""
    settings: dict[str, Any] = {"embedding_model_dims": DIMS} | options
    if isinstance(where, str):
        assert kind == "embedded"
        return EdgeVectorStore(**({"collection_name": "memories", "path": where} | settings))
    fresh = f"t_{uuid.uuid4().hex[:12]}"
    if isinstance(where, QdrantServer):
        server = {"url": where.url, "api_key": where.api_key}
        return QdrantServerStore(**({"collection_name": fresh} | server | settings))
    return PgVectorStore(**({"collection_name": fresh, "database": where} | settings))


@pytest.fixture(scope="module")
def pg_database(pg_server: PostgresServer) -> Iterator[Database]:
    """The module's Database, as the engine would own it: its stores share it, and it is
    closed at the module's end."""
    database = Database(pg_server.dsn, field="vectorStore.postgres")
    yield database
    database.close()


@pytest.fixture(scope="module")
def pg_made(pg_database: Database) -> list[Store]:
    """The PostgreSQL stores of this module (on `pg_database`, which closes with it)."""
    return []


def opener(
    kind: str, request: pytest.FixtureRequest, path: Path
) -> tuple[StoreFactory, list[Store]]:
    """A factory of `kind` stores, and the list of the stores it made that the caller closes
    (the embedded and Qdrant ones; PostgreSQL's are left to `pg_made`)."""
    to_close: list[Store] = []
    where: str | Database | QdrantServer
    if kind == "postgres":
        where = request.getfixturevalue("pg_database")
        made = request.getfixturevalue("pg_made")
    elif kind == "qdrant":
        where, made = request.getfixturevalue("qdrant_server"), to_close
    else:
        where, made = str(path), to_close

    def factory(**options: Any) -> Store:
        store = build(kind, where, **options)
        made.append(store)
        return store

    return factory, to_close


@pytest.fixture(params=KINDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Factory of fresh stores of one kind (the embedded ones on tmp_path, Qdrant's and
    PostgreSQL's on the module's server), closed at the end of the test."""
    factory, to_close = opener(request.param, request, tmp_path)
    yield factory
    for store in to_close:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    return make_store()


def by_name(results: list[Any]) -> list[str]:
    return [r.payload["name"] for r in results]


def test_each_store_is_a_vector_store(store):
    """The contract the service types its calls against (mypy checks the signatures)."""
    assert isinstance(store, VectorStore)


def test_search_ranks_by_cosine_similarity(store):
    ids = {"x": new_id(), "y": new_id(), "xy": new_id()}
    vectors = {"x": [1.0, 0, 0, 0], "y": [0, 1.0, 0, 0], "xy": [1.0, 1.0, 0, 0]}
    store.insert(
        vectors=list(vectors.values()),
        payloads=[{"name": name, "data": name} for name in vectors],
        ids=list(ids.values()),
    )

    hits = store.search("q", [0.9, 0.1, 0, 0], top_k=3)

    assert by_name(hits) == ["x", "xy", "y"]
    assert [h.id for h in hits] == [ids["x"], ids["xy"], ids["y"]]
    assert all(isinstance(h.id, str) for h in hits)
    assert hits[0].score == pytest.approx(0.9 / (0.82**0.5), abs=1e-5)
    assert hits[0].score > hits[1].score > hits[2].score
    assert store.search("q", [0, 0, 0, 1.0], top_k=1)[0].score == pytest.approx(0.0, abs=1e-6)
    assert len(store.search("q", [1.0, 0, 0, 0], top_k=2)) == 2
    # the message is shared; its type is not (PostgreSQL's ValueError: see test_pg_store.py)
    with pytest.raises(Exception, match="expected dim: 4, got 3"):
        store.search("q", [1.0, 0, 0])


def test_search_batch_returns_one_list_per_query_in_order(store):
    store.insert(
        vectors=[[1.0, 0, 0, 0], [0, 1.0, 0, 0]],
        payloads=[{"name": "x", "user_id": "a"}, {"name": "y", "user_id": "a"}],
        ids=[new_id(), new_id()],
    )

    batches = store.search_batch(
        ["q1", "q2"], [[0, 1.0, 0, 0], [1.0, 0, 0, 0]], top_k=1, filters={"user_id": "a"}
    )

    assert [by_name(hits) for hits in batches] == [["y"], ["x"]]
    assert store.search_batch(["q"], [[1.0, 0, 0, 0]], filters={"user_id": "b"}) == [[]]


def test_user_ids_are_isolated_in_search_list_count_and_get(store):
    alice = [new_id() for _ in range(3)]
    bob = [new_id() for _ in range(2)]
    store.insert(
        vectors=[[1.0, 0, 0, 0]] * 5,
        payloads=[{"user_id": "alice", "name": f"a{i}"} for i in range(3)]
        + [{"user_id": "bob", "name": f"b{i}"} for i in range(2)],
        ids=alice + bob,
    )

    assert {h.id for h in store.search("q", [1.0, 0, 0, 0], 10, {"user_id": "alice"})} == set(alice)
    assert {p.id for p in store.list({"user_id": "bob"})[0]} == set(bob)
    assert store.count({"user_id": "alice"}) == 3
    assert store.count({"user_id": "bob"}) == 2
    assert store.count({"user_id": "carol"}) == 0
    assert store.search("q", [1.0, 0, 0, 0], 10, {"user_id": "carol"}) == []
    assert all(store.get(i).payload["user_id"] == "bob" for i in bob)


PEOPLE = [
    {"name": "ann", "user_id": "u1", "age": 31, "score": 0.5, "team": "red",
     "created_at": "2024-01-15T10:00:00+00:00", "data": "Likes hiking in the Alps"},
    {"name": "ben", "user_id": "u1", "age": 25, "score": 1.5, "team": "blue",
     "created_at": "2024-06-01T08:30:00Z", "data": "Prefers tea over coffee"},
    {"name": "cat", "user_id": "u2", "age": 40, "score": 2.5, "team": "red",
     "created_at": "2025-02-01T00:00:00Z", "data": "Hiking boots size 38"},
    {"name": "dan", "user_id": "u2", "age": 18, "team": "green",
     "created_at": "2023-12-31T23:59:59Z", "data": "coffee addict"},
    {"name": "eve", "user_id": "u3", "data": "no metadata at all"},
    {"name": "fay", "user_id": "u3", "age": 25.0, "team": ["red", "blue"], "hash": ["h1", 7],
     "meta": {"city": "Paris", "langs": ["fr", "en"]}, "visits": [{"at": "2024-03-01"}]},
]  # fmt: skip


@pytest.fixture(scope="module", params=KINDS)
def people(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """Six points with assorted payload types in one store of each kind, shared read-only by
    the filter tables."""
    factory, embedded = opener(request.param, request, tmp_path_factory.mktemp("people"))
    store = factory(collection_name="people")
    store.insert(
        vectors=[[1.0, 0, 0, 0]] * len(PEOPLE), payloads=PEOPLE, ids=[new_id() for _ in PEOPLE]
    )
    yield store
    for made in embedded:
        made.close()


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"team": "red"}, {"ann", "cat", "fay"}),
        ({"age": 25}, {"ben"}),  # fay's 25.0 is a float: integers match integers only
        ({"team": ["blue", "green"]}, {"ben", "dan", "fay"}),
        ({"team": "*"}, {"ann", "ben", "cat", "dan", "eve", "fay"}),
        ({"team": "*", "user_id": "u2"}, {"cat", "dan"}),
        ({"team": {"eq": "blue"}}, {"ben", "fay"}),
        ({"team": {"ne": "red"}}, {"ben", "dan", "fay"}),  # fay holds "blue", not only "red"
        ({"team": {"in": ["red", "green"]}}, {"ann", "cat", "dan", "fay"}),
        ({"team": {"nin": ["red", "green"]}}, {"ben", "fay"}),
        ({"age": {"in": [18, 40]}}, {"cat", "dan"}),
        ({"age": {"gt": 25}}, {"ann", "cat"}),
        ({"age": {"gte": 25}}, {"ann", "ben", "cat", "fay"}),
        ({"age": {"lt": 25}}, {"dan"}),
        ({"age": {"lte": 25}}, {"ben", "dan", "fay"}),
        ({"age": {"gt": 20, "lt": 35}}, {"ann", "ben", "fay"}),
        ({"score": {"gte": 1.0, "lte": 2.5}}, {"ben", "cat"}),
        ({"created_at": {"gte": "2024-01-01T00:00:00Z"}}, {"ann", "ben", "cat"}),
        ({"created_at": {"gt": "2024-01-15T10:00:00Z", "lt": "2025-01-01"}}, {"ben"}),
        ({"created_at": {"lt": "2024-01-01"}}, {"dan"}),
        ({"created_at": {"gte": "2024-01-15T12:00:00+02:00"}}, {"ann", "ben", "cat"}),
        ({"data": {"contains": "coffee"}}, {"ben", "dan"}),
        ({"data": {"contains": "hiking"}}, {"ann", "cat"}),
        ({"data": {"icontains": "HIKING boots"}}, {"cat"}),
        ({"data": {"contains": "hik"}}, set()),  # whole words, not substrings
        ({"data": {"contains": "..."}}, set()),  # no word at all
        ({"AND": [{"team": "red"}, {"age": {"gt": 35}}]}, {"cat"}),
        ({"$and": [{"name": ["ann", "ben"]}, {"team": "blue"}]}, {"ben"}),
        ({"OR": [{"name": "ann"}, {"age": {"lt": 20}}]}, {"ann", "dan"}),
        ({"$or": [{"team": "blue"}, {"team": "green"}]}, {"ben", "dan", "fay"}),
        ({"NOT": [{"team": "red"}]}, {"ben", "dan", "eve"}),
        ({"$not": [{"team": "red"}, {"age": {"lt": 30}}]}, {"eve"}),
        ({"user_id": "u1", "OR": [{"team": "red"}, {"team": "green"}]}, {"ann"}),
        # mem0 passes OR and its $or copy together; the first spelling wins.
        ({"OR": [{"team": "red"}], "$or": [{"team": "blue"}], "user_id": "u2"}, {"cat"}),
        ({"AND": [{"team": "*"}]}, {"ann", "ben", "cat", "dan", "eve", "fay"}),
        # identity keys are literal: '*' is only the id '*', never "any user"
        ({"user_id": "*"}, set()),
        ({"user_id": "*", "team": "*"}, set()),
        # paths: a key steps into an object, [] into an array's elements
        ({"meta.city": "Paris"}, {"fay"}),
        ({"meta.langs": "en"}, {"fay"}),
        ({"meta.langs[1]": "en"}, {"fay"}),
        ({"meta.langs[0]": "en"}, set()),
        ({"visits.at": {"gte": "2024-01-01"}}, set()),
        ({"visits[].at": {"gte": "2024-01-01"}}, {"fay"}),
        # on `hash` (keyword-indexed) ne only reads string values: fay's 7 does not count
        ({"hash": {"ne": "h1"}}, set()),
        ({"hash": 7}, {"fay"}),
    ],
)
def test_filter_operators(people, filters, expected):
    assert {p.payload["name"] for p in people.list(filters)[0]} == expected
    assert people.count(filters) == len(expected)
    assert set(by_name(people.search("q", [1.0, 0, 0, 0], 10, filters))) == expected


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"age": {"between": [1, 2]}}, "'age'.*between"),
        ({"age": {}}, "'age'"),
        ({"age": {"gt": 1, "eq": 2}}, "Cannot mix range operators.*'age'"),
        ({"OR": {"team": "red"}}, "OR filter value must be a list"),
        ({"NOT": ["team"]}, "NOT filter list item at index 0 must be a dict"),
        ({"active": True}, "Boolean.*'active'"),
        ({"active": {"in": [True, False]}}, "Boolean.*'active'"),
        ({"score": 1.5}, "Invalid filter value for field 'score'"),
        ({"score": {"gt": "high"}}, "Invalid filter value for field 'score'"),
        ({"team": ["red", 1]}, "Invalid filter value for field 'team'"),
        ({"created_at": {"gt": "2024-13-45"}}, "Invalid datetime.*'created_at'"),
        # identity keys: one literal id, at the top level only (inside OR/NOT they widen)
        ({"user_id": {"ne": "u1"}}, "'user_id' must be one literal id"),
        ({"user_id": ["u1", "u2"]}, "'user_id' must be one literal id"),
        ({"user_id": None}, "'user_id' must be one literal id"),
        ({"agent_id": ""}, "'agent_id' must be one literal id"),
        ({"$not": [{"user_id": "u1"}]}, "'user_id' is only accepted at the top level"),
        ({"OR": [{"run_id": "r"}, {"team": "red"}]}, "'run_id' is only accepted at the top level"),
        ({"AND": [{"NOT": [{"user_id": "u1"}]}]}, "'user_id' is only accepted at the top level"),
        ({"'; DROP TABLE people; --": "x"}, "invalid JSON path"),
    ],
)
def test_invalid_filters_raise_value_error_naming_the_field(people, filters, message):
    with pytest.raises(ValueError, match=message):
        people.list(filters)
    with pytest.raises(ValueError, match=message):
        people.search("q", [1.0, 0, 0, 0], filters=filters)
    with pytest.raises(ValueError, match=message):
        people.count(filters)


def test_an_agent_or_run_filter_without_a_user_spans_no_user(make_store):
    store = make_store(keyword_search=True)
    rows = {
        "mine": {"user_id": "alice", "agent_id": "planner", "run_id": "r1", "data": "alice plan"},
        "theirs": {"user_id": "bob", "agent_id": "planner", "run_id": "r1", "data": "bob plan"},
        "shared": {"agent_id": "planner", "run_id": "r1", "data": "planner plan"},
        "null": {"user_id": None, "agent_id": "planner", "data": "null owner plan"},
        "no_list": {"user_id": [], "agent_id": "planner", "data": "empty list plan"},
        "blank": {"user_id": "", "agent_id": "planner", "data": "blank owner plan"},
    }
    ids = {name: new_id() for name in rows}
    store.insert([[1.0, 0, 0, 0]] * len(rows), list(rows.values()), list(ids.values()))
    names = {v: k for k, v in ids.items()}

    for scope, expected in [
        ({"agent_id": "planner"}, {"shared", "null", "no_list"}),  # "" is a user id
        ({"run_id": "r1"}, {"shared"}),
        ({"agent_id": "planner", "run_id": "r1"}, {"shared"}),
        ({"agent_id": "planner", "data": {"contains": "plan"}}, {"shared", "null", "no_list"}),
        ({"user_id": "alice", "agent_id": "planner"}, {"mine"}),
        ({"user_id": "bob"}, {"theirs"}),
    ]:
        assert {names[p.id] for p in store.list(scope)[0]} == expected, scope
        assert store.count(scope) == len(expected), scope
        assert {names[h.id] for h in store.search("q", [1.0, 0, 0, 0], 10, scope)} == expected
        hits = store.keyword_search("plan", 10, scope) or []
        assert {names[h.id] for h in hits} == expected, scope
    # a filter with no identity key at all is not a scope (the engine never sends one)
    assert store.count({"data": {"contains": "plan"}}) == 6
    assert store.facet_counts("agent_id", 10) == {"planner": 6}
    assert store.facet_counts("user_id", 10) == {"": 1, "alice": 1, "bob": 1}


def test_payload_only_update_merges_drops_none_and_keeps_vector_and_terms(make_store):
    store = make_store(keyword_search=True)
    point = new_id()
    store.insert(
        [[1.0, 0, 0, 0]],
        [{"data": "pizza lover", "user_id": "a", "meta": {"x": 1}, "gone": 1}],
        [point],
    )

    store.update(point, payload={"data": "sushi lover", "mood": "hungry", "gone": None})
    merged = {"data": "sushi lover", "user_id": "a", "meta": {"x": 1}, "mood": "hungry"}
    assert store.get(point).payload == merged
    store.update(point, payload={"meta": {"y": 2}, "never": None})

    # the engine's set_payload: top-level keys replaced, a None value removes the key
    assert store.get(point).payload == {
        "data": "sushi lover",
        "user_id": "a",
        "mood": "hungry",
        "meta": {"y": 2},
    }
    assert store.search("q", [1.0, 0, 0, 0], top_k=1)[0].score == pytest.approx(1.0)
    # As in mem0's Qdrant store, the BM25 terms are only refreshed by a full update.
    assert [h.id for h in store.keyword_search("pizza")] == [point]
    assert store.keyword_search("sushi") == []
    # but filters read the new payload, `contains` included
    assert store.count({"data": {"contains": "sushi"}}) == 1
    assert store.count({"meta.y": 2}) == 1
    assert store.count({"meta.x": 1}) == 0


def test_vector_only_update_keeps_payload_and_a_missing_point_is_an_error(store):
    point = new_id()
    store.insert([[1.0, 0, 0, 0]], [{"data": "x"}], [point])

    store.update(point, vector=[0, 1.0, 0, 0])
    store.update(point)  # nothing to change: a no-op

    assert store.get(point).payload == {"data": "x"}
    assert store.search("q", [0, 1.0, 0, 0], top_k=1)[0].score == pytest.approx(1.0)
    missing = new_id()
    for partial in ({"vector": [1.0, 0, 0, 0]}, {"payload": {"a": 1}}):
        with pytest.raises(Exception, match=f"No point with id {missing}"):
            store.update(missing, **partial)
    store.update(missing, vector=[1.0, 0, 0, 0], payload={"data": "new"})  # an upsert
    assert store.get(missing).payload == {"data": "new"}


def test_full_update_replaces_vector_payload_and_bm25(make_store):
    store = make_store(keyword_search=True)
    point, other = new_id(), new_id()
    store.insert(
        [[1.0, 0, 0, 0], [0, 0, 1.0, 0]],
        [{"data": "pizza lover", "user_id": "a"}, {"data": "garden", "user_id": "a"}],
        [point, other],
    )

    store.update(point, vector=[0, 1.0, 0, 0], payload={"data": "sushi fan", "user_id": "a"})

    assert store.get(point).payload == {"data": "sushi fan", "user_id": "a"}
    assert store.search("q", [0, 1.0, 0, 0], top_k=1)[0].id == point
    assert store.keyword_search("pizza") == []
    assert [h.id for h in store.keyword_search("sushi")] == [point]


def test_delete_get_and_malformed_ids(store):
    point, kept = new_id(), new_id()
    store.insert([[1.0, 0, 0, 0]] * 2, [{"data": "a"}, {"data": "b"}], [point, kept])

    store.delete(point)
    store.delete(new_id())  # unknown ids are a no-op

    assert store.get(point) is None
    assert store.get(new_id()) is None
    record = store.get(kept)
    assert (record.id, record.score, record.payload) == (kept, None, {"data": "b"})
    assert store.get(kept.upper()).id == kept
    assert store.get("not-a-uuid") is None
    assert store.get(5) is None
    assert store.count() == 1
    with pytest.raises(ValueError, match="failed to parse not-a-uuid as UUID"):
        store.delete("not-a-uuid")
    with pytest.raises(ValueError, match="as UUID"):
        store.insert([[1.0, 0, 0, 0]], [{}], ["not-a-uuid"])


def test_list_pages_like_qdrant_scroll(store):
    ids = [new_id() for _ in range(5)]
    store.insert([[1.0, 0, 0, 0]] * 5, [{"data": str(i)} for i in range(5)], ids)

    points, next_offset = store.list(top_k=3)
    everything, end = store.list()

    assert isinstance(points, list)
    assert [p.id for p in points] == sorted(ids)[:3]  # id order
    assert isinstance(next_offset, str)
    assert next_offset == sorted(ids)[3]  # the first id of the next page
    assert {p.id for p in everything} == set(ids)
    assert end is None
    assert store.list({"user_id": "nobody"}) == ([], None)
    assert store.list(top_k=0) == ([], sorted(ids)[0])


def test_keyword_search_is_off_by_default(store):
    store.insert([[1.0, 0, 0, 0]], [{"data": "pizza"}], [new_id()])

    assert store.keyword_search("pizza") is None


def test_keyword_search_ranks_by_bm25(make_store):
    store = make_store(keyword_search=True)
    rows = copy.deepcopy(KEYWORD_ROWS)  # a store may add to a payload it is given
    ids = {name: new_id() for name in rows}
    store.insert([[1.0, 0, 0, 0]] * len(rows), list(rows.values()), list(ids.values()))

    hits = store.keyword_search("pizza napoli", top_k=10, filters={"user_id": "a"})

    assert [h.id for h in hits] == [ids["both"], ids["one"]]
    assert hits[0].score > hits[1].score > 0
    assert hits[0].payload["data"] == "pizza lover"
    assert store.keyword_search("the of and") == []


def test_scores_of_given_points_match_what_a_search_gives_them(make_store):
    """`keyword_scores` and `cosine` score just the points asked for (the other leg's
    candidates) on the scale of `keyword_search` and `search`, within the scope."""
    store = make_store(keyword_search=True)
    rows = copy.deepcopy(KEYWORD_ROWS)
    ids = {name: new_id() for name in rows}
    vectors = {"both": [1.0, 0, 0, 0], "one": [0.6, 0.8, 0, 0]}
    store.insert(
        [vectors.get(n, [0, 0, 1.0, 0]) for n in rows], list(rows.values()), list(ids.values())
    )
    scope = {"user_id": "a"}
    searched = {h.id: h.score for h in store.keyword_search("pizza napoli", 10, scope) or []}
    # and a point outside the scope, one without the words, an id no point has
    asked = [ids["one"], ids["both"], ids["other_user"], ids["none"], new_id()]

    scores = store.keyword_scores("pizza napoli", asked, scope)

    assert set(scores) == {ids["one"], ids["both"]}
    for point, score in scores.items():
        assert score == pytest.approx(searched[point], rel=1e-4)
    assert store.keyword_scores("pizza napoli", [ids["one"]], {"user_id": "nobody"}) == {}
    assert store.keyword_scores("the of and", asked, scope) == {}
    assert store.keyword_scores("pizza", [], scope) == {}
    dense = {h.id: h.score for h in store.search("", [1.0, 0, 0, 0], top_k=10, filters=scope)}
    cosines = store.cosine([1.0, 0, 0, 0], [ids["one"], ids["both"]], scope)
    assert cosines == pytest.approx({i: dense[i] for i in (ids["one"], ids["both"])}, abs=1e-4)


def test_keyword_scores_are_empty_when_keyword_search_is_off(store):
    point = new_id()
    store.insert([[1.0, 0, 0, 0]], [{"data": "pizza", "user_id": "a"}], [point])

    assert store.keyword_scores("pizza", [point]) == {}


def test_col_info_list_cols_reset_delete_col_and_create_col(make_store):
    store = make_store()
    name = store.collection_name
    other = make_store(collection_name=f"{name}-other")
    other.insert([[1.0, 0, 0, 0]], [{}], [new_id()])
    store.insert([[1.0, 0, 0, 0]] * 2, [{"data": "a b"}, {}], [new_id(), new_id()])

    info = store.col_info()
    assert (info["name"], info["points_count"], info["vector_size"]) == (name, 2, DIMS)
    assert {name, f"{name}-other"} <= set(store.list_cols())

    store.reset()
    assert store.count() == 0
    store.insert([[1.0, 0, 0, 0]], [{}], [new_id()])
    assert store.count() == 1

    store.delete_col()
    assert name not in store.list_cols()
    assert f"{name}-other" in store.list_cols()
    with pytest.raises(RuntimeError, match="closed"):
        store.count()
    store.create_col()  # reopens, empty
    assert store.count() == 0


def test_a_closed_store_refuses_use_and_reopening_it_keeps_every_write(make_store):
    store = make_store()
    kept, updated, deleted = new_id(), new_id(), new_id()
    store.insert(
        [[1.0, 0, 0, 0]] * 3,
        [{"data": "k"}, {"data": "u"}, {"data": "d"}],
        [kept, updated, deleted],
    )
    store.update(updated, payload={"data": "u2"})
    store.delete(deleted)
    store.close()
    store.close()  # idempotent

    with pytest.raises(RuntimeError, match="closed"):
        store.insert([[1.0, 0, 0, 0]], [{}], [new_id()])
    with pytest.raises(RuntimeError, match="closed"):
        store.search("q", [1.0, 0, 0, 0])
    reopened = make_store(collection_name=store.collection_name)
    assert reopened.count() == 2
    assert reopened.get(kept).payload == {"data": "k"}
    assert reopened.get(updated).payload == {"data": "u2"}
    assert reopened.get(deleted) is None


def test_reopen_with_another_dimension_raises_naming_both_sizes(make_store):
    first = make_store()
    first.create_col()
    first.close()

    with pytest.raises(
        ValueError,
        match=rf"{first.collection_name} stores 4-dimensional.*embedding_model_dims is 8",
    ):
        make_store(collection_name=first.collection_name, embedding_model_dims=8).count()


def test_points_pages_through_every_point_with_its_unit_vector_and_payload(store):
    written = {new_id(): [float(i + 1), 1.0] + [0.0] * (DIMS - 2) for i in range(7)}
    store.insert(
        vectors=list(written.values()),
        ids=list(written),
        payloads=[{"data": f"m{i}", "user_id": "u"} for i in range(7)],
    )
    seen = {pid: (vec, payload) for pid, vec, payload in store.points(batch=3)}
    assert set(seen) == set(written)
    for pid, (vec, payload) in seen.items():
        norm = sum(x * x for x in written[pid]) ** 0.5  # cosine stores unit vectors
        assert vec == pytest.approx([x / norm for x in written[pid]], abs=1e-6)
        assert payload["user_id"] == "u" and payload["data"].startswith("m")
    assert list(store.points(batch=7)) and len(list(store.points(batch=7))) == 7


def test_ids_pages_through_every_point_once(store):
    assert list(store.ids()) == []
    written = [new_id() for _ in range(7)]
    store.insert(
        vectors=[[float(i + 1), 1.0] + [0.0] * (DIMS - 2) for i in range(7)],
        ids=written,
        payloads=[{"data": f"m{i}", "user_id": "u"} for i in range(7)],
    )
    for batch in (1, 3, 7, 100):  # pages ending exactly at the last point, and not
        seen = list(store.ids(batch=batch))
        assert sorted(seen) == sorted(written), batch
    store.delete(written[0])
    assert sorted(store.ids(batch=2)) == sorted(written[1:])
    assert set(store.ids()) == {pid for pid, _, _ in store.points()}


def test_concurrent_writes_lose_nothing_while_searches_run(make_store):
    store = make_store(keyword_search=True)
    writers_done = threading.Event()
    reads = []

    def write(thread: int) -> None:
        for i in range(100):
            vector = [1.0, float(thread), float(i), 1.0]
            payload = {"data": f"memory {i} of thread {thread}", "user_id": f"u{thread}"}
            store.insert([vector], [payload], [new_id()])

    def read() -> None:
        while not writers_done.is_set():
            store.search("q", [1.0, 1.0, 0, 0], top_k=5, filters={"user_id": "u1"})
            store.keyword_search("memory thread", 5, {"user_id": "u2"})
            store.list({"user_id": "u2"}, top_k=10)
            store.count()
            reads.append(1)

    with ThreadPoolExecutor(max_workers=12) as pool:
        readers = [pool.submit(read) for _ in range(4)]
        writers = [pool.submit(write, t) for t in range(8)]
        for future in writers:
            future.result()
        writers_done.set()
        for future in readers:
            future.result()  # re-raises any failed read

    assert store.count() == 800
    assert all(store.count({"user_id": f"u{t}"}) == 100 for t in range(8))
    assert reads
