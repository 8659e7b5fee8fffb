"""Run the memory service under uvicorn in a background thread (demo, benchmarks, tests).

The real server on a real loopback socket, so callers exercise HTTP end to end.
"""

from __future__ import annotations

import ssl
import subprocess
import threading
import time
from collections.abc import Callable
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
from memorystore.service.ops.http_limits import server_options
from memorystore.service.ops.tls import RELOAD_SECONDS, CertificateReloader


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


def wait_until_ready(
    url: str,
    proc: subprocess.Popen[Any],
    timeout: float = 120,
    verify: ssl.SSLContext | bool = True,
) -> None:
    """Poll `url`/readyz until 200; fail early if the process exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/readyz", verify=verify).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"memory service exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"memory service at {url} not ready after {timeout:.0f} s")
        time.sleep(0.2)


class UvicornThread:
    """Any ASGI app on a loopback port, in a daemon thread; `url` is set once it listens.

    With `ssl_context` it serves HTTPS (`url` starts with https://)."""

    def __init__(
        self,
        app: Callable[..., Any],  # an ASGI application
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        **options: Any,  # more of uvicorn.Config's options
    ) -> None:
        self.host = host
        self.scheme = "https" if ssl_context is not None else "http"
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
            ssl_context_factory=(lambda *_: ssl_context) if ssl_context is not None else None,
            **options,
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
        self.url = f"{self.scheme}://{self.host}:{port}"
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
    """`with ServiceThread(cfg) as svc:` → svc.url, svc.api_key; stopped and closed on exit.

    With `cfg.tls` it serves HTTPS and reloads changed certificate files every
    `tls_reload_seconds` (`svc.tls`), as `memorystore serve` does."""

    def __init__(self, cfg: ServiceConfig, tls_reload_seconds: float = RELOAD_SECONDS) -> None:
        from memorystore.service.app import create_app

        self.cfg = cfg
        self.api_key = cfg.api_key.resolve("apiKey").get_secret_value()
        self.tls = CertificateReloader(cfg.tls, tls_reload_seconds) if cfg.tls else None
        self.app = create_app(cfg)
        context = self.tls.context if self.tls else None
        super().__init__(
            self.app,
            cfg.listen.host,
            cfg.listen.port,
            ssl_context=context,
            **server_options(cfg.limits),  # the request head bounded as `memorystore serve` does
        )

    def __enter__(self) -> Self:
        super().__enter__()
        if self.tls is not None:
            self.tls.start()
        self._wait_prepared()
        return self

    def _wait_prepared(self, timeout: float = 120) -> None:
        """A PostgreSQL-backed service prepares its schema after it listens (answering 503
        until then): callers get it once it serves, as a pod's readiness probe would."""
        deadline = time.monotonic() + timeout
        while (reason := self.app.state.not_ready()) is not None:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"memory service not ready after {timeout:.0f} s: {reason}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.tls is not None:
            self.tls.stop()
        super().stop()
