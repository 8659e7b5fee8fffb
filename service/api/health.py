"""The probes and the metrics: no key (kubelet and Prometheus have none), and not in the
OpenAPI document (they are the platform's interface, not the API's)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from memorystore.service.api.deps import ServicesDep
from memorystore.service.state.postgres import DatabaseUnavailable
from memorystore.service.stores.protocol import StoreUnavailable

__all__ = ["router"]

log = logging.getLogger("memorystore.service")

router = APIRouter(include_in_schema=False)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(services: ServicesDep) -> JSONResponse:
    """Ready when the store answers within 5 s; the start-up re-index's progress, if any."""
    try:
        await asyncio.wait_for(asyncio.to_thread(services.engine.check_ready), timeout=5)
    except Exception as exc:
        # an unavailable database or store says why without a secret; anything else by its type
        reason = (
            str(exc)
            if isinstance(exc, DatabaseUnavailable | StoreUnavailable)
            else type(exc).__name__
        )
        log.warning("not ready: %s", reason)
        return JSONResponse({"status": "unavailable", "reason": reason}, 503)
    body: dict[str, Any] = {"status": "ok"}
    progress = services.reindexer.progress
    if progress is not None:
        body["reindex"] = progress.as_dict()
    migration = services.engine.migration
    if migration.pending() or migration.events:
        body["embedderMigration"] = migration.status()
    return JSONResponse(body)


@router.get("/metrics")
async def metrics_endpoint(services: ServicesDep) -> Response:
    return PlainTextResponse(
        generate_latest(services.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
