"""The Qdrant server's client, guarded: what the managed tier does when its server does not
answer, hangs up, or answers with its own failure.

qdrant-client raises the transport's errors as they come; the service answers a request that
meets an absent or failing server 503 with Retry-After, never 500. A dropped connection (a
Qdrant pod gone behind its Service: the next connection reaches another peer) and a 5xx (a
cluster while a copy changes state) are retried a bounded number of times first.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import httpx
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memorystore.service.stores.protocol import StoreUnavailable

__all__ = ["DROPPED", "RECONNECT_PAUSES_S", "UNREACHABLE", "Guarded", "dropped", "server_failed"]

log = logging.getLogger("memorystore.service")
# what qdrant-client raises when the server does not answer (REST: httpx's errors wrapped;
# gRPC: an RpcError): the server is away, not the request wrong
UNREACHABLE: tuple[type[BaseException], ...] = (
    ResponseHandlingException,
    httpx.TransportError,
    grpc.RpcError,
    OSError,
)
# A connection that dropped or was refused, as when a Qdrant pod goes away behind its Service
# (the next connection reaches another peer): retried after these pauses, then a 503. The
# calls are safe to repeat: upserts and deletes name their point ids, reads change nothing,
# and a collection create repeated after a lost answer is refused as existing (the next
# create_col finds it). A timeout is not retried: the server is there.
RECONNECT_PAUSES_S = (0.1, 0.3, 0.9)
DROPPED: tuple[type[BaseException], ...] = (
    httpx.ConnectError,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
    ConnectionError,
)


def server_failed(exc: BaseException) -> bool:
    """The server answered, but with its own failure (a 5xx), not a refusal of the request.

    A cluster answers so while its replicas change state: measured on Qdrant 1.18.3, a search
    reaching a peer as a recovered copy is switched back in got 500 "1 of 1 read operations
    failed: Local shard 1 not found" for a few milliseconds (tests/integration/
    test_qdrant_faults.py); a shard without enough active copies answers 503. Retried as a
    dropped connection is, then a 503 of ours."""
    return isinstance(exc, UnexpectedResponse) and (exc.status_code or 0) >= 500


def dropped(exc: BaseException) -> bool:
    """The server hung up or refused the connection (qdrant-client wraps httpx's error)."""
    cause = exc.source if isinstance(exc, ResponseHandlingException) else exc
    if isinstance(cause, grpc.RpcError):  # a call's error has a status code; others do not
        code = getattr(cause, "code", None)
        return callable(code) and code() == grpc.StatusCode.UNAVAILABLE
    return isinstance(cause, DROPPED)


class Guarded:
    """A qdrant-client client whose calls are retried when the connection drops or the server
    answers with its own failure (RECONNECT_PAUSES_S), and raise StoreUnavailable instead of
    the transport's errors when the server does not answer or keeps failing; a refusal of the
    request (4xx) and everything else is the client's own."""

    def __init__(
        self,
        client: Any,
        unavailable: Callable[[BaseException], StoreUnavailable],
        pauses: Sequence[float] = RECONNECT_PAUSES_S,
    ):
        self._client = client
        self._unavailable = unavailable
        self._pauses = pauses

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            for pause in (*self._pauses, None):
                try:
                    return attribute(*args, **kwargs)
                except UNREACHABLE as exc:
                    if pause is None or not dropped(exc):
                        raise self._unavailable(exc) from None
                    log.info("Qdrant %s: %s; retrying in %.1f s", name, type(exc).__name__, pause)
                except UnexpectedResponse as exc:
                    if not server_failed(exc):
                        raise  # the request's own fault: the caller answers it
                    # the server's reason, for the operator's log (never a secret of ours)
                    reason = exc.content.decode("utf-8", "replace")[:300]
                    if pause is None:
                        log.warning("Qdrant %s answered %d: %s", name, exc.status_code, reason)
                        raise self._unavailable(exc) from None
                    log.info("Qdrant %s answered %d: %s; retrying in %.1f s",
                             name, exc.status_code, reason, pause)  # fmt: skip
                time.sleep(pause)
            raise AssertionError("unreachable")  # pragma: no cover

        setattr(self, name, call)  # wrapped once: later look-ups find it without this
        return call
