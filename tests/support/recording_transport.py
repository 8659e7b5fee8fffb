"""Wraps httpx's real transport to record the requests the agent side sends.

Requests still go over loopback to the real service; the wrapper only keeps (method, path,
headers, JSON body) so a test can check what was asked, e.g. an add's `infer` flag.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Sent:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class RecordingTransport(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self.sent: list[Sent] = []

    def to(self, path: str) -> list[Sent]:
        return [s for s in self.sent if s.path == path]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = request.content
        body = json.loads(raw) if raw else None
        self.sent.append(Sent(request.method, request.url.path, dict(request.headers), body))
        return await self._real.handle_async_request(request)

    async def aclose(self) -> None:
        await self._real.aclose()
