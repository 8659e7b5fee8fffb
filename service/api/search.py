"""Finding memories: mem0's search, and recall (the memories an agent injects before a turn,
packed into a token budget by `memorystore.recall.pack`, as the middleware packs them)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memorystore.recall import pack
from memorystore.service.api.deps import EngineDep, LimitsDep, ServicesDep
from memorystore.service.api.responses import Recalled, SearchResults
from memorystore.service.api.schemas import RecallRequest, SearchRequest

__all__ = ["router"]

router = APIRouter(tags=["search"])


@router.post(
    "/v3/memories/search/", response_model=SearchResults, response_model_exclude_unset=True
)
async def search(body: SearchRequest, engine: EngineDep, limits: LimitsDep) -> dict[str, Any]:
    limits.top_k(body.top_k, "top_k")
    limits.text(body.query, "query")
    scope, rest = limits.scoped(body, body.filters)
    threshold = body.threshold if body.threshold is not None else 0.0
    results = await engine.search(
        body.query, scope, body.top_k, threshold, rest, body.include_retired
    )
    return {"results": results}


@router.post("/v1/recall/", response_model=Recalled, response_model_exclude_unset=True)
async def recall(body: RecallRequest, services: ServicesDep, limits: LimitsDep) -> dict[str, Any]:
    """Memories packed into a token budget: what an agent injects before a turn."""
    defaults = services.cfg.recall
    top_k = body.top_k or defaults.top_k
    limits.top_k(top_k, "top_k")
    limits.text(body.query, "query")
    scope, rest = limits.scoped(body, body.filters)
    threshold = defaults.threshold if body.threshold is None else body.threshold
    found = await services.engine.search(
        body.query, scope, top_k, threshold, rest, body.include_retired
    )
    packed = pack(
        found,
        token_budget=defaults.token_budget if body.token_budget is None else body.token_budget,
        max_memory_chars=body.max_memory_chars or defaults.max_memory_chars,
    )  # the floor was applied by the search (to the dense similarity)
    return {
        "context": packed.context,
        "memories": packed.memories,
        "tokens": packed.tokens,
        "dropped": packed.dropped,
        "repeats": packed.repeats,
    }
