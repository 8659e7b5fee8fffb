"""Sessions: each completed exchange is journalled; the session's end (or the idle sweep)
consolidates its exchanges into memory (`lifecycle/consolidation.py`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from memorystore.scope import EntityIds
from memorystore.service.api.deps import (
    REPLAY_RESPONSES,
    IdempotencyKey,
    LimitsDep,
    OnceDep,
    ServicesDep,
    scoped,
)
from memorystore.service.api.responses import Consolidated, ConsolidationStarted, Journalled
from memorystore.service.api.schemas import EndSessionRequest, ExchangeRequest, PathId
from memorystore.service.lifecycle.consolidation import Consolidator

__all__ = ["router"]

log = logging.getLogger("memorystore.service")

router = APIRouter(tags=["sessions"])


@router.post(
    "/v1/sessions/{session_id}/exchanges/",
    response_model=Journalled,
    responses=REPLAY_RESPONSES,
)
async def journal_exchange(
    session_id: PathId,
    body: ExchangeRequest,
    services: ServicesDep,
    limits: LimitsDep,
    once: OnceDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Journal one completed exchange; the session's end turns its exchanges into memory."""
    scope = limits.writable(body)

    async def run() -> tuple[int, Any]:
        seq = await asyncio.to_thread(
            services.journal.append,
            scope,
            session_id,
            [m.model_dump(exclude_none=True) for m in body.messages],
            body.metadata or {},
            saved=body.saved,
            raw=body.raw_fallback,
        )
        return 200, {"session_id": session_id, "journalled": seq}

    return await once(idempotency_key, body, run)


@router.post(
    "/v1/sessions/{session_id}/end/",
    responses={
        200: {"model": Consolidated, "description": "Consolidated (`wait`): what was written"},
        202: {
            "model": ConsolidationStarted,
            "description": "Accepted: consolidating in the background",
        },
    },
)
async def end_session(
    session_id: PathId, body: EndSessionRequest, services: ServicesDep
) -> JSONResponse:
    """Consolidate the session's journalled exchanges into memory (idempotent)."""
    scope, _ = scoped(body, None)
    if body.wait:
        return JSONResponse(await services.consolidator.end(scope, session_id))
    services.spawn(_end_logged(services.consolidator, scope, session_id))
    return JSONResponse({"session_id": session_id, "status": "consolidating"}, 202)


async def _end_logged(consolidator: Consolidator, scope: EntityIds, session: str) -> None:
    """A session end answered with 202: failures are logged, the idle sweep retries."""
    try:
        await consolidator.end(scope, session)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("session not consolidated yet (%s): the idle sweep retries", type(exc).__name__)
