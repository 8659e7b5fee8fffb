"""Request bodies of the HTTP API, and how a request's scope is read from them.

Field names follow the mem0 Platform REST API (snake_case), so `mem0.AsyncMemoryClient`
works unchanged. Options that client sends and the service has no use for are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memorystore.service.engine import ENTITY_KEYS, Scope

EntityId = str


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["user", "assistant", "system"]
    content: str = Field(min_length=1)
    name: str | None = Field(None, max_length=256)


class _Scoped(_Body):
    user_id: EntityId | None = Field(None, min_length=1, max_length=256)
    agent_id: EntityId | None = Field(None, min_length=1, max_length=256)
    run_id: EntityId | None = Field(None, min_length=1, max_length=256)


class AddRequest(_Scoped):
    messages: list[Message] = Field(min_length=1)
    metadata: dict[str, Any] | None = None
    infer: bool = True


class SearchRequest(_Scoped):
    query: str = Field(min_length=1)
    filters: dict[str, Any] | None = None
    top_k: int = Field(10, ge=1)
    threshold: float | None = Field(None, ge=0.0, le=1.0)


class ListRequest(_Scoped):
    filters: dict[str, Any] | None = None


class UpdateRequest(_Body):
    text: str | None = Field(None, min_length=1)
    metadata: dict[str, Any] | None = None


class RecallRequest(_Scoped):
    query: str = Field(min_length=1)
    filters: dict[str, Any] | None = None
    top_k: int | None = Field(None, ge=1)
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    token_budget: int | None = Field(None, ge=0)
    max_memory_chars: int | None = Field(None, ge=16)


class ScopeError(ValueError):
    pass


def split_scope(body: _Scoped, filters: dict[str, Any] | None) -> tuple[Scope, dict[str, Any]]:
    """Entity ids may come top-level (v1) or inside `filters` (v3, also under AND).

    Returns the scope and the remaining (metadata) filters. Conflicting ids are an error,
    and so is a request with no entity id at all: nothing is ever read or written unscoped.
    """
    found: dict[str, str] = {}

    def take(key: str, value: Any, where: str) -> None:
        if not isinstance(value, str) or not value.strip():
            raise ScopeError(f"{where}.{key} must be a non-empty string")
        if key in found and found[key] != value:
            raise ScopeError(f"{key} is given twice with different values")
        found[key] = value

    for key in ENTITY_KEYS:
        if getattr(body, key):
            take(key, getattr(body, key), "body")
    rest: dict[str, Any] = {}
    for key, value in (filters or {}).items():
        if key in ENTITY_KEYS:
            take(key, value, "filters")
        elif key == "AND" and isinstance(value, list):
            kept = []
            for cond in value:
                if isinstance(cond, dict) and len(cond) == 1 and next(iter(cond)) in ENTITY_KEYS:
                    k, v = next(iter(cond.items()))
                    take(k, v, "filters.AND")
                else:
                    kept.append(cond)
            if kept:
                rest["AND"] = kept
        else:
            rest[key] = value
    scope = Scope(**found)
    if not scope:
        raise ScopeError("a scope is required: give user_id, agent_id or run_id")
    return scope, rest
