"""Memories in bulk: batch update and delete by id, exports of a scope and their imports
(the format: `portability/document.py`)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, HTTPException

from memorystore.scope import ENTITY_TYPES, EntityIds
from memorystore.service.api.deps import EngineDep, LimitsDep, ServicesDep
from memorystore.service.api.responses import Confirmation, Export, ExportCreated, Imported
from memorystore.service.api.schemas import (
    BatchDeleteRequest,
    BatchUpdateRequest,
    ExportDocument,
    ExportGetRequest,
    ExportRequest,
)
from memorystore.service.portability.document import FormatError, build_export, import_document

__all__ = ["router"]

router = APIRouter(tags=["portability"])


def _distinct(ids: list[str]) -> None:
    first: dict[str, int] = {}
    for i, memory_id in enumerate(ids):
        if memory_id in first:
            raise HTTPException(
                422,
                f"memories[{i}].memory_id: {memory_id} is given twice "
                f"(also memories[{first[memory_id]}])",
            )
        first[memory_id] = i


def _whole_scope(rest: dict[str, Any]) -> None:
    if rest:
        raise HTTPException(
            422,
            f"filters.{next(iter(rest))}: an export holds a whole scope; only user_id, "
            "agent_id and run_id are accepted",
        )


@router.put("/v1/batch/")
async def batch_update(
    body: BatchUpdateRequest, engine: EngineDep, limits: LimitsDep
) -> Confirmation:
    """Update up to 1000 memories by id; all are checked before any is changed."""
    _distinct([item.memory_id for item in body.memories])
    for i, item in enumerate(body.memories):
        limits.update(item.text, item.metadata, f"memories[{i}]")
    items = [(item.memory_id, item.text, item.metadata) for item in body.memories]
    updated = await engine.batch_update(items)
    return Confirmation(message=f"Successfully updated {updated} memories")


@router.delete("/v1/batch/")
async def batch_delete(body: BatchDeleteRequest, engine: EngineDep) -> Confirmation:
    """Delete up to 1000 memories by id; all are checked before any is deleted."""
    ids = [item.memory_id for item in body.memories]
    _distinct(ids)
    deleted = await engine.batch_delete(ids)
    return Confirmation(message=f"Successfully deleted {deleted} memories")


@router.post("/v1/exports/")
async def create_export(
    body: ExportRequest, services: ServicesDep, limits: LimitsDep
) -> ExportCreated:
    """Export one scope's memories now (format: portability/document.py), kept 7 days."""
    scope, rest = limits.scoped(body, body.filters)
    _whole_scope(rest)
    document = await build_export(services.engine, services.cfg.tenant, scope, body.export_schema)
    await asyncio.to_thread(services.saved.put, scope, document)
    return ExportCreated(
        message="Memory export request received. The export will be ready in a few seconds.",
        id=document["id"],
    )


@router.post("/v1/exports/get/", response_model=Export, response_model_exclude_unset=True)
async def get_export(
    body: ExportGetRequest, services: ServicesDep, limits: LimitsDep
) -> dict[str, Any]:
    """An export by `memory_export_id`, else the latest one of exactly the scope given."""
    named = body.filters or any(getattr(body, key) for key in ENTITY_TYPES.values())
    scope: EntityIds | None = None
    if named or body.memory_export_id is None:
        scope, rest = limits.scoped(body, body.filters)
        _whole_scope(rest)
    if body.memory_export_id is not None:
        found = await asyncio.to_thread(services.saved.get, body.memory_export_id)
        if found is None or (scope is not None and found[0] != scope):
            raise HTTPException(
                404, f"memory_export_id: no export {body.memory_export_id} in this scope"
            )
        return found[1]
    assert scope is not None
    document = await asyncio.to_thread(services.saved.latest, scope)
    if document is None:
        raise HTTPException(404, f"no export of the scope {scope.filters()} (or expired)")
    return document


@router.post("/v1/imports/", response_model=Imported)
async def import_memories(
    body: ExportDocument, services: ServicesDep, limits: LimitsDep
) -> dict[str, Any]:
    """Write an export's memories back (ids, history and all); existing ids are skipped."""
    for i, memory in enumerate(body.memories):
        limits.metadata(memory.metadata, f"memories[{i}].metadata")
    try:
        return await import_document(services.engine, body, services.cfg.limits.max_memory_chars)
    except FormatError as exc:
        raise HTTPException(422, str(exc)) from None
