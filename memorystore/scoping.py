"""Which mem0 entity ids a memory scope reads and writes: the one mapping every client uses."""

from __future__ import annotations

from memorystore.spec import Scope

# Project memory belongs to no end user; its owner id is namespaced so no user can claim it.
PROJECT_PREFIX = "project:"


def scope_ids(
    scope: Scope | str, user_id: str, agent_id: str | None, project: str
) -> dict[str, str]:
    """user → {user_id}; agent → {user_id, agent_id}; project → {user_id: project:<name>}."""
    scope = Scope(scope)
    if scope == Scope.PROJECT:
        if not project:
            raise ValueError("project scope needs a project name")
        return {"user_id": PROJECT_PREFIX + project}
    if not user_id or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")
    if user_id.startswith(PROJECT_PREFIX):
        raise ValueError(
            f"user_id may not start with {PROJECT_PREFIX!r} (reserved for project memory)"
        )
    if scope == Scope.AGENT:
        if not agent_id:
            raise ValueError("agent scope needs an agent_id")
        return {"user_id": user_id, "agent_id": agent_id}
    return {"user_id": user_id}
