"""EdgeVectorStore against the real embedded engine: real shards on disk, no mocks."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from memorystore.service.edge_store import EdgeVectorStore

DIMS = 4


def new_id() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def open_store(tmp_path):
    """Factory for stores on tmp_path; every store it made is closed at teardown."""
    stores = []

    def factory(**kwargs) -> EdgeVectorStore:
        options = {
            "collection_name": "memories",
            "embedding_model_dims": DIMS,
            "path": str(tmp_path),
        }
        store = EdgeVectorStore(**(options | kwargs))
        stores.append(store)
        return store

    yield factory
    for store in stores:
        store.close()


@pytest.fixture
def store(open_store):
    return open_store()


def by_name(results) -> list[str]:
    return [r.payload["name"] for r in results]


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


@pytest.fixture(scope="module")
def people(tmp_path_factory):
    """Five points with assorted payload types, shared read-only by the filter tables."""
    rows = [
        {"name": "ann", "user_id": "u1", "age": 31, "score": 0.5, "team": "red",
         "created_at": "2024-01-15T10:00:00+00:00", "data": "Likes hiking in the Alps"},
        {"name": "ben", "user_id": "u1", "age": 25, "score": 1.5, "team": "blue",
         "created_at": "2024-06-01T08:30:00Z", "data": "Prefers tea over coffee"},
        {"name": "cat", "user_id": "u2", "age": 40, "score": 2.5, "team": "red",
         "created_at": "2025-02-01T00:00:00Z", "data": "Hiking boots size 38"},
        {"name": "dan", "user_id": "u2", "age": 18, "team": "green",
         "created_at": "2023-12-31T23:59:59Z", "data": "coffee addict"},
        {"name": "eve", "user_id": "u3", "data": "no metadata at all"},
    ]  # fmt: skip
    store = EdgeVectorStore("people", DIMS, str(tmp_path_factory.mktemp("people")))
    store.insert(vectors=[[1.0, 0, 0, 0]] * len(rows), payloads=rows, ids=[new_id() for _ in rows])
    yield store
    store.close()


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"team": "red"}, {"ann", "cat"}),
        ({"age": 25}, {"ben"}),
        ({"team": ["blue", "green"]}, {"ben", "dan"}),
        ({"team": "*"}, {"ann", "ben", "cat", "dan", "eve"}),
        ({"team": "*", "user_id": "u2"}, {"cat", "dan"}),
        ({"team": {"eq": "blue"}}, {"ben"}),
        ({"team": {"ne": "red"}}, {"ben", "dan"}),
        ({"team": {"in": ["red", "green"]}}, {"ann", "cat", "dan"}),
        ({"team": {"nin": ["red", "green"]}}, {"ben"}),
        ({"age": {"in": [18, 40]}}, {"cat", "dan"}),
        ({"age": {"gt": 25}}, {"ann", "cat"}),
        ({"age": {"gte": 25}}, {"ann", "ben", "cat"}),
        ({"age": {"lt": 25}}, {"dan"}),
        ({"age": {"lte": 25}}, {"ben", "dan"}),
        ({"age": {"gt": 20, "lt": 35}}, {"ann", "ben"}),
        ({"score": {"gte": 1.0, "lte": 2.5}}, {"ben", "cat"}),
        ({"created_at": {"gte": "2024-01-01T00:00:00Z"}}, {"ann", "ben", "cat"}),
        ({"created_at": {"gt": "2024-01-15T10:00:00Z", "lt": "2025-01-01"}}, {"ben"}),
        ({"created_at": {"lt": "2024-01-01"}}, {"dan"}),
        ({"data": {"contains": "coffee"}}, {"ben", "dan"}),
        ({"data": {"contains": "hiking"}}, {"ann", "cat"}),
        ({"data": {"icontains": "HIKING boots"}}, {"cat"}),
        ({"AND": [{"team": "red"}, {"age": {"gt": 35}}]}, {"cat"}),
        ({"$and": [{"name": ["ann", "ben"]}, {"team": "blue"}]}, {"ben"}),
        ({"OR": [{"name": "ann"}, {"age": {"lt": 20}}]}, {"ann", "dan"}),
        ({"$or": [{"team": "blue"}, {"team": "green"}]}, {"ben", "dan"}),
        ({"NOT": [{"team": "red"}]}, {"ben", "dan", "eve"}),
        ({"$not": [{"team": "red"}, {"age": {"lt": 30}}]}, {"eve"}),
        ({"user_id": "u1", "OR": [{"team": "red"}, {"team": "green"}]}, {"ann"}),
        # mem0 passes OR and its $or copy together; the first spelling wins.
        ({"OR": [{"team": "red"}], "$or": [{"team": "blue"}], "user_id": "u2"}, {"cat"}),
        ({"AND": [{"team": "*"}]}, {"ann", "ben", "cat", "dan", "eve"}),
        # identity keys are literal: '*' is only the id '*', never "any user"
        ({"user_id": "*"}, set()),
        ({"user_id": "*", "team": "*"}, set()),
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
        ({"created_at": {"gt": "2024-13-45"}}, "Invalid datetime.*'created_at'"),
        # identity keys: one literal id, at the top level only (inside OR/NOT they widen)
        ({"user_id": {"ne": "u1"}}, "'user_id' must be one literal id"),
        ({"user_id": ["u1", "u2"]}, "'user_id' must be one literal id"),
        ({"user_id": None}, "'user_id' must be one literal id"),
        ({"agent_id": ""}, "'agent_id' must be one literal id"),
        ({"$not": [{"user_id": "u1"}]}, "'user_id' is only accepted at the top level"),
        ({"OR": [{"run_id": "r"}, {"team": "red"}]}, "'run_id' is only accepted at the top level"),
        ({"AND": [{"NOT": [{"user_id": "u1"}]}]}, "'user_id' is only accepted at the top level"),
    ],
)
def test_invalid_filters_raise_value_error_naming_the_field(people, filters, message):
    with pytest.raises(ValueError, match=message):
        people.list(filters)
    with pytest.raises(ValueError, match=message):
        people.search("q", [1.0, 0, 0, 0], filters=filters)


def test_an_agent_or_run_filter_without_a_user_spans_no_user(open_store):
    store = open_store(keyword_search=True)
    rows = {
        "mine": {"user_id": "alice", "agent_id": "planner", "run_id": "r1", "data": "alice plan"},
        "theirs": {"user_id": "bob", "agent_id": "planner", "run_id": "r1", "data": "bob plan"},
        "shared": {"agent_id": "planner", "run_id": "r1", "data": "planner plan"},
        "null": {"user_id": None, "agent_id": "planner", "data": "null owner plan"},
    }
    ids = {name: new_id() for name in rows}
    store.insert([[1.0, 0, 0, 0]] * 4, list(rows.values()), list(ids.values()))
    names = {v: k for k, v in ids.items()}

    for scope, expected in [
        ({"agent_id": "planner"}, {"shared", "null"}),
        ({"run_id": "r1"}, {"shared"}),
        ({"agent_id": "planner", "run_id": "r1"}, {"shared"}),
        ({"agent_id": "planner", "data": {"contains": "plan"}}, {"shared", "null"}),
        ({"user_id": "alice", "agent_id": "planner"}, {"mine"}),
        ({"user_id": "bob"}, {"theirs"}),
    ]:
        assert {names[p.id] for p in store.list(scope)[0]} == expected, scope
        assert store.count(scope) == len(expected), scope
        assert {names[h.id] for h in store.search("q", [1.0, 0, 0, 0], 10, scope)} == expected
        hits = store.keyword_search("plan", 10, scope) or []
        assert {names[h.id] for h in hits} == expected, scope
    # a filter with no identity key at all is not a scope (the engine never sends one)
    assert store.count({"data": {"contains": "plan"}}) == 4
    assert store.facet_counts("agent_id", 10) == {"planner": 4}
    assert store.facet_counts("user_id", 10) == {"alice": 1, "bob": 1}


def test_payload_only_update_merges_and_keeps_vector(open_store):
    store = open_store(keyword_search=True)
    point = new_id()
    store.insert([[1.0, 0, 0, 0]], [{"data": "pizza lover", "user_id": "a"}], [point])

    store.update(point, payload={"data": "sushi lover", "mood": "hungry"})

    assert store.get(point).payload == {"data": "sushi lover", "user_id": "a", "mood": "hungry"}
    assert store.search("q", [1.0, 0, 0, 0], top_k=1)[0].score == pytest.approx(1.0)
    # As in mem0's Qdrant store, the BM25 vector is only refreshed by a full update.
    assert [h.id for h in store.keyword_search("pizza")] == [point]


def test_vector_only_update_keeps_payload(store):
    point = new_id()
    store.insert([[1.0, 0, 0, 0]], [{"data": "x"}], [point])

    store.update(point, vector=[0, 1.0, 0, 0])

    assert store.get(point).payload == {"data": "x"}
    assert store.search("q", [0, 1.0, 0, 0], top_k=1)[0].score == pytest.approx(1.0)


def test_full_update_replaces_vector_payload_and_bm25(open_store):
    store = open_store(keyword_search=True)
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


def test_delete_then_get_returns_none(store):
    point, kept = new_id(), new_id()
    store.insert([[1.0, 0, 0, 0]] * 2, [{"data": "a"}, {"data": "b"}], [point, kept])

    store.delete(point)
    store.delete(new_id())  # unknown ids are a no-op

    assert store.get(point) is None
    assert store.get(kept).id == kept
    assert store.count() == 1


def test_get_unknown_or_malformed_id_returns_none(store):
    assert store.get(new_id()) is None
    assert store.get("not-a-uuid") is None


def test_get_returns_id_payload_and_no_score(store):
    point = new_id()
    store.insert([[1.0, 0, 0, 0]], [{"data": "a", "user_id": "u"}], [point])

    record = store.get(point)

    assert (record.id, record.score, record.payload) == (point, None, {"data": "a", "user_id": "u"})
    assert store.get(point.upper()).id == point


def test_list_pages_like_qdrant_scroll(store):
    ids = [new_id() for _ in range(5)]
    store.insert([[1.0, 0, 0, 0]] * 5, [{"data": str(i)} for i in range(5)], ids)

    points, next_offset = store.list(top_k=3)
    everything, end = store.list()

    assert isinstance(points, list)
    assert len(points) == 3
    assert isinstance(next_offset, str)
    assert next_offset in set(ids) - {p.id for p in points}  # first id of the next page
    assert {p.id for p in everything} == set(ids)
    assert end is None
    assert store.list({"user_id": "nobody"}) == ([], None)


def test_reopen_after_close_keeps_every_write(open_store):
    store = open_store()
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

    reopened = open_store()

    assert reopened.count() == 2
    assert reopened.get(kept).payload == {"data": "k"}
    assert reopened.get(updated).payload == {"data": "u2"}
    assert reopened.get(deleted) is None


def test_unclosed_process_crash_loses_no_acknowledged_write(tmp_path):
    """SIGKILL right after the writes return, with no flush or close: the WAL replays them."""
    ids = [new_id() for _ in range(50)]
    script = textwrap.dedent(
        f"""
        import os, signal
        from memorystore.service.edge_store import EdgeVectorStore
        store = EdgeVectorStore("memories", {DIMS}, {str(tmp_path)!r})
        ids = {ids!r}
        for i in ids:
            store.insert([[1.0, 0, 0, 0]], [{{"data": "x"}}], [i])
        store.update(ids[0], payload={{"data": "patched"}})
        store.delete(ids[1])
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = os.environ | {"PYTHONSAFEPATH": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, timeout=120
    )
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()

    store = EdgeVectorStore("memories", DIMS, str(tmp_path))
    try:
        assert store.count() == 49
        assert store.get(ids[0]).payload == {"data": "patched"}
        assert store.get(ids[1]) is None
    finally:
        store.close()


def test_reopen_with_other_dimension_raises_naming_both_sizes(open_store, tmp_path):
    open_store().close()

    with pytest.raises(
        ValueError, match=r"memories stores 4-dimensional.*embedding_model_dims is 8"
    ) as err:
        open_store(embedding_model_dims=8)
    assert str(tmp_path / "memories") in str(err.value)


def test_keyword_search_is_off_by_default(store):
    store.insert([[1.0, 0, 0, 0]], [{"data": "pizza"}], [new_id()])

    assert store.keyword_search("pizza") is None


def test_keyword_search_ranks_by_bm25(open_store):
    store = open_store(keyword_search=True)
    rows = {
        "both": {"data": "pizza lover", "text_lemmatized": "pizza pizza napoli", "user_id": "a"},
        "one": {"data": "likes pizza and pasta and wine and cheese", "user_id": "a"},
        "none": {"data": "sushi every friday", "user_id": "a"},
        "other_user": {"data": "pizza pizza", "user_id": "b"},
        "empty": {"data": "", "user_id": "a"},
    }
    ids = {name: new_id() for name in rows}
    store.insert([[1.0, 0, 0, 0]] * len(rows), list(rows.values()), list(ids.values()))

    hits = store.keyword_search("pizza napoli", top_k=10, filters={"user_id": "a"})

    assert [h.id for h in hits] == [ids["both"], ids["one"]]
    assert hits[0].score > hits[1].score > 0
    assert hits[0].payload["data"] == "pizza lover"
    assert store.keyword_search("the of and") == []


def test_concurrent_inserts_lose_nothing_while_searches_run(store):
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


def test_col_info_list_cols_reset_and_delete_col(open_store, tmp_path):
    store = open_store()
    open_store(collection_name="other").insert([[1.0, 0, 0, 0]], [{}], [new_id()])
    store.insert([[1.0, 0, 0, 0]] * 2, [{}, {}], [new_id(), new_id()])

    assert store.col_info()["points_count"] == 2
    assert store.col_info()["path"] == str(tmp_path / "memories")
    assert store.list_cols() == ["memories", "other"]

    store.reset()
    assert store.count() == 0
    store.insert([[1.0, 0, 0, 0]], [{}], [new_id()])
    assert store.count() == 1

    store.delete_col()
    assert store.list_cols() == ["other"]
    with pytest.raises(RuntimeError, match="closed"):
        store.count()


def test_closed_store_refuses_use(store):
    store.close()

    with pytest.raises(RuntimeError, match="closed"):
        store.insert([[1.0, 0, 0, 0]], [{}], [new_id()])
    with pytest.raises(RuntimeError, match="closed"):
        store.search("q", [1.0, 0, 0, 0])


def test_points_pages_through_every_point_with_its_vector_and_payload(store):
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
