"""The memory service's HTTP app: the mem0 Platform subset, recall, health and metrics.

`create_app` only wires: the process's services (`services.py`) on `app.state`, the
lifespan (`lifespan.py`), the middlewares, one router per concern (`api/`) behind the key
and "prepared" checks, and the exception handlers. What a route does is in its router.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI

from memorystore.config import ServiceConfig
from memorystore.service.api import (
    backups,
    health,
    maintenance,
    memories,
    portability,
    search,
    sessions,
)
from memorystore.service.api.deps import authorise, prepared
from memorystore.service.api.errors import ERROR_RESPONSES, add_exception_handlers
from memorystore.service.api.memories import BULK_ROUTE
from memorystore.service.lifespan import lifespan
from memorystore.service.ops.observability import MetricsMiddleware
from memorystore.service.ops.request_guard import RequestGuard
from memorystore.service.services import Services

__all__ = ["create_app"]


def create_app(cfg: ServiceConfig) -> FastAPI:
    """Build the app; opens the store and loads the embedder now, so bad config fails here."""
    services = Services.build(cfg)
    docs = cfg.api_docs  # off by default: the schema maps the API for anyone who can reach it
    app = FastAPI(
        title="MemoryStore memory service",
        summary=f"Long-term memory for tenant {cfg.tenant}",
        lifespan=lifespan,
        openapi_url="/openapi.json" if docs else None,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
    )
    app.state.services = services
    app.state.not_ready = lambda: services.engine.not_ready  # ServiceThread waits for the schema
    app.add_middleware(
        RequestGuard,
        limit=cfg.limits.max_request_bytes,
        routes={BULK_ROUTE: (cfg.limits.max_bulk_bytes, "limits.maxBulkBytes")},
    )
    app.add_middleware(MetricsMiddleware, metrics=services.metrics)
    guarded = [Depends(authorise), Depends(prepared)]
    for api in (memories, search, sessions, portability, backups, maintenance):
        app.include_router(api.router, dependencies=guarded, responses=ERROR_RESPONSES)
    app.include_router(health.router)
    add_exception_handlers(app)
    return app
