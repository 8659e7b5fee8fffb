"""The bounded HTTP protocol on a real socket: an oversized request head (one huge header,
thousands of small ones, a huge URL) is refused with 431 before it is held, while bodies,
keep-alive and pipelined requests are served as before."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from memorystore.config import Limits
from memorystore.service.ops.http_limits import bounded_protocol, server_options
from support.rss import MIB, rss_of

LIMIT = 8192


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with how many body bytes and headers it got."""
    if scope["type"] != "http":
        return
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    text = f"{size} {len(scope['headers'])}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": text})


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    config = uvicorn.Config(
        echo, host="127.0.0.1", port=0, log_level="error", http=bounded_protocol(LIMIT)
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.01)
    yield server.servers[0].sockets[0].getsockname()[:2]
    server.should_exit = True
    thread.join(timeout=30)


def exchange(address: tuple[str, int], data: bytes, responses: int = 1) -> list[bytes]:
    """Send `data` (tolerating a server that stops reading), return the responses read."""
    with socket.create_connection(address, timeout=30) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        got = b""
        while got.count(b"HTTP/1.1 ") < responses or not _complete(got):
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
    return [b"HTTP/1.1 " + part for part in got.split(b"HTTP/1.1 ")[1:]]


def _complete(got: bytes) -> bool:
    last = got.rsplit(b"HTTP/1.1 ", 1)[-1]
    head, sep, body = last.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return True


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def test_a_huge_header_is_refused_before_it_is_held(address):
    # built before the first reading: once an earlier test in this process freed a block
    # of this size, glibc serves the next one from its heap and keeps it resident, and the
    # reading would count the client's own 20 MB
    huge = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 20_000_000
    before = rss_of()
    (answer,) = exchange(address, huge)
    grown = rss_of() - before
    assert status(answer) == 431
    assert b'"request line and headers exceed limits.maxHeaderBytes (8192 bytes)"' in answer
    # the server held at most the limit and one read: the 20 MB never accumulated
    assert grown < 8 * MIB, grown / MIB


@pytest.mark.parametrize(
    "head",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(5000)),
        b"GET /?" + b"a" * 50_000 + b" HTTP/1.1\r\nHost: x\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nCookie: " + b"c=1; " * 4000 + b"\r\n",
    ],
    ids=["many headers", "long url", "long cookie"],
)
def test_every_oversized_head_is_431(address, head):
    (answer,) = exchange(address, head + b"\r\n")
    assert status(answer) == 431


def test_heads_within_the_limit_bodies_and_keep_alive_are_served(address):
    headers = b"".join(b"X-%d: %s\r\n" % (i, b"v" * 60) for i in range(100))  # ~7 KiB
    small = b"GET / HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"
    (answer,) = exchange(address, small)
    assert status(answer) == 200 and b"\r\n0 101\r\n" in answer
    # a body far over the head limit, sent in one write with its head, then a second
    # request on the same connection: neither is mistaken for a head
    body = b"z" * 1_000_000
    post = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    answers = exchange(address, post + small, responses=2)
    assert [status(a) for a in answers] == [200, 200]
    assert b"\r\n1000000 2\r\n" in answers[0] and b"\r\n0 101\r\n" in answers[1]


def test_the_service_options_carry_the_configured_limit():
    options = server_options(Limits(max_header_bytes=65536))
    assert options["http"].max_head_bytes == 65536
    assert options["h11_max_incomplete_event_size"] == 65536
    assert Limits().max_header_bytes == 32768
