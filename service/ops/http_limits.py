"""uvicorn's HTTP/1.1 protocol (httptools) with a bound on the request head.

Why: httptools reads a request line and headers of any size into memory before the app is
called, so no ASGI layer can bound them (measured before this class: one 20 MB header
was read and answered 200, 200,000 headers took the process's RSS up by 43 MB, all
before the key was checked). uvicorn bounds the head only on its h11 protocol
(`h11_max_incomplete_event_size`), which is pure Python and slower on every request.
This subclass counts the bytes that arrive while a request's head is incomplete and,
past `limits.maxHeaderBytes`, answers 431 and closes the connection: what is held stays
within the limit plus one read from the socket.

A head that arrives within one read is measured when its headers are complete (uvicorn
holds them in `url` and `headers`), before the app runs. It uses the parser callbacks
(httptools' names: on_message_begin, on_headers_complete), `data_received`, and uvicorn's
`send_400_response`, through which uvicorn answers a failed callback, to answer 431
instead; `tests/unit/service/ops/test_http_limits.py` runs it on a real socket, so an
uvicorn upgrade that moves any of them fails there.
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from memorystore.config import Limits

__all__ = ["BoundedHttpToolsProtocol", "bounded_protocol", "server_options"]


class _HeadTooLarge(Exception):
    pass


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol refusing a request head over `max_head_bytes` with 431."""

    max_head_bytes = 32 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes: int | None = None  # counting from a message's start to its headers
        self._refused = False

    def on_message_begin(self) -> None:
        self._head_bytes = 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        # a head that arrived within one read is measured whole here, before the app runs
        self._head_bytes = None
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self.max_head_bytes:
            self._refused = True
            raise _HeadTooLarge  # the parser stops; uvicorn answers through send_400_response
        super().on_headers_complete()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # a head still incomplete after this read is counted, so one that never ends is
        # refused once it passes the limit, holding no more than the limit and one read
        if self._head_bytes is None or self.transport.is_closing():
            return
        self._head_bytes += len(data)
        if self._head_bytes > self.max_head_bytes:
            self._refuse_head()

    def send_400_response(self, msg: str) -> None:
        if self._refused:
            self._refuse_head()
        else:
            super().send_400_response(msg)

    def _refuse_head(self) -> None:
        self.logger.warning("Request head over %d bytes refused (431).", self.max_head_bytes)
        body = json.dumps(
            {
                "detail": "request line and headers exceed limits.maxHeaderBytes "
                f"({self.max_head_bytes} bytes)"
            }
        ).encode()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()
        self._head_bytes = None


def bounded_protocol(max_head_bytes: int) -> type[BoundedHttpToolsProtocol]:
    """The protocol class for uvicorn's `http` option, with this bound."""
    return type(
        "BoundedHttpToolsProtocol",
        (BoundedHttpToolsProtocol,),
        {"max_head_bytes": max_head_bytes},
    )


def server_options(limits: Limits) -> dict[str, Any]:
    """What `uvicorn.run` / `uvicorn.Config` take to serve within `limits`: the bounded
    protocol (and the same bound for h11, should a caller choose it)."""
    return {
        "http": bounded_protocol(limits.max_header_bytes),
        "h11_max_incomplete_event_size": limits.max_header_bytes,
    }
