"""Every error the API answers with, one body shape (`Problem`), and how exceptions become one.

The engine and the stores raise their own exceptions (NotFound, DatabaseUnavailable,
BackupError, mem0's ValueError); the handlers here turn each into its status, so the routes
never translate them one by one, and the OpenAPI document lists every status a route answers.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from memorystore.service.engine.core import NotFound
from memorystore.service.portability.backup import BackupError
from memorystore.service.state.postgres import DatabaseUnavailable
from memorystore.service.stores.protocol import StoreUnavailable

__all__ = [
    "BACKUP_ERRORS",
    "ERROR_RESPONSES",
    "Problem",
    "ValidationIssue",
    "add_exception_handlers",
]


class ValidationIssue(BaseModel):
    loc: list[str]
    msg: str
    type: str


class Problem(BaseModel):
    """Every error body: `detail` names the field or value at fault."""

    detail: str
    errors: list[ValidationIssue] | None = None


def _problem(text: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"model": Problem, "description": text, **({"headers": headers} if headers else {})}


# what every authenticated route may answer
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _problem("Bad request: the detail names the field"),
    401: _problem(
        "Missing or wrong API key",
        {"WWW-Authenticate": {"required": True, "schema": {"type": "string", "enum": ["Token"]}}},
    ),
    404: _problem("No such memory in this scope"),
    413: _problem("Request body over limits.maxRequestBytes"),
    422: _problem("Invalid request: the detail names the field"),
    431: _problem("Request line and headers over limits.maxHeaderBytes"),
    503: _problem(
        "The database (PostgreSQL) or the vector store (a Qdrant server) does not answer or "
        "is not ready yet: the detail says which and why; try again",
        {"Retry-After": {"required": True, "schema": {"type": "integer", "minimum": 0}}},
    ),
}

# what the backup routes answer besides
BACKUP_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _problem(
        "Not a backup: the name is a symbolic link or not a backup directory (nothing "
        "outside the backup target is ever read or deleted)"
    ),
    409: _problem(
        "No backup target (backup.path), a backup of that name exists or is being taken, or "
        "the store is in PostgreSQL (its backups are the database's)"
    ),
    503: _problem(
        "The backup target is missing, not writable or a symbolic link (or the database is "
        "not ready yet)"
    ),
    507: _problem("The backup target is full"),
}


async def _backup_failed(_: Request, exc: BackupError) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, exc.status)


async def _unavailable(_: Request, exc: DatabaseUnavailable | StoreUnavailable) -> JSONResponse:
    """The database or the vector store does not answer: try again (the message names which,
    never with a secret)."""
    return JSONResponse({"detail": str(exc)}, 503, headers={"Retry-After": "5"})


async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, 404)


async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [
        {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors()
    ]
    detail = "; ".join(
        f"{'.'.join(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in errors
    )
    return JSONResponse({"detail": detail, "errors": errors}, 422)


async def _bad_value(_: Request, exc: ValueError) -> JSONResponse:
    # mem0 raises ValueError for input it refuses (e.g. an unsupported filter operator).
    return JSONResponse({"detail": str(exc)}, 400)


def add_exception_handlers(app: FastAPI) -> None:
    app.exception_handler(BackupError)(_backup_failed)
    app.exception_handler(DatabaseUnavailable)(_unavailable)
    app.exception_handler(StoreUnavailable)(_unavailable)
    app.exception_handler(NotFound)(_not_found)
    app.exception_handler(RequestValidationError)(_invalid)
    app.exception_handler(ValueError)(_bad_value)
