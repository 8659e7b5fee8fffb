"""A recording proxy in front of a REAL Qdrant server (the vendored binary, plain HTTP on
loopback), for the tests that check which `api-key` each call of ours carries: the server
does not report it, and it knows one key, while these tests rotate ours. So the proxy
records each call (method, path, `api-key` header, JSON body), then forwards it with the
server's own key and hands back the server's answer unchanged. What a call does is what
Qdrant does; only the key it arrived with is taken off and recorded.

Entering drops every collection on the server, so tests sharing one server start alike."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import httpx

from memorystore_dev.qdrant import QdrantServer

# hop-by-hop, and what httpx undoes itself (the body it hands back is decoded)
HOP_HEADERS = {
    "connection", "keep-alive", "transfer-encoding", "content-length", "host",
    "content-encoding", "accept-encoding",
}  # fmt: skip


@dataclass
class Call:
    method: str
    path: str  # without the query
    api_key: str | None
    body: Any


@dataclass
class KeyRecorder:
    """`with KeyRecorder(server) as qdrant:` → `qdrant.url` (give it to the client under
    test), `qdrant.calls`, `qdrant.keys(path_suffix)`."""

    server: QdrantServer
    calls: list[Call] = field(default_factory=list)
    url: str = ""

    def keys(self, path_suffix: str = "") -> list[str | None]:
        """The `api-key` header of each call whose path ends with `path_suffix`, in order."""
        return [c.api_key for c in list(self.calls) if c.path.endswith(path_suffix)]

    def __post_init__(self) -> None:
        recorder = self
        upstream = httpx.Client(
            base_url=self.server.url, headers={"api-key": self.server.api_key}, timeout=30
        )
        self._upstream = upstream

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                body = json.loads(raw) if raw else None
                recorder.calls.append(Call(self.command, path, self.headers.get("api-key"), body))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in HOP_HEADERS and k.lower() != "api-key"
                }
                answer = upstream.request(self.command, self.path, content=raw, headers=headers)
                self.send_response(answer.status_code)
                for key, value in answer.headers.items():
                    if key.lower() not in HOP_HEADERS:
                        self.send_header(key, value)
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._proxy = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._proxy.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._proxy.server_address[1]}"
        self._thread = threading.Thread(target=self._proxy.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.server.drop_collections()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._proxy.shutdown()
        self._proxy.server_close()
        self._upstream.close()
