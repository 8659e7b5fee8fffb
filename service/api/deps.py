"""What the routes depend on, declared once: the process's services, the key check, the
"prepared" check, the limit checks and the idempotent write.

Each is a FastAPI dependency reading `request.app.state`, so a route states what it needs in
its signature, and a test replaces any of them (`app.dependency_overrides`) without
building the rest. The checks raise HTTPException with the field at fault; the routes call
them in the order their answers have always been decided in.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from memorystore.config import Limits
from memorystore.scope import EntityIds, ScopeError, split_scope
from memorystore.service.api.schemas import (
    AddRequest,
    BulkAddRequest,
    ExchangeRequest,
    QueryId,
    check_metadata,
)
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.services import Services
from memorystore.service.state.idempotency import IdempotencyStore, KeyReused, fingerprint
from memorystore.service.state.postgres import DatabaseUnavailable
from memorystore.service.stores.filters import filter_excess

__all__ = [
    "REPLAY_RESPONSES",
    "EngineDep",
    "EntityIdsQuery",
    "IdempotencyKey",
    "IdempotentWrite",
    "LimitChecks",
    "LimitsDep",
    "OnceDep",
    "ServicesDep",
    "authorise",
    "get_engine",
    "get_services",
    "idempotent_write",
    "limit_checks",
    "plain_metadata",
    "prepared",
    "query_entity_ids",
    "scoped",
]


async def get_services(request: Request) -> Services:
    """The process's services (`create_app` put them on `app.state`)."""
    found: Services = request.app.state.services
    return found


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_engine(services: ServicesDep) -> MemoryEngine:
    return services.engine


EngineDep = Annotated[MemoryEngine, Depends(get_engine)]


def authorise(services: ServicesDep, authorization: Annotated[str | None, Header()] = None) -> None:
    """The tenant key, as mem0's client sends it (`Token <key>`; `Bearer` too). Not async:
    the key ring may re-read its files (a rotation), off the event loop."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() not in ("token", "bearer") or not services.keyring.check(token.strip()):
        raise HTTPException(
            401,
            "missing or wrong API key (send Authorization: Token <key>)",
            headers={"WWW-Authenticate": "Token"},
        )


async def prepared(services: ServicesDep) -> None:
    """Until the database schema is checked (PostgreSQL), answer at once with the reason
    instead of waiting on a database that may be down."""
    if services.engine.not_ready is not None:
        raise DatabaseUnavailable(services.engine.not_ready)


async def query_entity_ids(
    user_id: QueryId = None, agent_id: QueryId = None, run_id: QueryId = None
) -> EntityIds:
    """Entity ids given as query parameters (calls on one memory, delete by entity).

    None given at all is the empty scope: the calls on one memory accept it (the id is the
    capability, see MemoryEngine._owned); delete by entity refuses it.
    """
    return EntityIds(user_id=user_id, agent_id=agent_id, run_id=run_id)


EntityIdsQuery = Annotated[EntityIds, Depends(query_entity_ids)]


def scoped(body: Any, filters: dict[str, Any] | None) -> tuple[EntityIds, dict[str, Any]]:
    """The request's scope and its other filters; a scope that breaks the rules is a 400."""
    try:
        return split_scope(body, filters)
    except ScopeError as exc:
        raise HTTPException(400, str(exc)) from None


def plain_metadata(metadata: dict[str, Any] | None, where: str = "") -> None:
    """Metadata setting a reserved key is a 400 naming it (`where` prefixes the field)."""
    try:
        check_metadata(metadata)
    except ScopeError as exc:
        raise HTTPException(400, f"{where}{exc}") from None


class LimitChecks:
    """The checks against `limits.*`: each refusal is a 422 naming the field and the limit."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def text(self, text: str, field: str) -> None:
        if len(text) > self.limits.max_memory_chars:
            raise HTTPException(
                422,
                f"{field} is longer than limits.maxMemoryChars ({self.limits.max_memory_chars})",
            )

    def top_k(self, value: int, field: str) -> None:
        if value > self.limits.max_top_k:
            raise HTTPException(422, f"{field} must be at most {self.limits.max_top_k}")

    def window(self, page: int, page_size: int) -> None:
        """A listing's page: page_size within max_top_k, and no deeper than max_list_window."""
        self.top_k(page_size, "page_size")
        if page * page_size > self.limits.max_list_window:
            raise HTTPException(
                422,
                f"page: page × page_size may not exceed limits.maxListWindow "
                f"({self.limits.max_list_window}); narrow the filters instead",
            )

    def filters(self, filters: dict[str, Any] | None) -> None:
        """A filter within maxFilterConditions and maxFilterDepth, checked before it is read."""
        excess = filter_excess(
            filters or {}, self.limits.max_filter_conditions, self.limits.max_filter_depth
        )
        if excess is None:
            return
        if excess.kind == "depth":
            raise HTTPException(
                422,
                f"{excess.path}: AND/OR/NOT nested deeper than limits.maxFilterDepth "
                f"({self.limits.max_filter_depth})",
            )
        raise HTTPException(
            422,
            f"{excess.path}: more than limits.maxFilterConditions "
            f"({self.limits.max_filter_conditions}) conditions (a field condition counts one, "
            "each value of an in/nin list one)",
        )

    def scoped(self, body: Any, filters: dict[str, Any] | None) -> tuple[EntityIds, dict[str, Any]]:
        """`scoped`, once the filters are within the limits."""
        self.filters(filters)
        return scoped(body, filters)

    def metadata(self, metadata: dict[str, Any] | None, field: str = "metadata") -> None:
        """Metadata no larger than maxMetadataBytes (compact UTF-8 JSON, as it is stored)."""
        if not metadata:
            return
        size = len(
            json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8", "surrogatepass"
            )
        )
        if size > self.limits.max_metadata_bytes:
            raise HTTPException(
                422,
                f"{field}: {size} bytes as JSON, more than limits.maxMetadataBytes "
                f"({self.limits.max_metadata_bytes})",
            )

    def writable(
        self, body: AddRequest | ExchangeRequest | BulkAddRequest, bulk: bool = False
    ) -> EntityIds:
        """The scope of a request that writes messages, once its limits and metadata pass."""
        most, field = (
            (self.limits.max_bulk_messages, "limits.maxBulkMessages")
            if bulk
            else (self.limits.max_messages, "limits.maxMessages")
        )
        if len(body.messages) > most:
            raise HTTPException(422, f"messages: at most {most} per request ({field})")
        for i, message in enumerate(body.messages):
            self.text(message.content, f"messages.content[{i}]")
        scope, _ = scoped(body, None)
        plain_metadata(body.metadata)
        self.metadata(body.metadata)
        return scope

    def update(self, text: str | None, metadata: dict[str, Any] | None, item: str = "") -> None:
        """An update of one memory (`item`: which one of a batch, e.g. `memories[3]`)."""
        if text is None and metadata is None:
            problem = "give `text` or `metadata` to update"
            raise HTTPException(422, f"{item}: {problem}" if item else problem)
        field = f"{item}." if item else ""
        if text is not None:
            self.text(text, f"{field}text")
        plain_metadata(metadata, field)
        self.metadata(metadata, f"{field}metadata")


async def limit_checks(services: ServicesDep) -> LimitChecks:
    return LimitChecks(services.cfg.limits)


LimitsDep = Annotated[LimitChecks, Depends(limit_checks)]


# how a route written through IdempotentWrite documents the replay
REPLAY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            "Idempotent-Replayed": {
                "description": "`true` when this is the first answer to the same "
                "Idempotency-Key and body, replayed: nothing was written again.",
                "schema": {"type": "string", "enum": ["true"]},
            }
        }
    }
}


# the header a retried write repeats (a route's own parameter: it comes first in the document)
IdempotencyKey = Annotated[str | None, Header(max_length=256)]


class IdempotentWrite:
    """Run a write once per Idempotency-Key: a retry within the key's lifetime replays the
    first answer (with `Idempotent-Replayed: true`) instead of writing again."""

    def __init__(self, store: IdempotencyStore, path: str) -> None:
        self.store = store
        self.path = path

    async def __call__(
        self, key: str | None, body: BaseModel, run: Callable[[], Awaitable[tuple[int, Any]]]
    ) -> Response:
        if not key:
            status, payload = await run()
            return JSONResponse(payload, status)
        fp = fingerprint("add", self.path, body.model_dump(mode="json"))
        try:
            status, payload, replayed = await self.store.run(key, fp, run)
        except KeyReused as exc:
            raise HTTPException(422, str(exc)) from None
        headers = {"Idempotent-Replayed": "true"} if replayed else {}
        return JSONResponse(payload, status, headers=headers)


async def idempotent_write(request: Request, services: ServicesDep) -> IdempotentWrite:
    return IdempotentWrite(services.idempotency, request.url.path)


OnceDep = Annotated[IdempotentWrite, Depends(idempotent_write)]
