"""The one HTTP client per agent process: pooled connections, timeouts, retries, a breaker.

Every middleware the factory builds shares it, so a process holds one connection pool to its
tenant's memory service whatever the number of users, sessions and turns. The service key is
sent as `Authorization: Token …` and never appears in an error message or log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
from pydantic import SecretStr

from memorystore.config import ClientConfig
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


class MemoryClient:
    def __init__(
        self,
        cfg: ClientConfig,
        api_key: SecretStr,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.timeout = cfg.timeout_seconds
        self.breaker = CircuitBreaker(
            cfg.breaker.failure_threshold, cfg.breaker.cooldown_seconds, clock=clock
        )
        self._http = httpx.AsyncClient(
            base_url=cfg.endpoint.rstrip("/"),
            headers={"Authorization": f"Token {api_key.get_secret_value()}"},
            timeout=httpx.Timeout(cfg.timeout_seconds),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            transport=transport,
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
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> list[dict[str, Any]]:
        """Writes carry an idempotency key, so they are retried once on a lost response."""
        body: dict[str, Any] = {"messages": messages, **ids, "infer": infer}
        if metadata:
            body["metadata"] = metadata
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        attempts = 2 if idempotency_key else 1
        result = await self._call("add", "POST", "/v3/memories/add/", body, headers, attempts)
        return result["results"]

    async def _call(
        self,
        op: str,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        attempts: int = 1,
    ) -> dict[str, Any]:
        if not self.breaker.allow():
            metrics.CALLS.labels(op, "skipped").inc()
            raise ServiceUnavailable(op, "skipped: the circuit breaker is open")
        try:
            response = await self._send(op, method, path, body, headers, attempts)
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
    ) -> httpx.Response:
        for attempt in range(1, attempts + 1):
            start = time.perf_counter()
            try:
                async with asyncio.timeout(self.timeout):
                    response = await self._http.request(method, path, json=body, headers=headers)
            except TimeoutError:
                metrics.CALLS.labels(op, "timeout").inc()
                if attempt == attempts:
                    raise MemoryServiceError(op, f"timed out after {self.timeout:g}s") from None
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


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    text = str(detail) if detail else response.reason_phrase
    return text[:300]
