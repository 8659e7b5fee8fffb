"""The request's envelope, checked once for every route before any handler reads it.

Why an ASGI layer: what it refuses is ambiguous or oversized input that FastAPI would
otherwise resolve silently (the last of two `user_id`s, or of two equal JSON keys, wins:
`DELETE /v1/memories/?user_id=alice&user_id=bob` deleted bob's memories) or answer
wrongly (a streamed body over the limit surfaced as FastAPI's 400 "error parsing the body").
One layer covers every router, the ones added later included, with no route opting in.

- a body over `limits.maxRequestBytes`, declared or streamed (chunked): 413 (a route given
  its own bound, the bulk add's `limits.maxBulkBytes`, is held to that one instead);
- a query parameter given more than once (no route takes a list): 422 naming it;
- a JSON body (`application/json`, `application/*+json`, or no content type) with a key
  given twice in any object, at any depth: 400 naming its path.

The body is read whole here (FastAPI reads it whole too; at most maxRequestBytes) and
handed on unchanged. The duplicate check parses it with an `object_pairs_hook` that only
compares a dict's size with its pairs' count, in C; the path is worked out only for a
refused body. Plain ASGI, no task per request (as `observability.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["RequestGuard", "duplicate_key", "repeated_parameter"]

Scope = dict[str, Any]
Message = dict[str, Any]
ASGIApp = Callable[..., Any]

_NAME_SHOWN = 100  # characters of a refused name echoed back (it may be 64 KiB long)


def repeated_parameter(query_string: bytes) -> str | None:
    """The first query parameter given twice, else None.

    Names are compared as the app reads them (Starlette's QueryParams: latin-1 bytes,
    then percent-decoded as UTF-8), so `user_id` and `user%5Fid` are the same parameter."""
    if not query_string:
        return None
    seen: set[str] = set()
    for name, _ in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name in seen:
            return name
        seen.add(name)
    return None


class _Duplicate(Exception):
    pass


def _distinct_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    built = dict(pairs)
    if len(built) != len(pairs):
        raise _Duplicate
    return built


class _Pairs(list[tuple[str, Any]]):
    """An object as its pairs in order (kept for the path search of a refused body)."""


def duplicate_key(body: bytes | str) -> list[str | int] | None:
    """The path to the first key given twice in one JSON object (the key last), else None.

    Raises what `json.loads` raises on text that is not JSON (the app then refuses it as it
    always has)."""
    try:
        json.loads(body, object_pairs_hook=_distinct_pairs)
    except _Duplicate:
        return _find_duplicate(json.loads(body, object_pairs_hook=_Pairs), [])
    return None


def _find_duplicate(value: Any, path: list[str | int]) -> list[str | int] | None:
    # depth-first, in document order: the first object that repeats a key is the one named
    # (an inner object is complete, and so checked by the hook, before its parent)
    if isinstance(value, _Pairs):
        for key, item in value:
            found = _find_duplicate(item, [*path, key])
            if found is not None:
                return found
        seen: set[str] = set()
        for key, _ in value:
            if key in seen:
                return [*path, key]
            seen.add(key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _find_duplicate(item, [*path, i])
            if found is not None:
                return found
    return None


def _shown(name: str) -> str:
    """A name as it can be echoed: encodable (a lone surrogate escaped) and not too long."""
    safe = name.encode("utf-8", "backslashreplace").decode()
    return safe if len(safe) <= _NAME_SHOWN else safe[:_NAME_SHOWN] + "…"


def _dotted(path: list[str | int]) -> str:
    out = "body"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{_shown(part)}"
    return out


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the body may be read as JSON: application/json or application/*+json, or no
    content type at all (FastAPI reads that as JSON when its strict_content_type is off)."""
    for name, value in headers:
        if name == b"content-type":
            kind = value.split(b";", 1)[0].strip().lower()
            maintype, _, subtype = kind.partition(b"/")
            return maintype == b"application" and (subtype == b"json" or subtype.endswith(b"+json"))
    return True


class _TooLarge(Exception):
    pass


class RequestGuard:
    """Refuse what no route may receive (see the module docstring), before any handler."""

    def __init__(
        self, app: ASGIApp, limit: int, routes: dict[str, tuple[int, str]] | None = None
    ) -> None:
        """`limit` bounds every body but those of `routes`: path -> (bound, its field)."""
        self.app = app
        self.limit = limit
        self.routes = routes or {}

    def _bound(self, scope: Scope) -> tuple[int, str]:
        return self.routes.get(scope.get("path", ""), (self.limit, "limits.maxRequestBytes"))

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        limit, field = self._bound(scope)
        declared = dict(headers).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit, field)
            return
        name = repeated_parameter(scope.get("query_string", b""))
        if name is not None:
            shown = _shown(name)
            await _answer(
                send,
                422,
                f"query.{shown}: given more than once; give each parameter once",
                [{"loc": ["query", shown], "msg": "given more than once", "type": "repeated"}],
            )
            return
        try:
            body, last = await _read(receive, limit)
        except _TooLarge:
            await _too_large(send, limit, field)
            return
        if last is not None:  # the client went away before its body was complete
            return
        if body and _is_json(headers):
            try:
                path = duplicate_key(body)
            except ValueError:
                path = None  # not JSON: the app answers as it always has
            except RecursionError:  # past the interpreter's nesting limit: no parser reads it
                await _answer(send, 400, "body: nested too deeply to be read")
                return
            if path is not None:
                where = _dotted(path)
                loc = ["body", *(_shown(p) if isinstance(p, str) else str(p) for p in path)]
                await _answer(
                    send,
                    400,
                    f"{where}: given twice; each key of a JSON object may be given once",
                    [{"loc": loc, "msg": "given twice", "type": "duplicate_key"}],
                )
                return
        await self.app(scope, _replay(body, receive), send)


async def _read(receive: Any, limit: int) -> tuple[bytes, Message | None]:
    """The whole body, or (b"", the disconnect) when the client left first."""
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"", message
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None


async def _too_large(send: Any, limit: int, field: str) -> None:
    await _answer(send, 413, f"request body exceeds {field} ({limit} bytes)")


def _replay(body: bytes, receive: Any) -> Callable[[], Any]:
    """The body already read, as one message; then the client's own (its disconnect)."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        message: Message = await receive()
        return message

    return replayed


async def _answer(
    send: Any, status: int, detail: str, errors: list[dict[str, Any]] | None = None
) -> None:
    payload: dict[str, Any] = {"detail": detail}
    if errors is not None:
        payload["errors"] = errors
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
