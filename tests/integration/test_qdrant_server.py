"""QdrantServerStore (a Qdrant server's store: mem0's, with the service's additions) on a real
Qdrant server (the vendored binary, memorystore_dev.qdrant): what only this store does, and
which API key each of its calls carries after a rotation (through a recording proxy). What
every store does is tests/integration/test_store_contract.py; the mem0 internals it overrides
are checked against mem0 in tests/unit/service/engine/test_mem0_seam.py."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memorystore.service.stores import qdrant_server as qdrant_server_module
from memorystore.service.stores.protocol import VectorStore
from memorystore.service.stores.qdrant_server import QdrantServerStore
from memorystore_dev.qdrant import QdrantServer
from support.qdrant_recorder import KeyRecorder

StoreFactory = Callable[..., QdrantServerStore]


@pytest.fixture
def new_store(qdrant_server: QdrantServer) -> Iterator[StoreFactory]:
    """Factory of 4-dimensional stores on the module's server, each in a fresh collection,
    with hybrid (keyword) search on; closed at the end of the test."""
    made: list[QdrantServerStore] = []

    def factory(**options: Any) -> QdrantServerStore:
        store = QdrantServerStore(
            collection_name=f"t_{uuid.uuid4().hex[:12]}",
            embedding_model_dims=4,
            url=qdrant_server.url,
            api_key=qdrant_server.api_key,
            **({"keyword_search": True} | options),
        )
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()


@pytest.fixture
def server_store(new_store: StoreFactory) -> QdrantServerStore:
    return new_store()


IDS = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(3)]


def three_points(new_store: StoreFactory, texts: list[str]) -> QdrantServerStore:
    """Three points (users a, a, b) with these BM25 texts."""
    store = new_store()
    store.insert(
        vectors=[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]],
        ids=IDS,
        payloads=[
            {"user_id": user, "data": data, "text_lemmatized": text}
            for user, data, text in zip("aab", "xyz", texts, strict=True)
        ],
    )
    return store


def test_server_store_counts_with_filters(new_store):
    store = three_points(new_store, ["x", "y", "z"])
    assert store.count(None) == 3
    assert store.count({"user_id": "a"}) == 2


def test_server_store_keyword_search_and_cosine_work_offline(new_store):
    # mem0 would encode BM25 with fastembed (a model download); ours uses qdrant-edge's encoder.
    store = three_points(
        new_store,
        ["(May 2023) Mel: went hiking", "Caroline: adoption agencies", "Caroline: hiking again"],
    )
    hits = store.keyword_search("hiking", top_k=5, filters={"user_id": "a"})
    assert [str(h.id) for h in hits] == [IDS[0]], "BM25 finds the word, within the scope"
    scores = store.cosine([1, 0, 0, 0], IDS, {"user_id": "a"})
    assert scores == pytest.approx({IDS[0]: 1.0, IDS[1]: 0.0})


def test_server_store_keeps_the_scope_rules(new_store):
    """The server store obeys the identity rules of every store (stores/filters.py)."""
    store = new_store()
    rows = [
        {"user_id": "alice", "agent_id": "planner", "data": "alice plan"},
        {"user_id": "*", "agent_id": "planner", "data": "star plan"},
        {"agent_id": "planner", "data": "planner plan"},
    ]
    store.insert(vectors=[[1, 0, 0, 0]] * 3, ids=IDS, payloads=rows)
    data = lambda points: {p.payload["data"] for p in points}  # noqa: E731

    # an agent-only filter matches only memories without a user, on every read path
    assert data(store.list({"agent_id": "planner"})[0]) == {"planner plan"}
    assert store.count({"agent_id": "planner"}) == 1
    assert data(store.search("q", [1, 0, 0, 0], 10, {"agent_id": "planner"})) == {"planner plan"}
    assert data(store.keyword_search("plan", 10, {"agent_id": "planner"})) == {"planner plan"}
    assert store.cosine([1, 0, 0, 0], IDS, {"agent_id": "planner"}) == {IDS[2]: 1.0}
    # '*' is a literal id; metadata keys keep mem0's wildcard
    assert data(store.list({"user_id": "*"})[0]) == {"star plan"}
    assert store.count({"user_id": "alice", "data": "*"}) == 1
    for bad, message in [
        ({"user_id": {"ne": "alice"}}, "'user_id' must be one literal id"),
        ({"user_id": ["alice", "*"]}, "'user_id' must be one literal id"),
        ({"agent_id": "planner", "NOT": [{"user_id": "alice"}]}, "only accepted at the top"),
        ({"user_id": "alice", "OR": [{"user_id": "*"}]}, "only accepted at the top"),
    ]:
        with pytest.raises(ValueError, match=message):
            store.count(bad)
    assert store.facet_counts("agent_id", 10) == {"planner": 3}
    assert store.facet_counts("user_id", 10) == {"alice": 1, "*": 1}


def test_the_server_store_tokenises_chinese_and_reindexes_in_place(server_store: QdrantServerStore):
    """Hybrid search on a Qdrant server: the same multilingual terms as the embedded engine,
    and `reindex` re-encodes them from the payload while keeping the dense vector."""
    memory_id = IDS[0]
    payload = {"data": "我住在杭州", "user_id": "u"}
    server_store.insert(vectors=[[1, 0, 0, 0]], ids=[memory_id], payloads=[payload])
    found = server_store.keyword_search("杭州", top_k=5, filters={"user_id": "u"})
    assert [str(p.id) for p in found] == [memory_id]

    server_store.reindex(memory_id, {**payload, "text_lemmatized": "用matplotlib画图"})
    assert server_store.keyword_search("杭州", top_k=5, filters={"user_id": "u"}) == []
    found = server_store.keyword_search("matplotlib", top_k=5, filters={"user_id": "u"})
    assert [str(p.id) for p in found] == [memory_id]
    name = server_store.collection_name
    (point,) = server_store.client.retrieve(name, ids=[memory_id], with_vectors=True)
    assert point.vector[""] == pytest.approx([1, 0, 0, 0])
    server_store.reindex(IDS[1], payload)  # an id with no point: nothing is created
    assert server_store.get(IDS[1]) is None


def test_the_word_tokenizer_on_a_server_keeps_a_cjk_run_whole(new_store):
    store = new_store(tokenizer="word")
    store.insert(vectors=[[1, 0, 0, 0]], ids=[IDS[0]], payloads=[{"data": "我住在杭州"}])
    assert store.keyword_search("杭州", top_k=5) == []
    assert [str(p.id) for p in store.keyword_search("我住在杭州", top_k=5)] == [IDS[0]]


def test_a_server_store_lists_every_point_with_its_vector_for_backups(new_store):
    """QdrantServerStore.points pages qdrant-client's scroll (with vectors) to the end."""
    store = new_store()
    ids = [str(uuid.uuid4()) for _ in range(5)]
    store.insert(
        vectors=[[1, i, 0, 0] for i in range(5)],
        ids=ids,
        payloads=[{"data": f"m{i}", "user_id": "u"} for i in range(5)],
    )
    seen = {pid: (vec, payload) for pid, vec, payload in store.points(batch=2)}
    assert set(seen) == set(ids)
    for i, pid in enumerate(ids):
        vec, payload = seen[pid]
        norm = (1 + i * i) ** 0.5
        assert vec == pytest.approx([1 / norm, i / norm, 0, 0], abs=1e-6)
        assert (payload["data"], payload["user_id"]) == (f"m{i}", "u")


def test_it_is_a_vector_store_and_create_col_needs_no_arguments(server_store):
    """The engine's `prepare` calls `create_col()` on whichever store it has: here it leaves
    the existing collection as it is, and re-creates one that is gone."""
    assert isinstance(server_store, VectorStore)
    server_store.insert(vectors=[[1, 0, 0, 0]], ids=IDS[:1], payloads=[{"data": "kept"}])
    server_store.create_col()
    assert server_store.count() == 1
    server_store.client.delete_collection(server_store.collection_name)
    server_store.create_col()
    assert server_store.count() == 0
    params = server_store.client.get_collection(server_store.collection_name).config.params
    assert params.vectors.size == 4


def test_a_store_built_on_a_given_client_has_no_key_to_change(server_store):
    given = QdrantServerStore(
        collection_name=server_store.collection_name,
        embedding_model_dims=4,
        client=server_store.client,
    )
    with pytest.raises(ValueError, match="built on a given client"):
        given.use_api_key("qk-new")


# --- a rotated API key (ops/secret_files.py hands it over) -----------------------------------
# Through a recording proxy in front of the module's server (support/qdrant_recorder.py): what
# is checked is the `api-key` header each call sends, which the server does not report.
on_the_recorder = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


def _store_at(qdrant: KeyRecorder, api_key: str, **options: object) -> QdrantServerStore:
    return QdrantServerStore(
        collection_name="m", embedding_model_dims=4, url=qdrant.url, api_key=api_key, **options
    )


@on_the_recorder
def test_a_new_api_key_is_sent_from_the_next_call_on(qdrant_server: QdrantServer):
    with KeyRecorder(qdrant_server) as qdrant:
        store = _store_at(qdrant, "qk-old-1")
        try:
            assert set(qdrant.keys("/collections/m")) == {"qk-old-1"}, "created with the key"
            store.count()
            store.use_api_key("qk-new-2")
            store.count({"user_id": "alice"})
            store.create_col()
            assert qdrant.keys("/points/count") == ["qk-old-1", "qk-new-2"]
            assert qdrant.keys("/collections/m")[-1] == "qk-new-2"
        finally:
            store.close()


@on_the_recorder
def test_the_key_change_holds_through_a_collection_created_with_a_layout(
    qdrant_server: QdrantServer,
):
    """create_col wraps the client for one call: a key changed meanwhile is not undone."""
    with KeyRecorder(qdrant_server) as qdrant:
        store = _store_at(qdrant, "qk-old-1", shard_number=2)
        try:
            store.use_api_key("qk-new-2")
            store.create_col()
            store.count()
            assert qdrant.keys("/points/count") == ["qk-new-2"]
        finally:
            store.close()


@on_the_recorder
def test_calls_during_a_rotation_all_succeed_and_the_replaced_client_is_closed_later(
    qdrant_server: QdrantServer, monkeypatch: pytest.MonkeyPatch
):
    grace = 5.0
    monkeypatch.setattr(qdrant_server_module, "RETIRED_CLIENT_GRACE_S", grace)
    closed: list[object] = []
    with KeyRecorder(qdrant_server) as qdrant:
        store = _store_at(qdrant, "qk-0")
        first = store.client
        monkeypatch.setattr(first, "close", lambda: closed.append(first))
        stop = threading.Event()
        errors: list[BaseException] = []

        def counting() -> None:
            while not stop.is_set():
                try:
                    store.count()
                except BaseException as exc:  # collected for the assertion below
                    errors.append(exc)

        workers = [threading.Thread(target=counting) for _ in range(4)]
        for worker in workers:
            worker.start()
        rotated = time.monotonic()
        try:
            for n in range(1, 6):
                store.use_api_key(f"qk-{n}")
                time.sleep(0.02)
        finally:
            stop.set()
            for worker in workers:
                worker.join()
        assert errors == [], "no call failed across five key changes"
        # within its grace period the first client is open (a loaded machine may take longer
        # than the grace to get here: CI saw it, and then the close below is what is left)
        if time.monotonic() - rotated < grace - 0.5:
            assert closed == [], "the replaced client stays open for the calls running on it"
        deadline = time.monotonic() + 15
        while not closed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert closed == [first], "closed once its grace period is over"
        sent = qdrant.keys("/points/count")
        assert sent[-1] == "qk-5" and set(sent) <= {f"qk-{n}" for n in range(6)}
        store.count()
        assert qdrant.keys("/points/count")[-1] == "qk-5"
        store.close()


@on_the_recorder
def test_close_closes_the_replaced_clients_still_in_their_grace_period(qdrant_server: QdrantServer):
    with KeyRecorder(qdrant_server) as qdrant:
        store = _store_at(qdrant, "qk-0")
        clients = [store.client]
        for n in (1, 2):
            store.use_api_key(f"qk-{n}")
            clients.append(store.client)
        closed: list[object] = []
        for client in clients:
            original = client.close
            client.close = lambda c=client, o=original: (closed.append(c), o())  # type: ignore[method-assign]
        store.close()
        assert sorted(map(id, closed)) == sorted(map(id, clients)), "every client, once"
