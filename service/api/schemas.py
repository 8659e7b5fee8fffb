"""Request bodies and parameters of the HTTP API, and how a request's scope is read from them.

Field names follow the mem0 Platform REST API (snake_case), so `mem0.AsyncMemoryClient`
works unchanged. Options that client sends and the service has no use for are ignored.
"""

from __future__ import annotations

import json
import math
import unicodedata
import uuid
from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
    model_validator,
)

from memorystore.scope import (
    ID_PATTERN,
    IDENTITY_KEYS,
    MAX_ID_CHARS,
    ScopeError,
    id_problem,
)
from memorystore.service.engine.core import RESERVED_METADATA_KEYS

__all__ = [
    "EXPORT_FORMAT",
    "MAX_BATCH",
    "MAX_JSON_DEPTH",
    "AddRequest",
    "BackupRequest",
    "BatchDeleteItem",
    "BatchDeleteRequest",
    "BatchUpdateItem",
    "BatchUpdateRequest",
    "EndSessionRequest",
    "EntityId",
    "ExchangeRequest",
    "ExportDocument",
    "ExportGetRequest",
    "ExportRequest",
    "ExportScope",
    "ExportedMemory",
    "HistoryRow",
    "ListRequest",
    "Message",
    "PathId",
    "QueryId",
    "RecallRequest",
    "Retirement",
    "Scoped",
    "SearchRequest",
    "UpdateRequest",
    "check_metadata",
    "json_problem",
]

# Deeper JSON is refused: the vector store cannot read back a payload nested past 128 levels
# (every later read of that scope would fail), and filters are translated recursively.
MAX_JSON_DEPTH = 32


def _entity_id(value: str) -> str:
    problem = id_problem(value)
    if problem:
        raise ValueError(problem)
    return value


EntityId = Annotated[
    StrictStr,
    Field(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="An opaque id, matched exactly: no whitespace, control or format "
        "characters, and not `*` (there is no wildcard).",
        json_schema_extra={"pattern": ID_PATTERN},
    ),
    AfterValidator(_entity_id),
]


def _entity_id_or_none(value: str | None) -> str | None:
    return None if value is None else _entity_id(value)


# Entity ids in the query and the path: the same grammar as in bodies, refused with 422 when
# given empty or invalid (`?user_id=`, `?user_id=*`), never read as absent.
_ID_DOC = "An opaque id, matched exactly: no whitespace, control or format characters, and not `*`."
QueryId = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description=_ID_DOC,
        json_schema_extra={"pattern": ID_PATTERN},
    ),
    AfterValidator(_entity_id_or_none),
]
PathId = Annotated[
    str,
    Path(max_length=MAX_ID_CHARS, description=_ID_DOC, json_schema_extra={"pattern": ID_PATTERN}),
    AfterValidator(_entity_id),
]


def json_problem(value: Any, path: str, depth: int = 0) -> str | None:
    """`path: reason` for JSON nested too deep, holding a lone surrogate or NaN, else None.

    A lone surrogate (`"\\ud800"` in JSON) decodes to a str that neither the vector store
    nor SQLite can store, and NaN/Infinity (which Python's JSON parser accepts) no payload
    can hold, so both are refused up front, naming the field, instead of failing mid-write.
    """
    if depth > MAX_JSON_DEPTH:
        return f"{path}: nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(value, str):
        if any(unicodedata.category(c) == "Cs" for c in value):
            return f"{path}: contains a lone surrogate (not valid Unicode text)"
    elif isinstance(value, float):
        if not math.isfinite(value):
            return f"{path}: {value} is not a JSON number"
    elif isinstance(value, dict):
        for key, item in value.items():
            # the path is echoed in the response, which must stay encodable
            safe = str(key).encode("utf-8", "backslashreplace").decode()
            where = f"{path}.{safe}" if path else safe
            problem = json_problem(str(key), where) or json_problem(item, where, depth + 1)
            if problem:
                return problem
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problem = json_problem(item, f"{path}[{i}]", depth + 1)
            if problem:
                return problem
    return None


_CONDITIONS = {"type": "array", "items": {"type": "object"}}
_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": ID_PATTERN}
Filters = Annotated[
    dict[str, Any] | None,
    Field(
        description="mem0's filter language. user_id, agent_id and run_id: plain strings at "
        "the top level or one-key items of a top-level AND; every other key filters metadata "
        "(a value, or an operator object: eq, ne, in, nin, gt, gte, lt, lte, contains, "
        "icontains; `*` matches any value); AND, OR and NOT take lists of such objects.",
        json_schema_extra={
            "properties": {
                **{key: _ID_SCHEMA for key in IDENTITY_KEYS},
                **{key: _CONDITIONS for key in ("AND", "OR", "NOT")},
            }
        },
    ),
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        problem = json_problem(data, "")
        if problem:
            raise ValueError(problem)
        return data


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["user", "assistant", "system"]
    content: str = Field(min_length=1)
    name: str | None = Field(None, max_length=256)


class Scoped(_Body):
    user_id: EntityId | None = None
    agent_id: EntityId | None = None
    run_id: EntityId | None = None


class AddRequest(Scoped):
    messages: list[Message] = Field(min_length=1)
    metadata: dict[str, Any] | None = None
    infer: bool = True
    raw_fallback: bool = Field(
        True,
        description="With `infer` and no extraction model configured: store the messages as "
        "written (true, mem0's behaviour) or store nothing (false; project-scope write-back "
        "never stores raw turns).",
    )


class BulkAddRequest(Scoped):
    """Many messages stored as written (no extraction), in order, as one add of all of them
    would store them: in chunks of `limits.maxMessages`, a progress line after each."""

    messages: list[Message] = Field(min_length=1)
    metadata: dict[str, Any] | None = None


class SearchRequest(Scoped):
    query: str = Field(min_length=1)
    filters: Filters = None
    top_k: int = Field(10, ge=1)
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    include_retired: bool = Field(
        False,
        description="Also return retired memories (outdated, or merged into a fuller one); "
        "they carry retired_at, superseded_by and retired_because in metadata.",
    )


class ListRequest(Scoped):
    filters: Filters = None
    include_retired: bool = Field(
        False,
        description="Also return retired memories (outdated, or merged into a fuller one); "
        "they carry retired_at, superseded_by and retired_because in metadata.",
    )


class UpdateRequest(_Body):
    text: str | None = Field(None, min_length=1)
    metadata: dict[str, Any] | None = None


class RecallRequest(Scoped):
    query: str = Field(min_length=1)
    filters: Filters = None
    top_k: int | None = Field(None, ge=1)
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    token_budget: int | None = Field(None, ge=0)
    max_memory_chars: int | None = Field(None, ge=16)
    include_retired: bool = Field(
        False,
        description="Also return retired memories (outdated, or merged into a fuller one); "
        "they carry retired_at, superseded_by and retired_because in metadata.",
    )


class ExchangeRequest(Scoped):
    """One completed exchange of a session, journalled until the session is consolidated."""

    messages: list[Message] = Field(min_length=1)
    metadata: dict[str, Any] | None = None
    saved: bool = Field(
        False,
        description="The agent saved memories itself during this exchange (add_memory): "
        "without an extraction model its statements are not stored again.",
    )
    raw_fallback: bool = Field(
        True,
        description="Without an extraction model, store the user's statements (true) or "
        "nothing (false; project scope).",
    )


class EndSessionRequest(Scoped):
    wait: bool = Field(
        False,
        description="Answer when the session is consolidated, with what was written (200); "
        "false: answer at once (202) and consolidate in the background.",
    )


def check_metadata(metadata: dict[str, Any] | None) -> None:
    """Metadata may not set the scope or what the service writes itself: refused, not dropped."""
    for key in metadata or {}:
        if key in RESERVED_METADATA_KEYS:
            raise ScopeError(
                f"metadata.{key}: reserved (the scope and the service's own fields cannot be "
                "set through metadata)"
            )


# --- batch calls, exports and imports (portability/document.py) --------------------------------

MAX_BATCH = 1000  # memories per batch update / delete / import call, as on the mem0 Platform
EXPORT_FORMAT = "memorystore.export/1"


def _at_most_batch(value: Any) -> Any:
    """Checked before the items are, so 100 000 items are refused without reading them."""
    if isinstance(value, list) and len(value) > MAX_BATCH:
        raise ValueError(f"at most {MAX_BATCH} per call, not {len(value)}")
    return value


def _uuid(value: str) -> str:
    """A memory or history id: a UUID in its canonical spelling (what mem0 and the stores use)."""
    try:
        canonical = str(uuid.UUID(value))
    except ValueError:
        canonical = None
    if canonical != value:
        raise ValueError(f"{value[:64]!r} is not a UUID in canonical form")
    return value


MemoryIdText = Annotated[
    StrictStr,
    Field(min_length=1, max_length=MAX_ID_CHARS, description="A memory id (a UUID)."),
    AfterValidator(_entity_id),
]
Uuid = Annotated[StrictStr, Field(min_length=1, max_length=64), AfterValidator(_uuid)]
ShortText = Annotated[StrictStr, Field(max_length=MAX_ID_CHARS)]
Batch = BeforeValidator(_at_most_batch)


class _Strict(_Body):
    model_config = ConfigDict(extra="forbid")


class BatchUpdateItem(_Strict):
    memory_id: MemoryIdText
    text: StrictStr | None = Field(None, min_length=1)
    metadata: dict[str, Any] | None = None


class BatchDeleteItem(_Strict):
    memory_id: MemoryIdText


class BatchUpdateRequest(_Body):
    memories: Annotated[list[BatchUpdateItem], Batch] = Field(min_length=1)


class BatchDeleteRequest(_Body):
    memories: Annotated[list[BatchDeleteItem], Batch] = Field(min_length=1)


def _json_object(value: Any) -> Any:
    """The export schema: a JSON object, or (the client's `schema: str`) one encoded as text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError("must be a JSON object (or a string holding one)") from None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object (or a string holding one)")
    return value


class ExportRequest(Scoped):
    """`create_memory_export(schema, **kwargs)`: the scope top-level or in `filters`."""

    export_schema: Annotated[dict[str, Any], BeforeValidator(_json_object)] = Field(
        alias="schema",
        description="Stored and echoed in the export; the content is always the "
        f"`{EXPORT_FORMAT}` format (no model fills it in).",
    )
    filters: Filters = None


class ExportGetRequest(Scoped):
    """`get_memory_export(**kwargs)`: by `memory_export_id`, else the scope's latest export."""

    memory_export_id: ShortText | None = None
    filters: Filters = None


class ExportScope(_Strict):
    user_id: EntityId | None = None
    agent_id: EntityId | None = None
    run_id: EntityId | None = None


class HistoryRow(_Strict):
    """One row of mem0's history of a memory, as `GET /v1/memories/{id}/history/` shows it."""

    id: Uuid
    memory_id: Uuid
    old_memory: StrictStr | None = None
    new_memory: StrictStr | None = None
    event: Annotated[StrictStr, Field(min_length=1, max_length=32)]
    created_at: ShortText | None = None
    updated_at: ShortText | None = None
    is_deleted: bool = False
    actor_id: ShortText | None = None
    role: ShortText | None = None


class Retirement(_Strict):
    at: ShortText | None = None
    superseded_by: ShortText | None = None
    because: Annotated[StrictStr, Field(max_length=4096)] | None = None


class ExportedMemory(_Strict):
    id: Uuid
    memory: StrictStr = Field(min_length=1)
    hash: ShortText | None = None
    created_at: ShortText | None = None
    updated_at: ShortText | None = None
    user_id: EntityId | None = None
    agent_id: EntityId | None = None
    run_id: EntityId | None = None
    actor_id: ShortText | None = None
    role: ShortText | None = None
    attributed_to: ShortText | None = None
    expiration_date: ShortText | None = None
    prev_id: Uuid | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    retired: Retirement | None = None
    history: list[HistoryRow] = Field(default_factory=list)


class ExportDocument(_Strict):
    """An export as `POST /v1/exports/get/` returns it, and as `POST /v1/imports/` takes it."""

    format: Literal["memorystore.export/1"]
    id: ShortText | None = None
    created_at: ShortText | None = None
    tenant: ShortText | None = None
    scope: ExportScope
    export_schema: dict[str, Any] | None = Field(None, alias="schema")
    counts: dict[str, int] | None = None
    memories: Annotated[list[ExportedMemory], Batch]


class BackupRequest(_Strict):
    """`POST /v1/backups/`: the backup's name (its directory under backup.path)."""

    name: str = Field(min_length=1, max_length=253, description="A DNS-subdomain name.")
