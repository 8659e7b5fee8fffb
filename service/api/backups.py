"""Backups of the whole store into backup.path while it serves (`portability/backup.py`);
the restore is offline (`memorystore restore`), so it has no route."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter

from memorystore.service.api.deps import ServicesDep
from memorystore.service.api.errors import BACKUP_ERRORS
from memorystore.service.api.responses import BackupManifest, Confirmation
from memorystore.service.api.schemas import BackupRequest
from memorystore.service.portability import backup

__all__ = ["router"]

router = APIRouter(tags=["backups"], responses=BACKUP_ERRORS)


@router.post("/v1/backups/", response_model=BackupManifest, response_model_exclude_unset=True)
async def take_backup(body: BackupRequest, services: ServicesDep) -> dict[str, Any]:
    """Back the whole store up into backup.path while it serves (writes wait meanwhile)."""
    return await backup.take(services.engine, body.name)


@router.get("/v1/backups/{name}/", response_model=BackupManifest, response_model_exclude_unset=True)
async def describe_backup(name: str, services: ServicesDep) -> dict[str, Any]:
    return await asyncio.to_thread(backup.describe, services.cfg, name)


@router.delete("/v1/backups/{name}/")
async def remove_backup(name: str, services: ServicesDep) -> Confirmation:
    await asyncio.to_thread(backup.remove, services.cfg, name)
    return Confirmation(message=f"backup {name} deleted")
