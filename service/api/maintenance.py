"""Maintenance a platform team asks of a running service (`kubectl memorystore reindex`).

A re-index runs by itself at start-up when the index settings changed (lifespan.py); this
starts one in the running service, for the memories still behind (those a replica of the
older version wrote during a rolling update, after this one's start-up run; or those a run
stopped half-way left), and /readyz shows its progress as it goes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from memorystore.service.api.deps import ServicesDep
from memorystore.service.api.responses import ReindexAnswer
from memorystore.service.retrieval.reindex import reindex_stale

__all__ = ["router"]

router = APIRouter(tags=["maintenance"])


@router.post(
    "/v1/reindex/",
    status_code=202,
    response_model=ReindexAnswer,
    response_model_exclude_none=True,
    responses={
        200: {"model": ReindexAnswer, "description": "No memory is behind: nothing started"},
        409: {"model": ReindexAnswer, "description": "A re-index is running: its progress"},
    },
)
async def reindex(services: ServicesDep) -> JSONResponse:
    """Start re-indexing the memories behind the index version (202 with how many); 409 while
    a run is going on (its progress is on /readyz); 200 when none is behind."""
    reindexer = services.reindexer
    body: dict[str, Any] = {"version": reindexer.version}
    if reindexer.running:
        progress = reindexer.progress
        body["reindex"] = progress.as_dict() if progress is not None else None
        return JSONResponse({**body, "detail": "a re-index is already running"}, 409)
    stale = await asyncio.to_thread(reindexer.pending)
    body["pending"] = stale
    if not stale:
        return JSONResponse(body, 200)
    services.spawn(reindex_stale(reindexer, stale))
    return JSONResponse(body, 202)
