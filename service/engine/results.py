"""The shapes of the engine's answers: what a memory, a write, an entity look like.

Why TypedDicts and not models: the answers are mem0's own dicts (mem0 builds most of them,
the engine the rest in the same shape) passed through to the HTTP layer; the types name their
keys so that the engine and its callers agree on them, at no cost per memory.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = ["EntityRow", "Event", "ExportRecord", "MemoryItem", "WriteResult"]

Event = Literal["ADD", "UPDATE", "DELETE", "NONE"]


class MemoryItem(TypedDict):
    """A memory as mem0 shapes it (get, list, search): text, hash and timestamps, the
    identity keys and speaker promoted beside them, the rest of its payload in `metadata`."""

    id: str
    memory: str
    hash: str | None
    created_at: str | None
    updated_at: str | None
    score: NotRequired[float | None]  # a search's; None elsewhere
    metadata: NotRequired[dict[str, Any] | None]
    user_id: NotRequired[str]
    agent_id: NotRequired[str]
    run_id: NotRequired[str]
    actor_id: NotRequired[str]
    role: NotRequired[str]
    attributed_to: NotRequired[str]
    expiration_date: NotRequired[str]


class WriteResult(TypedDict):
    """What one add did to one memory: written (ADD, or mem0's UPDATE), retired (DELETE), or
    nothing (NONE: it repeats a kept memory)."""

    id: str
    memory: str
    event: Event
    actor_id: NotRequired[str | None]  # a raw write's speaker
    role: NotRequired[str]
    duplicate_of: NotRequired[str]  # NONE: the kept memory it repeats
    rule: NotRequired[str]  # NONE: which rule found the repeat
    superseded_by: NotRequired[str]  # DELETE: the memory that retired it
    reason: NotRequired[str]  # DELETE: why
    previous_memory: NotRequired[str]  # mem0's UPDATE: the text before


class EntityRow(TypedDict):
    """A user, agent or run that owns memories, with how many (the entity inventory)."""

    type: str  # "user", "agent" or "run"
    name: str
    id: str
    total_memories: int


# an exported memory: its id, payload and mem0's history rows of it (the `history` table's
# columns, as mem0 reads them back)
ExportRecord = tuple[str, dict[str, Any], list[dict[str, Any]]]
