"""An HTTP/1.1 proxy in front of the real memory service that breaks things on purpose.

The faults the agent side must survive happen on the network, so they are made there: the
service stays real, the proxy refuses connections, hangs, or loses the response to one
request after the service has handled it (the case idempotency keys exist for). It relays
request by request (Content-Length bodies, which is what the service sends), on its own
thread and event loop, so it works under any test's loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Literal

Mode = Literal["forward", "refuse", "hang"]


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.mode: Mode = "forward"
        self.lose_response_to: str | None = None  # path: drop the next response to it, once
        self.connections = 0  # client connections accepted, over the proxy's life
        self.requests: list[str] = []  # "METHOD path" of every request relayed
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop
        ).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            if self.mode == "refuse":
                return
            if self.mode == "hang":
                await asyncio.sleep(3600)
                return
            upstream = await asyncio.open_connection(*self.upstream)
            up_reader, up_writer = upstream
            while True:
                request = await _read_message(reader)
                if request is None or self.mode == "refuse":
                    return  # the mode applies to kept-alive connections too
                if self.mode == "hang":
                    await asyncio.sleep(3600)
                line = request.split(b"\r\n", 1)[0].decode()
                self.requests.append(" ".join(line.split(" ")[:2]))
                up_writer.write(request)
                await up_writer.drain()
                response = await _read_message(up_reader)
                if response is None:
                    return
                path = line.split(" ")[1].split("?")[0]
                if self.lose_response_to is not None and path == self.lose_response_to:
                    self.lose_response_to = None
                    return  # the service did the work; the client never hears of it
                writer.write(response)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the proxy is shutting down; asyncio would log a cancelled handler
        finally:
            if upstream is not None:
                upstream[1].close()
            writer.close()


async def _read_message(reader: asyncio.StreamReader) -> bytes | None:
    """One HTTP/1.1 message: the head, then a Content-Length body; None at a clean EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return head + await reader.readexactly(length)
