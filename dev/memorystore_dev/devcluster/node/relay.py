"""A TCP relay from the pod bridge to the API server on loopback.

Why: the API server of the local control plane listens on 127.0.0.1 only (nothing on the
machine's own network can reach it, and kubectl and the tests keep using loopback). Pods reach
it through the `kubernetes` Service, whose endpoint is the bridge gateway address; this relay
listens there and forwards each connection, bytes unchanged (TLS end to end), to loopback.

    python -m memorystore_dev.devcluster.node.relay LISTEN_HOST:PORT TARGET_HOST:PORT
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

__all__ = ["main"]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction until EOF, then half-close so the peer sees the end."""
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _serve(listen: tuple[str, int], target: tuple[str, int]) -> None:
    """Accept on `listen`, connect each client to `target`, copy both ways."""

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            upstream_r, upstream_w = await asyncio.wait_for(asyncio.open_connection(*target), 10)
        except (OSError, TimeoutError):
            client_w.close()
            return
        try:
            await asyncio.gather(_pipe(client_r, upstream_w), _pipe(upstream_r, client_w))
        finally:
            for w in (client_w, upstream_w):
                with contextlib.suppress(Exception):
                    w.close()

    server = await asyncio.start_server(handle, *listen, reuse_address=True)
    print(f"relaying {listen[0]}:{listen[1]} -> {target[0]}:{target[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def _addr(text: str) -> tuple[str, int]:
    """`HOST:PORT` → (host, port); a bad value names itself."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SystemExit(f"not HOST:PORT: {text!r}")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    """Run the relay until SIGTERM."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    asyncio.run(_serve(_addr(args[0]), _addr(args[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
