"""The one HTTP client per agent process: pooled connections, timeouts, retries, a breaker.

Every middleware the factory builds shares it, so a process holds one connection pool to its
tenant's memory service whatever the number of users, sessions and turns. The service key is
sent as `Authorization: Token …` and never appears in an error message or log line; it is
re-read when its mounted file changes, so a rotated key needs no restart (`ServiceKey`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import SecretStr

from memorystore.config import ClientConfig, ConfigError, SecretSource
from memorystore.middleware import metrics
from memorystore.middleware.breaker import CircuitBreaker, State

log = logging.getLogger("memorystore.middleware")


class MemoryServiceError(RuntimeError):
    """A memory-service call failed. Fail-open callers log it; strict mode raises it."""

    def __init__(self, op: str, reason: str) -> None:
        super().__init__(f"memory service {op}: {reason}")
        self.op = op
        self.reason = reason


class ServiceUnavailable(MemoryServiceError):
    """The breaker is open: the call was not made."""


class ServiceKey:
    """The service key an agent sends, re-read when its mounted file changes.

    After a rotation the operator rewrites the client Secret and kubelet updates the mounted
    file in place; a stat per call (inode, size, mtime: microseconds) notices, and the file
    is read again. An env var, when set, wins over the file (as everywhere) and never
    changes. The key read before the change is kept as a fallback: the agent's mount may be
    refreshed before the service's, and until then the service knows only the old key. The
    fallback is dropped as soon as the new key is accepted.
    """

    def __init__(self, source: SecretSource | SecretStr) -> None:
        """Reads the key now: a missing or empty one is a ConfigError naming apiKey. A
        SecretStr is a key given in code, which never changes."""
        self._fallback: SecretStr | None = None
        self._source: SecretSource | None = None
        self._path: str | None = None
        if isinstance(source, SecretStr):
            self._stamp = None
            self._value = source
            return
        self._source = source.model_copy(update={"generate": False})
        env_set = bool(source.env and os.environ.get(source.env))
        self._path = source.file if source.file and not env_set else None
        self._stamp = self._stat()  # before reading: a change in between is seen next call
        self._value = source.resolve("apiKey")

    def __repr__(self) -> str:
        return f"ServiceKey(file={self._path!r})"

    def current(self) -> str:
        """The key to send now (re-read first when the file changed)."""
        self.refresh()
        return self._value.get_secret_value()

    def refresh(self, force: bool = False) -> bool:
        """Re-read the file when it changed (always, with `force`); True if the key changed.
        An unreadable or empty file keeps the last key: a mount being rewritten is no
        reason to stop sending one."""
        if self._path is None or self._source is None:
            return False
        stamp = self._stat()
        if stamp == self._stamp and not force:
            return False
        self._stamp = stamp
        try:
            value = self._source.resolve("apiKey")
        except ConfigError as exc:
            log.warning("keeping the last service key: %s", exc)
            return False
        if value.get_secret_value() == self._value.get_secret_value():
            return False
        self._fallback, self._value = self._value, value
        log.info("the service key file changed: sending the new key")
        return True

    def alternatives(self, refused: str) -> list[str]:
        """Keys to try after `refused` got a 401: a newer one in the file, then the one
        before the last change. Never `refused` itself."""
        self.refresh(force=True)
        found = []
        for candidate in (self._value, self._fallback):
            if candidate is not None:
                value = candidate.get_secret_value()
                if value != refused and value not in found:
                    found.append(value)
        return found

    def accepted(self, key: str) -> None:
        """The service accepted `key`: once that is the current key, forget the old one."""
        if key == self._value.get_secret_value():
            self._fallback = None

    def _stat(self) -> tuple[int, int, int, int] | None:
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)  # follows kubelet's ..data symlink to the new file
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def tls_verify(cfg: ClientConfig) -> ssl.SSLContext | bool:
    """How to check the service's certificate (httpx's `verify`), decided at start-up.

    An https endpoint is verified against `tls.caFile` (the CA the operator put in the client
    ConfigMap) or, without one, the system's CAs. An unreadable or empty CA file is a
    ConfigError naming the field and file: an agent must not start half-configured.
    `verify: false` (MEMORYSTORE_VERIFY_TLS=false) turns checking off, with a warning.
    Plain http:// endpoints (local, embedded use) need none of this."""
    if not cfg.endpoint.lower().startswith("https://"):
        return True
    if not cfg.tls.verify:
        log.warning(
            "TLS verification is OFF for %s (MEMORYSTORE_VERIFY_TLS=false): anyone on the "
            "network path can read the service key and the memories",
            cfg.endpoint,
        )
        return False
    if cfg.tls.ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=cfg.tls.ca_file)
    except FileNotFoundError:
        reason = "no such file"
    except ssl.SSLError:  # before OSError, which it subclasses
        reason = "it holds no PEM certificate"
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise ConfigError(f"tls.caFile: cannot use the CA file {cfg.tls.ca_file}: {reason}")


END_WAIT_S = 300.0  # a waited-for session end: the service's own consolidation time limit


class MemoryClient:
    def __init__(
        self,
        cfg: ClientConfig,
        api_key: ServiceKey | SecretStr,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.timeout = cfg.timeout_seconds
        self.breaker = CircuitBreaker(
            cfg.breaker.failure_threshold, cfg.breaker.cooldown_seconds, clock=clock
        )
        # Sent per request, not as a client default: the key may rotate while we run.
        self.key = api_key if isinstance(api_key, ServiceKey) else ServiceKey(api_key)
        self.verify = tls_verify(cfg)  # ConfigError (naming tls.caFile) before any connection
        self._http = httpx.AsyncClient(
            base_url=cfg.endpoint.rstrip("/"),
            timeout=httpx.Timeout(cfg.timeout_seconds),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            transport=transport,
            verify=self.verify,
        )
        self._background: set[asyncio.Task[Any]] = set()
        self.closed = False

    # --- calls ----------------------------------------------------------------------------

    async def ping(self) -> None:
        await self._call("ping", "GET", "/v1/ping/")

    async def recall(self, query: str, ids: dict[str, str], **options: Any) -> dict[str, Any]:
        """Token-budgeted recall (`/v1/recall/`): options are top_k, threshold, token_budget…"""
        body = {"query": query, **ids, **{k: v for k, v in options.items() if v is not None}}
        return await self._call("recall", "POST", "/v1/recall/", body)

    async def search(
        self, query: str, ids: dict[str, str], top_k: int, threshold: float
    ) -> list[dict[str, Any]]:
        body = {"query": query, "filters": ids, "top_k": top_k, "threshold": threshold}
        return (await self._call("search", "POST", "/v3/memories/search/", body))["results"]

    async def add(
        self,
        messages: list[dict[str, str]],
        ids: dict[str, str],
        *,
        infer: bool,
        raw_fallback: bool = True,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> list[dict[str, Any]]:
        """Writes carry an idempotency key, so they are retried once on a lost response."""
        body = _write_body(messages, ids, raw_fallback, metadata, infer=infer)
        result = await self._write("add", "/v3/memories/add/", body, idempotency_key)
        return result["results"]

    async def journal(
        self,
        session_id: str,
        messages: list[dict[str, str]],
        ids: dict[str, str],
        *,
        saved: bool,
        raw_fallback: bool = True,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Journal one exchange of a session (session capture); retried once like `add`."""
        body = _write_body(messages, ids, raw_fallback, metadata, saved=saved)
        path = f"/v1/sessions/{quote(session_id, safe='')}/exchanges/"
        return await self._write("journal", path, body, idempotency_key)

    async def _write(
        self, op: str, path: str, body: dict[str, Any], idempotency_key: str | None
    ) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        attempts = 2 if idempotency_key else 1
        return await self._call(op, "POST", path, body, headers, attempts)

    async def end_session(
        self, session_id: str, ids: dict[str, str], *, wait: bool = False
    ) -> dict[str, Any]:
        """Ask the service to consolidate the session (idempotent, so retried once).

        With `wait` the answer comes when the consolidation is done (an extraction model may
        take a while): the call's time limit is then END_WAIT_S, not timeoutSeconds."""
        path = f"/v1/sessions/{quote(session_id, safe='')}/end/"
        timeout = max(self.timeout, END_WAIT_S) if wait else None
        body = {**ids, "wait": wait}
        return await self._call("end_session", "POST", path, body, None, 2, timeout)

    async def _call(
        self,
        op: str,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        attempts: int = 1,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        if not self.breaker.allow():
            metrics.CALLS.labels(op, "skipped").inc()
            raise ServiceUnavailable(op, "skipped: the circuit breaker is open")
        try:
            key = self.key.current()
            response = await self._send(op, method, path, body, headers, attempts, key, timeout)
            if response.status_code == 401:
                # A rotation: the file may hold a newer key, or the service may not know
                # the new one yet. A 401 means nothing was done, so retrying is safe.
                for other in self.key.alternatives(key):
                    key = other
                    response = await self._send(
                        op, method, path, body, headers, attempts, key, timeout
                    )
                    if response.status_code != 401:
                        break
            if response.status_code != 401:
                self.key.accepted(key)
        except asyncio.CancelledError:
            self.breaker.release()  # a cancelled probe proves nothing either way
            raise
        except MemoryServiceError:
            self._failed()
            raise
        status = response.status_code
        if status < 400:
            self._succeeded()
            metrics.CALLS.labels(op, "ok").inc()
            return response.json()
        if status in (401, 403, 429) or status >= 500:
            # the service cannot serve this process (bad key, overload, fault): back off
            self._failed()
            metrics.CALLS.labels(op, "error").inc()
        else:
            self._succeeded()  # it answered: a request problem, not an outage
            metrics.CALLS.labels(op, "rejected").inc()
        raise MemoryServiceError(op, f"HTTP {status}: {_detail(response)}")

    async def _send(
        self,
        op: str,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        headers: dict[str, str] | None,
        attempts: int,
        key: str,
        timeout: float | None = None,
    ) -> httpx.Response:
        headers = {**(headers or {}), "Authorization": f"Token {key}"}
        limit = timeout or self.timeout
        for attempt in range(1, attempts + 1):
            start = time.perf_counter()
            try:
                async with asyncio.timeout(limit):
                    response = await self._http.request(
                        method, path, json=body, headers=headers, timeout=limit
                    )
            except TimeoutError:
                metrics.CALLS.labels(op, "timeout").inc()
                if attempt == attempts:
                    raise MemoryServiceError(op, f"timed out after {limit:g}s") from None
                continue
            except httpx.HTTPError as exc:
                metrics.CALLS.labels(op, "error").inc()
                if attempt == attempts:
                    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    raise MemoryServiceError(op, reason) from None
                continue
            finally:
                metrics.LATENCY.labels(op).observe(time.perf_counter() - start)
            if response.status_code >= 500 and attempt < attempts:
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _succeeded(self) -> None:
        self.breaker.success()
        metrics.BREAKER_OPEN.set(0)

    def _failed(self) -> None:
        was_closed = self.breaker.state is State.CLOSED
        self.breaker.failure()
        if self.breaker.state is State.OPEN:
            metrics.BREAKER_OPEN.set(1)
            if was_closed:
                log.warning(
                    "memory service failing: breaker open, calls skipped for %gs",
                    self.breaker.cooldown_seconds,
                )

    # --- background writes and shutdown ---------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run a write-back after the reply; tracked so shutdown can wait for it."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    @property
    def pending_writes(self) -> int:
        return len(self._background)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for pending write-backs (at most `timeout` seconds)."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout)

    async def aclose(self, timeout: float = 10.0) -> None:
        if self.closed:
            return
        self.closed = True
        await self.drain(timeout)
        for task in list(self._background):
            task.cancel()
        await self._http.aclose()


def _write_body(
    messages: list[dict[str, str]],
    ids: dict[str, str],
    raw_fallback: bool,
    metadata: dict[str, Any] | None,
    **flags: bool,
) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": messages, **ids, **flags}
    if not raw_fallback:
        body["raw_fallback"] = False
    if metadata:
        body["metadata"] = metadata
    return body


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    text = str(detail) if detail else response.reason_phrase
    return text[:300]
