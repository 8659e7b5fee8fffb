"""Run the memory service under uvicorn in a background thread (demo, benchmarks, tests).

The real server on a real loopback socket, so callers exercise HTTP end to end.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import uvicorn

from memorystore.config import (
    EmbeddedQdrant,
    Listen,
    SecretSource,
    ServiceConfig,
    ServiceEmbedder,
    ServiceVectorStore,
)


def embedded_config(
    data_dir: Path, key_file: Path | None = None, **overrides: object
) -> ServiceConfig:
    """The embedded default in `data_dir`, with a generated key, on a free loopback port."""
    key_file = key_file or data_dir / "api-key"
    fields: dict[str, object] = {
        "tenant": "local",
        "listen": Listen(host="127.0.0.1", port=0),
        "data_dir": str(data_dir),
        "api_key": SecretSource(file=str(key_file), generate=True),
        "vector_store": ServiceVectorStore(embedded=EmbeddedQdrant()),
        "embedder": ServiceEmbedder(),
    }
    fields.update(overrides)
    return ServiceConfig(**fields)


def wait_until_ready(url: str, proc: subprocess.Popen[Any], timeout: float = 120) -> None:
    """Poll `url`/readyz until 200; fail early if the process exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"memory service exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"memory service at {url} not ready after {timeout:.0f} s")
        time.sleep(0.2)


class UvicornThread:
    """Any ASGI app on a loopback port, in a daemon thread; `url` is set once it listens."""

    def __init__(self, app: object, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self.url = ""

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ServiceThread(UvicornThread):
    """`with ServiceThread(cfg) as svc:` → svc.url, svc.api_key; stopped and closed on exit."""

    def __init__(self, cfg: ServiceConfig) -> None:
        from memorystore.service.app import create_app

        self.cfg = cfg
        self.api_key = cfg.api_key.resolve("apiKey").get_secret_value()
        self.app = create_app(cfg)
        super().__init__(self.app, cfg.listen.host, cfg.listen.port)
