"""AgentScope's session end, seen from outside: a deleted session is consolidated.

AgentScope 2.0.11 has no session-end hook for middlewares (they are built per run), and its
app ends a session only by deleting it (`DELETE /sessions/{session_id}?agent_id=…`, answered
204, the caller named by the `X-User-ID` header). This ASGI wrapper watches for exactly that
answer and then asks the factory to end the session, off the request's path. It depends on
that route and header, which is AgentScope's internals: this file is their one adapter, and
`tests/integration/test_session_end.py` checks it against the real `create_app`.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import parse_qs

from memorystore.middleware.factory import MemoryMiddlewareFactory

_SESSION_PATH = re.compile(r"^/sessions/(?P<session>[^/]+)/?$")
USER_HEADER = b"x-user-id"


class SessionEndMiddleware:
    """`app.add_middleware(SessionEndMiddleware, factory=factory)` on the AgentScope app."""

    def __init__(self, app: Any, factory: MemoryMiddlewareFactory) -> None:
        self.app = app
        self.factory = factory
        self._tasks: set[asyncio.Task[Any]] = set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = _SESSION_PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None or scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        await self.app(scope, receive, watch)
        if status and status[0] == 204:
            self._end(scope, match.group("session"))

    def _end(self, scope: dict[str, Any], session: str) -> None:
        headers = dict(scope.get("headers") or [])
        user = headers.get(USER_HEADER, b"").decode("utf-8", "replace").strip()
        query = parse_qs(scope.get("query_string", b"").decode("utf-8", "replace"))
        agent = (query.get("agent_id") or [""])[0]
        if not user or not agent:
            return
        task = asyncio.get_running_loop().create_task(
            self.factory.end_session(user, agent, session)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
