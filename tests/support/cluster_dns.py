"""Cluster DNS where there is no cluster network: a Service's name resolves to a loopback address.

The memory service runs here as a local process or thread, but agents must still reach it by
the name its certificate carries (`<svc>.<ns>.svc`, port 8765 as in the endpoint); connecting
to 127.0.0.1 instead would skip hostname verification, half of what TLS is for. Each name
gets its own address in 127.0.0.0/8 (all loopback on Linux), where the service listens on the
Service's port. `cluster_dns` patches `socket.getaddrinfo` — which httpx (via anyio and
asyncio), requests and `socket` all call — for exactly the given names; every other name
resolves as usual.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def loopback_address(port: int) -> str:
    """A random 127.x.y.z where `port` is free (so concurrent test runs do not collide)."""
    for _ in range(100):
        address = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
        with socket.socket() as probe:
            try:
                probe.bind((address, port))
            except OSError:
                continue
            return address
    raise RuntimeError(f"no loopback address with port {port} free")


@contextmanager
def cluster_dns(names: dict[str, str]) -> Iterator[None]:
    """`{host: address}`: the host resolves to that (IPv4 loopback) address only."""
    real = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        address = names.get(name)
        if address is None:
            return real(host, port, *args, **kwargs)
        return real(address, port, socket.AF_INET, socket.SOCK_STREAM)

    socket.getaddrinfo = resolve
    try:
        yield
    finally:
        socket.getaddrinfo = real
