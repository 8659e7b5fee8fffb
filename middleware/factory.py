"""The factory `create_app(extra_agent_middlewares=…)` calls once per run.

Built once per process (`MemoryMiddlewareFactory.from_env()` at start-up): it reads the
mounted client config and the service key, applies the MEMORYSTORE_* toggles, validates
everything (a bad value fails start-up, naming the variable) and opens ONE HTTP client. Each
call returns fresh middleware bound to that user / agent / session, sharing the client.

The factory never fails a run by itself: with no mounted config, an unreachable service or an
open breaker it logs a warning and returns [] (memory off for that run), unless fail-open is
off (`failOpen: false` / MEMORYSTORE_FAIL_OPEN=false), which makes those errors raise.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import ssl
from collections.abc import Mapping
from typing import Any, Literal

import httpx
from agentscope.middleware import MiddlewareBase

from memorystore.config import ClientConfig, ConfigError
from memorystore.middleware import metrics
from memorystore.middleware.client import (
    MemoryClient,
    MemoryServiceError,
    ServiceKey,
    ServiceUnavailable,
)
from memorystore.middleware.memory import MemoryMiddleware, Observer
from memorystore.middleware.settings import PREFIX, ConfigMissing, load_settings
from memorystore.scope import scope_ids
from memorystore.spec import Mode, Scope

log = logging.getLogger("memorystore.middleware")
# our modes as AgentScope's Mem0Middleware spells them (a new mode fails here, not at run time)
MEM0_MODES: dict[Mode, Literal["static_control", "agent_control", "both"]] = {
    Mode.STATIC_CONTROL: "static_control",
    Mode.AGENT_CONTROL: "agent_control",
    Mode.BOTH: "both",
}

Flavor = Literal["memorystore", "mem0"]


class MemoryMiddlewareFactory:
    def __init__(
        self,
        cfg: ClientConfig | None,
        *,
        flavor: Flavor = "memorystore",
        transport: httpx.AsyncBaseTransport | None = None,
        observer: Observer | None = None,
    ) -> None:
        """`cfg=None` or `enabled: false` gives a factory that always returns []."""
        self.cfg = cfg
        self.observer = observer
        self.flavor = flavor
        self.client: MemoryClient | None = None
        if cfg is not None and cfg.enabled:
            if (
                flavor == "mem0"
                and cfg.scope == Scope.PROJECT
                and cfg.capture
                and (cfg.mode != Mode.AGENT_CONTROL)
            ):
                # the stock middleware stores every raw turn, which project memory must not
                raise ConfigError(
                    "scope: project with flavor mem0: AgentScope's Mem0Middleware writes every "
                    "raw turn into memory shared by all users; use the default flavor, "
                    "mode agent_control, or capture: false"
                )
            key = ServiceKey(cfg.api_key)  # ConfigError names the field; re-read on change
            self.client = MemoryClient(cfg, key, transport=transport)
        self._reachable = False
        self._check_lock = asyncio.Lock()
        self._mem0_client: Any = None

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> MemoryMiddlewareFactory:
        """The process's factory from the mounted config + toggles (docs/agent-side.md)."""
        env = os.environ if env is None else env
        try:
            cfg = load_settings(env)
        except ConfigMissing as exc:
            if env.get(PREFIX + "FAIL_OPEN", "").strip().lower() in ("false", "0", "no", "off"):
                raise
            log.warning("agent memory is off: %s", exc)
            return cls(None)
        return cls(cfg, **kwargs)

    @property
    def enabled(self) -> bool:
        return self.client is not None

    async def __call__(
        self, user_id: str, agent_id: str, session_id: str, workspace: Any = None
    ) -> list[MiddlewareBase]:
        if self.client is None or self.cfg is None:
            return []
        try:
            await self._check_reachable()
            if self.flavor == "mem0":
                return [await self._stock(user_id, agent_id)]
            return [
                MemoryMiddleware(
                    self.client,
                    self.cfg,
                    user_id=user_id,
                    agent_id=agent_id,
                    session_id=session_id,
                    observer=self.observer,
                )
            ]
        except (MemoryServiceError, ValueError) as exc:
            if not self.cfg.fail_open:
                raise
            metrics.FAIL_OPEN.labels("factory").inc()
            log.warning("run %s goes on without memory: %s", session_id, exc)
            return []

    async def _check_reachable(self) -> None:
        """Ping once per process; afterwards the breaker's view of the service decides."""
        assert self.client is not None
        if not self.client.breaker.would_allow():
            raise ServiceUnavailable("factory", "the circuit breaker is open")
        if self._reachable:
            return
        async with self._check_lock:
            if not self._reachable:
                await self.client.ping()
                self._reachable = True

    async def _stock(self, user_id: str, agent_id: str) -> MiddlewareBase:
        """AgentScope's own Mem0Middleware over mem0's client, for the stock behaviour."""
        from agentscope.middleware import Mem0Middleware

        assert self.cfg is not None and self.client is not None
        key = self.client.key.current()
        if self._mem0_client is None:
            # its constructor makes a blocking ping: keep that off the event loop
            self._mem0_client = await asyncio.to_thread(
                _mem0_client_type(),
                api_key=key,
                host=self.cfg.endpoint.rstrip("/"),
                verify=self.client.verify,
            )
        elif self._mem0_client.api_key != key:  # the mounted key was rotated
            self._mem0_client.api_key = key
            self._mem0_client.async_client.headers["Authorization"] = f"Token {key}"
        ids = scope_ids(self.cfg.scope, user_id, agent_id, self.cfg.tenant)
        return Mem0Middleware(
            user_id=ids["user_id"],
            agent_id=ids.get("agent_id"),
            client=self._mem0_client,
            mode=MEM0_MODES[self.cfg.mode],
            top_k=self.cfg.recall.top_k,
            threshold=self.cfg.recall.threshold,
        )

    async def end_session(
        self, user_id: str, agent_id: str, session_id: str, *, wait: bool = False
    ) -> dict[str, Any] | None:
        """Tell the service the session ended: its journalled exchanges become memory.

        Idempotent (a repeated end finds nothing left) and off the user's path: without
        `wait` the service answers at once and consolidates in the background. Fails open
        like every call (None, a warning and a metric) unless failOpen is off."""
        if self.client is None or self.cfg is None:
            return None
        ids = scope_ids(self.cfg.scope, user_id, agent_id, self.cfg.tenant)
        try:
            result = await self.client.end_session(session_id, ids, wait=wait)
        except MemoryServiceError as exc:
            if not self.cfg.fail_open:
                raise
            metrics.FAIL_OPEN.labels("end_session").inc()
            log.warning(
                "session %s not consolidated now (the service's idle sweep will): %s",
                session_id,
                exc,
            )
            return None
        if self.observer is not None:
            self.observer("session_end", {"session_id": session_id, "result": result})
        return result

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for write-backs still in flight (tests, benchmarks, graceful shutdown)."""
        if self.client is not None:
            await self.client.drain(timeout)

    async def aclose(self) -> None:
        """Shutdown: finish pending write-backs (bounded), close the connection pool."""
        if self.client is not None:
            await self.client.aclose()
        if self._mem0_client is not None:
            await self._mem0_client.async_client.aclose()
            self._mem0_client = None


@functools.cache
def _mem0_client_type() -> type:
    """mem0's AsyncMemoryClient, verifying the service like every other call (mem0 is imported
    only when the stock flavor is used)."""
    from mem0 import AsyncMemoryClient

    class VerifiedMem0Client(AsyncMemoryClient):
        """Its calls go through an httpx client with the tenant's TLS settings. mem0's own
        constructor pings through `requests` and the system's CAs, which do not know the
        store's private CA: the ping goes through httpx too, verified the same way."""

        def __init__(self, *, api_key: str, host: str, verify: ssl.SSLContext | bool) -> None:
            self._verify = verify
            http = httpx.AsyncClient(verify=verify, timeout=300)
            super().__init__(api_key=api_key, host=host, client=http)

        def _validate_api_key(self) -> str | None:
            with httpx.Client(verify=self._verify, timeout=30) as http:
                response = http.get(
                    f"{self.host}/v1/ping/",
                    headers={"Authorization": f"Token {self.api_key}"},
                    params=self._prepare_params(),
                )
            if response.is_error:
                raise ValueError(f"memory service ping: HTTP {response.status_code}")
            data = response.json()
            if data.get("org_id") and data.get("project_id"):
                self.org_id, self.project_id = data["org_id"], data["project_id"]
            return data.get("user_email")

    return VerifiedMem0Client
