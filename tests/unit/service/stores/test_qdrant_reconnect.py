"""The Qdrant store's client guard: a dropped connection (a Qdrant pod gone behind its
Service) or the server's own failure (a 5xx, as a cluster answers while a copy changes state)
is retried a bounded number of times, everything else is answered at once.

The client under the guard is a scripted object, not a server: what is checked is the guard's
decision for each error qdrant-client raises (its own exception wrapping httpx's, a gRPC
status), which a real server cannot be made to produce on demand. The real server's
restarts and lost peers are tests/integration/test_qdrant_faults.py and the real-node walk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memorystore.service.stores.protocol import StoreUnavailable
from memorystore.service.stores.qdrant_guard import (
    RECONNECT_PAUSES_S,
    Guarded,
    dropped,
    server_failed,
)

REQUEST = httpx.Request("POST", "https://qdrant:6333/collections/m/points/search")


class _Status(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


DROPS = [
    ResponseHandlingException(httpx.ConnectError("refused", request=REQUEST)),
    ResponseHandlingException(httpx.RemoteProtocolError("server disconnected", request=REQUEST)),
    ResponseHandlingException(httpx.ReadError("connection reset", request=REQUEST)),
    ResponseHandlingException(httpx.WriteError("broken pipe", request=REQUEST)),
    ConnectionResetError(104, "Connection reset by peer"),
    _Status(grpc.StatusCode.UNAVAILABLE),
]
NOT_DROPS = [
    ResponseHandlingException(httpx.ReadTimeout("timed out", request=REQUEST)),
    ResponseHandlingException(httpx.ConnectTimeout("timed out", request=REQUEST)),
    _Status(grpc.StatusCode.DEADLINE_EXCEEDED),
    OSError(28, "No space left on device"),
]


class Scripted:
    """A client whose `search` raises the scripted errors, then answers."""

    def __init__(self, errors: list[BaseException]) -> None:
        self.errors: Iterator[BaseException] = iter(errors)
        self.calls = 0

    def search(self, **kwargs: Any) -> str:
        self.calls += 1
        error = next(self.errors, None)
        if error is not None:
            raise error
        return "answered"


def _unavailable(exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"cannot be reached: {type(exc).__name__}")


def guarded(errors: list[BaseException]) -> tuple[Any, Scripted]:
    client = Scripted(errors)
    return Guarded(client, _unavailable, pauses=(0.0,) * len(RECONNECT_PAUSES_S)), client


@pytest.mark.parametrize("error", DROPS, ids=lambda e: type(e).__name__)
def test_a_dropped_connection_is_retried_and_the_call_answers(error):
    assert dropped(error)
    guard, client = guarded([error] * len(RECONNECT_PAUSES_S))
    assert guard.search(collection_name="m") == "answered"
    assert client.calls == len(RECONNECT_PAUSES_S) + 1


@pytest.mark.parametrize("error", NOT_DROPS, ids=lambda e: type(e).__name__)
def test_a_timeout_or_local_error_is_a_503_at_once(error):
    assert not dropped(error)
    guard, client = guarded([error])
    with pytest.raises(StoreUnavailable, match=type(error).__name__):
        guard.search(collection_name="m")
    assert client.calls == 1


@given(st.lists(st.sampled_from(DROPS), min_size=len(RECONNECT_PAUSES_S) + 1, max_size=8))
def test_retries_are_bounded_then_the_call_is_a_503(errors):
    guard, client = guarded(errors)
    with pytest.raises(StoreUnavailable):
        guard.search(collection_name="m")
    assert client.calls == len(RECONNECT_PAUSES_S) + 1


def test_an_answer_from_the_server_is_never_retried():
    """A refusal by the server itself (here a 400) is the request's, not the network's."""
    refusal = UnexpectedResponse(400, "Bad Request", b'{"status":{"error":"bad"}}', httpx.Headers())
    guard, client = guarded([refusal])
    with pytest.raises(UnexpectedResponse):
        guard.search(collection_name="m")
    assert client.calls == 1


def _answered(status: int, error: str) -> UnexpectedResponse:
    body = json.dumps({"status": {"error": error}}).encode()
    return UnexpectedResponse(status, "", body, httpx.Headers())


# what Qdrant 1.18.3 answered in tests/integration/test_qdrant_faults.py while a copy rejoined
SERVER_FAILURES = [
    _answered(500, "1 of 1 read operations failed: Local shard 1 not found"),
    _answered(503, "The replica set for shard 3 does not have enough active replicas"),
    _answered(502, "Bad Gateway"),
]


@pytest.mark.parametrize("failure", SERVER_FAILURES, ids=lambda e: str(e.status_code))
def test_the_servers_own_failure_is_retried_and_the_call_answers(failure):
    assert server_failed(failure) and not dropped(failure)
    guard, client = guarded([failure] * len(RECONNECT_PAUSES_S))
    assert guard.search(collection_name="m") == "answered"
    assert client.calls == len(RECONNECT_PAUSES_S) + 1


@given(
    st.lists(
        st.sampled_from(SERVER_FAILURES + DROPS), min_size=len(RECONNECT_PAUSES_S) + 1, max_size=8
    )
)
def test_a_server_that_keeps_failing_is_a_503_never_its_500(errors):
    guard, client = guarded(errors)
    with pytest.raises(StoreUnavailable) as raised:
        guard.search(collection_name="m")
    assert client.calls == len(RECONNECT_PAUSES_S) + 1
    assert "Local shard" not in str(raised.value)  # the server's text is logged, not answered


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_a_refusal_is_not_a_server_failure(status):
    assert not server_failed(_answered(status, "refused"))
