"""QdrantServerStore's key rotation (ops/secret_files.py hands a rotated key over), on a
loopback stand-in of the server's REST API (support/qdrant_standin.py): what is checked is the
`api-key` header each call sends, which a real server does not report. Everything else the
store does runs on a real Qdrant server: tests/integration/test_qdrant_server.py and
tests/integration/test_store_contract.py."""

from __future__ import annotations

import threading
import time

import pytest

from memorystore.service.stores import qdrant_server
from memorystore.service.stores.qdrant_server import QdrantServerStore
from support.qdrant_standin import QdrantStandIn

# --- a rotated API key (ops/secret_files.py hands it over) -----------------------------------
# On a loopback stand-in of the server's REST API (support/qdrant_standin.py): what is checked
# is the `api-key` header each call sends. qdrant-client probes the server's version in the
# background and warns when the stand-in has stopped before it answered.
on_the_stand_in = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection",
    "ignore:Failed to obtain server version",
)


def _store_at(qdrant: QdrantStandIn, api_key: str, **options: object) -> QdrantServerStore:
    return QdrantServerStore(
        collection_name="m", embedding_model_dims=4, url=qdrant.url, api_key=api_key, **options
    )


@on_the_stand_in
def test_a_new_api_key_is_sent_from_the_next_call_on():
    with QdrantStandIn() as qdrant:
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


@on_the_stand_in
def test_the_key_change_holds_through_a_collection_created_with_a_layout():
    """create_col wraps the client for one call: a key changed meanwhile is not undone."""
    with QdrantStandIn() as qdrant:
        store = _store_at(qdrant, "qk-old-1", shard_number=2)
        try:
            store.use_api_key("qk-new-2")
            store.create_col()
            store.count()
            assert qdrant.keys("/points/count") == ["qk-new-2"]
        finally:
            store.close()


@on_the_stand_in
def test_calls_during_a_rotation_all_succeed_and_the_replaced_client_is_closed_later(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(qdrant_server, "RETIRED_CLIENT_GRACE_S", 2.0)
    closed: list[object] = []
    with QdrantStandIn() as qdrant:
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
        try:
            for n in range(1, 6):
                store.use_api_key(f"qk-{n}")
                time.sleep(0.02)
        finally:
            stop.set()
            for worker in workers:
                worker.join()
        assert errors == [], "no call failed across five key changes"
        assert closed == [], "the replaced client stays open for the calls running on it"
        deadline = time.monotonic() + 10
        while not closed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert closed == [first], "closed once its grace period is over"
        sent = qdrant.keys("/points/count")
        assert sent[-1] == "qk-5" and set(sent) <= {f"qk-{n}" for n in range(6)}
        store.count()
        assert qdrant.keys("/points/count")[-1] == "qk-5"
        store.close()


@on_the_stand_in
def test_close_closes_the_replaced_clients_still_in_their_grace_period():
    with QdrantStandIn() as qdrant:
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
