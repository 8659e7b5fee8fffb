"""Backups of the whole store into backup.path while it serves (`portability/backup/`); the
restore is offline (`memorystore restore`), so it has no route.

At start-up (this router's lifespan) the service removes what backups killed mid-way left
in the target; the interrupted restore and the signing key are checked earlier, before the
data directory is opened (`Services.build`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI

from memorystore.service.api.deps import ServicesDep
from memorystore.service.api.errors import BACKUP_ERRORS
from memorystore.service.api.responses import BackupManifest, Confirmation
from memorystore.service.api.schemas import BackupRequest
from memorystore.service.portability import backup

__all__ = ["router"]


@asynccontextmanager
async def _start(app: FastAPI) -> AsyncIterator[None]:
    cfg = app.state.services.cfg
    if cfg.backup is not None:
        await asyncio.to_thread(backup.clean_partials, cfg)
    yield


router = APIRouter(tags=["backups"], responses=BACKUP_ERRORS, lifespan=_start)


@router.post("/v1/backups/", response_model=BackupManifest, response_model_exclude_unset=True)
async def take_backup(body: BackupRequest, services: ServicesDep) -> dict[str, Any]:
    """Back the whole store up into backup.path while it serves (writes wait meanwhile); 409
    while a backup of that name is being taken, or when it exists."""
    try:
        manifest = await backup.take(services.engine, body.name)
    except Exception as exc:  # a refusal (a name taken, no target) is not a failed backup
        refused = isinstance(exc, backup.BackupError) and exc.status < 500
        services.metrics.backups.labels("refused" if refused else "failed").inc()
        raise
    services.metrics.backups.labels("ok").inc()
    services.metrics.last_backup.set_to_current_time()
    return manifest


@router.get("/v1/backups/{name}/", response_model=BackupManifest, response_model_exclude_unset=True)
async def describe_backup(name: str, services: ServicesDep) -> dict[str, Any]:
    """A finished backup's manifest; 409 while it is being taken, or when the name is not a
    backup directory (a symbolic link is never followed)."""
    return await asyncio.to_thread(backup.describe, services.cfg, name)


@router.delete("/v1/backups/{name}/")
async def remove_backup(name: str, services: ServicesDep) -> Confirmation:
    """Delete a backup's files, finished or left partial by a failed attempt."""
    await asyncio.to_thread(backup.remove, services.cfg, name)
    return Confirmation(message=f"backup {name} deleted")
