"""The mem0 Platform's calls on memories: write, list, read, change, delete, and by entity.

Handlers only parse, check and answer; the work is in `MemoryEngine`. Every delete here is an
erasure (one memory, a scope, an entity): the engine's one erasure path
(`engine/forgetting.py`) removes the text from every place the service keeps it, and the
memory's history then answers 404.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse

from memorystore.scope import ENTITY_TYPES, EntityIds
from memorystore.service.api.deps import (
    REPLAY_RESPONSES,
    EngineDep,
    EntityIdsQuery,
    IdempotencyKey,
    LimitsDep,
    OnceDep,
    ServicesDep,
)
from memorystore.service.api.responses import (
    AddResults,
    BulkProgress,
    Confirmation,
    Deleted,
    EntityPage,
    HistoryEvent,
    Memory,
    MemoryPage,
    Ping,
    page_of,
)
from memorystore.service.api.schemas import (
    AddRequest,
    BulkAddRequest,
    ListRequest,
    PathId,
    UpdateRequest,
)
from memorystore.service.engine.results import MemoryItem

__all__ = ["BULK_ROUTE", "router"]

log = logging.getLogger("memorystore.service")

router = APIRouter(tags=["memories"])

BULK_ROUTE = "/v1/memories/bulk/"  # its body bound is limits.maxBulkBytes (app.py)
NDJSON = "application/x-ndjson"

PageNumber = Annotated[int, Query(ge=1)]


@router.get("/v1/ping/")
async def ping(services: ServicesDep) -> Ping:
    # mem0's client refuses to start without an org and a project: one tenant is both.
    tenant = services.cfg.tenant
    return Ping(status="ok", org_id=tenant, project_id=tenant, user_email=None)


@router.post("/v3/memories/add/", response_model=AddResults, responses=REPLAY_RESPONSES)
@router.post("/v1/memories/", response_model=AddResults, responses=REPLAY_RESPONSES)
async def add(
    body: AddRequest,
    engine: EngineDep,
    limits: LimitsDep,
    once: OnceDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    scope = limits.writable(body)

    async def run() -> tuple[int, Any]:
        if body.infer and not body.raw_fallback and not engine.infer_available:
            return 200, {"results": [], "skipped": "no extraction model is configured"}
        results = await engine.add(
            [m.model_dump(exclude_none=True) for m in body.messages],
            scope,
            body.metadata,
            body.infer,
        )
        return 200, {"results": results}

    return await once(idempotency_key, body, run)


@router.post(
    BULK_ROUTE,
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "One BulkProgress per line, after each chunk of limits.maxMessages.",
            "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/BulkProgress"}}},
            "model": BulkProgress,
        }
    },
)
async def add_bulk(body: BulkAddRequest, engine: EngineDep, limits: LimitsDep) -> StreamingResponse:
    """Store up to limits.maxBulkMessages messages as written (imports, history back-fills),
    with progress: the whole request is checked before anything is stored, then each chunk
    is stored and answered with a line; the first `done` messages are stored."""
    scope = limits.writable(body, bulk=True)
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    total, chunk = len(messages), limits.limits.max_messages

    async def lines() -> AsyncIterator[str]:
        done, results = 0, []
        try:
            async for done, part in engine.add_bulk(messages, scope, body.metadata, chunk):
                results.extend(part)
                if done < total:
                    yield _line(BulkProgress(done=done, total=total))
        except Exception:  # the status is sent: the last line says where it stopped
            log.exception("bulk add stopped after %d of %d messages", done, total)
            error = f"storing stopped after {done} of {total} messages; resend from there"
            yield _line(BulkProgress(done=done, total=total, error=error))
            return
        yield _line(BulkProgress.model_validate({"done": done, "total": total, "results": results}))

    return StreamingResponse(lines(), media_type=NDJSON)


def _line(progress: BulkProgress) -> str:
    # ASCII: a lone surrogate a message kept must not break the stream half-way
    return json.dumps(progress.model_dump(exclude_none=True)) + "\n"


@router.post("/v3/memories/", response_model=MemoryPage, response_model_exclude_unset=True)
async def list_memories(
    body: ListRequest,
    request: Request,
    engine: EngineDep,
    limits: LimitsDep,
    page: PageNumber = 1,
    page_size: PageNumber = 100,
) -> dict[str, Any]:
    limits.window(page, page_size)
    scope, _ = limits.scoped(body, body.filters)
    total, rows = await engine.list(scope, page, page_size, body.include_retired)
    return page_of(request, total, page, page_size, rows)


@router.get("/v1/memories/{memory_id}/", response_model=Memory, response_model_exclude_unset=True)
async def get_one(memory_id: str, scope: EntityIdsQuery, engine: EngineDep) -> MemoryItem:
    return await engine.get(memory_id, scope)


@router.put("/v1/memories/{memory_id}/", response_model=Memory, response_model_exclude_unset=True)
async def update_one(
    memory_id: str, body: UpdateRequest, scope: EntityIdsQuery, engine: EngineDep, limits: LimitsDep
) -> MemoryItem:
    limits.update(body.text, body.metadata)
    return await engine.update(memory_id, scope, body.text, body.metadata)


@router.delete("/v1/memories/{memory_id}/")
async def delete_one(memory_id: str, scope: EntityIdsQuery, engine: EngineDep) -> Confirmation:
    await engine.delete(memory_id, scope)
    return Confirmation(message="Memory deleted successfully!")


@router.delete("/v1/memories/")
async def delete_by_entity(scope: EntityIdsQuery, services: ServicesDep) -> Deleted:
    if not scope:
        raise HTTPException(400, "a scope is required: give user_id, agent_id or run_id")
    deleted = await services.erase(scope)
    return Deleted(message="Memories deleted successfully!", deleted=deleted)


@router.get(
    "/v1/memories/{memory_id}/history/",
    response_model=list[HistoryEvent],
    response_model_exclude_unset=True,
)
async def history(memory_id: str, scope: EntityIdsQuery, engine: EngineDep) -> list[dict[str, Any]]:
    return await engine.history(memory_id, scope)


@router.get("/v1/entities/", response_model=EntityPage)
async def entities(
    request: Request,
    engine: EngineDep,
    limits: LimitsDep,
    page: PageNumber = 1,
    page_size: PageNumber = 100,
) -> dict[str, Any]:
    """Users, agents and runs with their memory counts, a page at a time."""
    limits.top_k(page_size, "page_size")
    total, rows = await engine.entities(page, page_size)
    return page_of(request, total, page, page_size, rows)


@router.delete("/v2/entities/{entity_type}/{name}/")
async def delete_entity(entity_type: str, name: PathId, services: ServicesDep) -> Deleted:
    """Delete an entity's memories, with the scope rules: agent or run alone spans no user."""
    key = ENTITY_TYPES.get(entity_type)
    if key is None:
        raise HTTPException(400, f"entity type {entity_type!r} is not one of user, agent, run")
    deleted = await services.erase(EntityIds(**{key: name}))
    return Deleted(message="Entity deleted successfully.", deleted=deleted)
