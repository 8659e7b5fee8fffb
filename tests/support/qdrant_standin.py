"""A STAND-IN for a Qdrant server's REST API, on loopback: not Qdrant, only its wire format.

There is no Qdrant server binary in this environment yet (vendoring one is another issue's),
and what the tests using this check is what a client SENDS: the `api-key` header and the
body of every REST call. The stand-in answers the calls the service makes to open a store
and to count (the version probe, the collection list, whether a collection exists, creating
one, reading its config back, payload indexes, exact counts) in the shapes qdrant-client
parses, holds no points, and records every request in `calls`. Anything else is answered 404
(and recorded), so a test notices a call it did not expect.
"""

from __future__ import annotations

import importlib.metadata
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


@dataclass
class Call:
    method: str
    path: str  # without the query
    api_key: str | None
    body: Any


def _ok(result: Any) -> tuple[int, dict[str, Any]]:
    return 200, {"result": result, "status": "ok", "time": 0.0}


@dataclass
class QdrantStandIn:
    """`with QdrantStandIn() as qdrant:` → `qdrant.url`; `qdrant.keys()` lists the `api-key`
    headers received, `qdrant.created()` the collections created. `existing` holds the
    collections the stand-in has (name → the body that created it)."""

    existing: dict[str, Any] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    url: str = ""

    def keys(self, path_suffix: str = "") -> list[str | None]:
        """The `api-key` header of each call whose path ends with `path_suffix`, in order."""
        return [c.api_key for c in list(self.calls) if c.path.endswith(path_suffix)]

    def created(self) -> list[tuple[str, Any]]:
        """(collection, body) of each create-collection request."""
        return [
            (c.path.removeprefix("/collections/"), c.body)
            for c in list(self.calls)
            if c.method == "PUT" and c.path.count("/") == 2
        ]

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if method == "GET" and parts == [""]:  # the client's version check: the same version
            version = importlib.metadata.version("qdrant-client")
            return 200, {"title": "qdrant - vector search engine", "version": version}
        if method == "GET" and parts == ["collections"]:
            return _ok({"collections": [{"name": name} for name in self.existing]})
        if parts[0] == "collections" and len(parts) == 2:
            if method == "PUT":
                self.existing[parts[1]] = body
                return _ok(True)
            if method == "GET" and parts[1] in self.existing:
                return _ok(collection_info(self.existing[parts[1]]))
        if method == "GET" and parts[0] == "collections" and parts[2:] == ["exists"]:
            return _ok({"exists": parts[1] in self.existing})
        if method == "PUT" and parts[0] == "collections" and parts[2:] == ["index"]:
            return _ok({"operation_id": 1, "status": "completed"})
        if method == "POST" and parts[0] == "collections" and parts[2:] == ["points", "count"]:
            return _ok({"count": 0})
        return 404, {"status": {"error": f"stand-in: no {method} {path}"}, "time": 0}

    def __post_init__(self) -> None:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                path = self.path.split("?", 1)[0]
                stand_in.calls.append(Call(self.command, path, self.headers.get("api-key"), body))
                status, payload = stand_in.answer(self.command, path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()


def collection_info(created: Any = None) -> dict[str, Any]:
    """GET /collections/{name} as Qdrant answers it for mem0's collection shape, with the
    vector size of the request that created it (384 when not known)."""
    vectors = (created or {}).get("vectors") or {}
    size = vectors.get("size", 384) if isinstance(vectors, dict) else 384
    return {
        "status": "green",
        "optimizer_status": "ok",
        "segments_count": 1,
        "points_count": 0,
        "indexed_vectors_count": 0,
        "config": {
            "params": {
                "vectors": {"size": size, "distance": "Cosine"},
                "sparse_vectors": {"bm25": {"modifier": "idf"}},
                "shard_number": 1,
                "replication_factor": 1,
            },
            "hnsw_config": {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000},
            "optimizer_config": {
                "deleted_threshold": 0.2,
                "vacuum_min_vector_number": 1000,
                "default_segment_number": 0,
                "flush_interval_sec": 5,
            },
            "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
        },
        "payload_schema": {},
    }
