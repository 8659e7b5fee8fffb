"""Response bodies of the HTTP API, shaped like the mem0 Platform's, so the OpenAPI document
describes every answer (and the schema fuzz holds every answer to it).

A route that answers with the engine's data returns it as it is and names its model in
`response_model`: FastAPI validates it on the way out, so data that broke its model would be
a server error (500), never blamed on the client. A route that composes its answer builds
the model itself.

A memory carries whatever metadata its writer gave, and mem0 adds keys of its own, so the
models of mem0's items allow extra keys. They are serialised with `exclude_unset` (the routes
say so): a key the engine left out stays out, a key it set to null stays null, and the keys
keep the engine's order, because pydantic writes the declared fields first, in declaration
order, then the extra ones as given. Where two sources order their keys differently (a search
hit from the fused search or from mem0's), only the shared leading keys are declared; the
rest are documented (`_also_documents`) without being declared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AddResults",
    "AddedMemory",
    "BackupFile",
    "BackupManifest",
    "Confirmation",
    "Consolidated",
    "ConsolidationStarted",
    "Deleted",
    "Entity",
    "EntityPage",
    "Export",
    "ExportCounts",
    "ExportCreated",
    "ExportItem",
    "ExportRetirement",
    "FoundMemory",
    "HistoryEvent",
    "Imported",
    "Journalled",
    "Memory",
    "MemoryPage",
    "Page",
    "Ping",
    "Recalled",
    "ScopeIds",
    "SearchResults",
    "page_of",
]


class _Open(BaseModel):
    """A mem0-shaped item: its declared keys, then any others as given."""

    model_config = ConfigDict(extra="allow")


def _also_documents(model: type[BaseModel]) -> Callable[[dict[str, Any]], None]:
    """json_schema_extra: describe `model`'s fields too, as optional properties."""

    def extend(schema: dict[str, Any]) -> None:
        fields = model.model_json_schema(mode="serialization")["properties"]
        properties = schema.setdefault("properties", {})
        for name, field in fields.items():
            properties.setdefault(name, field)

    return extend


class Ping(BaseModel):
    """mem0's client refuses to start without an org and a project: one tenant is both."""

    status: Literal["ok"]
    org_id: str
    project_id: str
    user_email: str | None


class Confirmation(BaseModel):
    """What was done, in words (mem0's answer to a deletion or a batch call)."""

    message: str


class Deleted(BaseModel):
    message: str
    deleted: int = Field(description="How many memories were deleted.")


# --- memories -------------------------------------------------------------------------------


class Memory(_Open):
    """A stored memory as mem0 shows it; `metadata` holds the writer's keys and the service's
    own (`index_version`, `prev_id`, and `lifecycle`, `retired_at`, `superseded_by`,
    `retired_because` on a retired memory)."""

    id: str
    memory: str
    hash: str | None = None
    metadata: dict[str, Any] | None = None
    score: float | None = Field(None, description="A search result's relevance (null on a get).")
    created_at: str | None = None
    updated_at: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    actor_id: str | None = Field(None, description="Who said it (the message's `name`).")
    role: str | None = None
    attributed_to: str | None = None
    expiration_date: str | None = None


class FoundMemory(_Open):
    """A memory found by search or recall, with its `score` (higher is more relevant) and
    the other keys of a `Memory`, in the order its retrieval path writes them."""

    model_config = ConfigDict(json_schema_extra=_also_documents(Memory))

    id: str
    memory: str
    hash: str | None = None


class SearchResults(BaseModel):
    results: list[FoundMemory]


class Recalled(BaseModel):
    """Memories packed into a token budget: what an agent injects before a turn."""

    context: str = Field(description="The packed memories, one `- ` line each.")
    memories: list[FoundMemory] = Field(description="The memories packed, best first.")
    tokens: int = Field(description="The context's estimated tokens.")
    dropped: int = Field(description="Memories found that did not fit the budget.")
    repeats: int = Field(description="Memories left out: they say what a packed one says.")


class AddedMemory(_Open):
    """What a write did to one memory: `ADD`, `NONE` (a repeat of `duplicate_of`, not stored
    again) or `DELETE` (retired: `superseded_by` holds it, `reason` says why)."""

    id: str
    memory: str
    event: str
    actor_id: str | None = None
    role: str | None = None
    superseded_by: str | None = None
    reason: str | None = None
    duplicate_of: str | None = None
    rule: str | None = Field(None, description="The rule that found the repeat.")


class AddResults(BaseModel):
    results: list[AddedMemory]
    skipped: str | None = Field(
        None, description="Why nothing was stored (`infer` without a model, no raw fallback)."
    )


class BulkProgress(BaseModel):
    """One line of a bulk add's answer (NDJSON): after each chunk, the messages done (the
    first `done` are stored); the last line also has every result, or the error that
    stopped the rest."""

    done: int = Field(description="Messages of the request stored so far, from the first.")
    total: int
    results: list[AddedMemory] | None = Field(
        None, description="On the last line: what the add did, message by message."
    )
    error: str | None = Field(
        None, description="On the last line, when storing stopped: why. Resend from `done`."
    )


class HistoryEvent(_Open):
    """One change of a memory, as mem0's history records it."""

    id: str
    memory_id: str
    old_memory: str | None = None
    new_memory: str | None = None
    event: str
    created_at: str | None = None
    updated_at: str | None = None
    is_deleted: bool = False
    actor_id: str | None = None
    role: str | None = None


class Entity(BaseModel):
    """A user, agent or run that owns memories."""

    type: Literal["user", "agent", "run"]
    name: str
    id: str
    total_memories: int


ItemT = TypeVar("ItemT", bound=BaseModel)


class Page(BaseModel, Generic[ItemT]):
    """A page of a listing, shaped like the mem0 Platform's (`next`/`previous` are URLs)."""

    count: int
    next: str | None
    previous: str | None
    results: list[ItemT]


class MemoryPage(Page[Memory]):
    """A page of memories (`POST /v3/memories/`)."""


class EntityPage(Page[Entity]):
    """A page of the users, agents and runs that own memories (`GET /v1/entities/`)."""


def page_of(
    request: Request, total: int, page: int, page_size: int, rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A `Page` of `rows`: the links repeat the request with the page next to this one."""

    def link(p: int) -> str | None:
        if p < 1 or (p - 1) * page_size >= total:
            return None
        return str(request.url.include_query_params(page=p, page_size=page_size))

    return {"count": total, "next": link(page + 1), "previous": link(page - 1), "results": rows}


# --- sessions -------------------------------------------------------------------------------


class Journalled(BaseModel):
    session_id: str
    journalled: int = Field(description="The exchange's sequence number in the journal.")


class Consolidated(BaseModel):
    """The session's journalled exchanges, now memory (`exchanges` 0: nothing was pending)."""

    session_id: str
    exchanges: int
    results: list[AddedMemory]


class ConsolidationStarted(BaseModel):
    session_id: str
    status: Literal["consolidating"]


# --- exports, imports and backups (the format: portability/document.py) ---------------------


class ExportCreated(BaseModel):
    message: str
    id: str = Field(description="The export's `memory_export_id`.")


class ScopeIds(BaseModel):
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


class ExportRetirement(BaseModel):
    at: str | None
    superseded_by: str | None
    because: str | None


class ExportItem(_Open):
    id: str
    memory: str
    hash: str | None
    created_at: str | None
    updated_at: str | None
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    actor_id: str | None
    role: str | None
    attributed_to: str | None = None
    expiration_date: str | None = None
    prev_id: str | None
    metadata: dict[str, Any]
    retired: ExportRetirement | None
    history: list[HistoryEvent]


class ExportCounts(BaseModel):
    memories: int
    history_events: int


class Export(_Open):
    """An export in the `memorystore.export/1` format, as `POST /v1/imports/` takes it back."""

    format: Literal["memorystore.export/1"]
    id: str
    created_at: str
    tenant: str
    scope: ScopeIds
    export_schema: dict[str, Any] = Field(alias="schema")
    counts: ExportCounts
    memories: list[ExportItem]


class Imported(BaseModel):
    imported: int
    skipped: list[str] = Field(description="The ids that exist already, left as they are.")
    history_events: int


class BackupFile(BaseModel):
    bytes: int
    sha256: str


class BackupManifest(_Open):
    """A backup's manifest (`manifest.json` in its directory under backup.path)."""

    format: str
    name: str
    tenant: str
    created_at: str
    finished_at: str
    memories: int
    history_events: int
    bytes: int
    embedder: dict[str, Any]
    collection: str
    files: dict[str, BackupFile]
    path: str
    duration_s: float | None = Field(None, description="How long the backup took (when taken).")


class ReindexProgress(BaseModel):
    """A re-index run's counts (what /readyz shows)."""

    total: int
    pending: int
    done: int
    re_embedded: int
    failed: int
    finished: bool


class ReindexAnswer(BaseModel):
    """POST /v1/reindex/: the index version, and how many memories are behind it (202: a run
    started on them; 200: none) or, while a run goes on (409), its progress."""

    version: str
    pending: int | None = None
    reindex: ReindexProgress | None = None
    detail: str | None = None
