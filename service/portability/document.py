"""Exports and imports of a scope's memories: the `memorystore.export/1` format.

`POST /v1/exports/` writes an export of one scope (`user_id`, `agent_id`, `run_id`: the same
scope rules as list and search, so a user's export also holds that user's agent and run
memories); `POST /v1/exports/get/` reads it back; `POST /v1/imports/` writes a document of
this format back into a store (this one, or another tenant's after a migration).

The mem0 Platform fills a caller's Pydantic JSON schema from the memories with a model; this
service has no model to spare for that (none is required), so the `schema` given is only
stored and echoed, and the content is always this format:

    {"format": "memorystore.export/1", "id": "<uuid>", "created_at": "<iso>",
     "tenant": "<tenant>", "scope": {"user_id": "alice"}, "schema": {...as given...},
     "counts": {"memories": N, "history_events": M},
     "memories": [{"id", "memory", "hash", "created_at", "updated_at",
                   "user_id", "agent_id", "run_id", "actor_id", "role",
                   "attributed_to", "expiration_date",   # only when the memory has them
                   "prev_id",        # the memory written just before it (a turn's context)
                   "metadata": {...the caller's metadata only...},
                   "retired": null | {"at", "superseded_by", "because"},
                   "history": [{"id", "memory_id", "old_memory", "new_memory", "event",
                                "created_at", "updated_at", "is_deleted", "actor_id",
                                "role"}]}]}

Retired memories (outdated or merged, still stored) are included with `retired` set, and
every memory with its full mem0 history. What the service derives (the keyword text, the
index version, the vectors) is left out: an import recomputes it with the importing
service's embedder and index settings, so an export moves between embedders.

An export is built when it is requested, synchronously and under no lock: memories written
or changed while it is read may or may not be in it (each one is read whole), the same
guarantee a paginated listing gives. An import is validated whole before anything is
written (the first problem is refused with 422 naming `memories[i].field`); then each
memory is written under its scope's write lock, with its id, text, hash, timestamps, scope,
speaker, metadata, retirement and history rows (their ids and timestamps) as exported. A
memory whose id exists already is skipped and reported, so an import can be repeated.
The document's `id`, `created_at`, `tenant`, `schema` and `counts` are informative: a
bigger export is imported in pieces (the same document with a slice of `memories`).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

from memorystore.scope import EntityIds
from memorystore.service.api.schemas import EXPORT_FORMAT, ExportDocument, ExportedMemory
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.engine.mem0_seam import (
    HISTORY_COLUMNS,
    MEM0_PAYLOAD_KEYS,
    PROMOTED_KEYS,
    memory_hash,
)
from memorystore.service.lifecycle.retirement import (
    LIFECYCLE_KEY,
    REASON_KEY,
    RETIRED,
    RETIRED_AT_KEY,
    RETIRED_KEYS,
    SUCCESSOR_KEY,
)
from memorystore.service.portability.checks import FormatError, check_memory
from memorystore.service.retrieval.indexing import PREV_KEY, stored_index_texts
from memorystore.service.retrieval.reindex import INDEX_KEY

__all__ = [
    "FORMAT",
    "RECORD_FIELDS",
    "FormatError",
    "build_export",
    "check_document",
    "document_scope",
    "export_document",
    "export_memory",
    "import_document",
    "payload_of",
]

FORMAT = EXPORT_FORMAT
# payload keys carried as top-level fields of an exported memory
RECORD_FIELDS = (*PROMOTED_KEYS, "expiration_date")
# payload keys that are not the caller's metadata: what mem0 and the service write
_NOT_METADATA = frozenset(
    {*MEM0_PAYLOAD_KEYS, *RECORD_FIELDS, *RETIRED_KEYS, PREV_KEY, INDEX_KEY, "id"}
)


# --- export ---------------------------------------------------------------------------------


def export_memory(
    memory_id: str, payload: dict[str, Any], history: list[dict[str, Any]]
) -> dict[str, Any]:
    """One stored memory (its payload and mem0 history rows) as an exported memory."""
    item: dict[str, Any] = {
        "id": memory_id,
        "memory": payload.get("data", ""),
        "hash": payload.get("hash"),
        "created_at": payload.get("created_at"),
        "updated_at": payload.get("updated_at"),
        "user_id": payload.get("user_id"),
        "agent_id": payload.get("agent_id"),
        "run_id": payload.get("run_id"),
        "actor_id": payload.get("actor_id"),
        "role": payload.get("role"),
    }
    for key in ("attributed_to", "expiration_date"):
        if payload.get(key) is not None:
            item[key] = payload[key]
    item["prev_id"] = payload.get(PREV_KEY)
    item["metadata"] = {k: v for k, v in payload.items() if k not in _NOT_METADATA}
    item["retired"] = (
        {
            "at": payload.get(RETIRED_AT_KEY),
            "superseded_by": payload.get(SUCCESSOR_KEY),
            "because": payload.get(REASON_KEY),
        }
        if payload.get(LIFECYCLE_KEY) == RETIRED
        else None
    )
    item["history"] = [{k: row.get(k) for k in HISTORY_COLUMNS} for row in history]
    return item


def export_document(
    export_id: str,
    tenant: str,
    scope: EntityIds,
    schema: dict[str, Any],
    records: list[tuple[str, dict[str, Any], list[dict[str, Any]]]],
    created_at: str | None = None,
) -> dict[str, Any]:
    """The export of `records` (id, payload, history), oldest memory first."""
    memories = [export_memory(*record) for record in records]
    memories.sort(key=lambda m: (str(m["created_at"] or ""), m["id"]))
    return {
        "format": FORMAT,
        "id": export_id,
        "created_at": created_at or datetime.now(UTC).isoformat(),
        "tenant": tenant,
        "scope": scope.filters(),
        "schema": schema,
        "counts": {
            "memories": len(memories),
            "history_events": sum(len(m["history"]) for m in memories),
        },
        "memories": memories,
    }


async def build_export(
    engine: MemoryEngine, tenant: str, scope: EntityIds, schema: dict[str, Any]
) -> dict[str, Any]:
    """Read `scope` now (no lock: see the module docstring) into a new export."""
    records = await engine.export_records(scope)
    return export_document(str(uuid.uuid4()), tenant, scope, schema, records)


# --- import ---------------------------------------------------------------------------------


def document_scope(doc: ExportDocument) -> EntityIds:
    scope = EntityIds(**doc.scope.model_dump(exclude_none=True))
    if not scope:
        raise FormatError("scope: a scope is required: give user_id, agent_id or run_id")
    return scope


def check_document(doc: ExportDocument, max_chars: int) -> EntityIds:
    """Every problem an import can find without the store, first one raised (FormatError).

    Returns the document's scope. Each memory must lie inside it, so an import writes where
    its scope says and nowhere else; each is checked as a restore checks one
    (`checks.check_memory`), and no memory or history row id may be given twice."""
    scope = document_scope(doc)
    seen: dict[str, int] = {}
    rows_seen: dict[str, str] = {}
    for i, m in enumerate(doc.memories):
        at = f"memories[{i}]"
        if m.id in seen:
            raise FormatError(f"{at}.id: {m.id} is given twice (also memories[{seen[m.id]}])")
        seen[m.id] = i
        check_memory(m, at, max_chars, scope)
        for j, row in enumerate(m.history):
            where = f"{at}.history[{j}]"
            if row.id in rows_seen:
                raise FormatError(f"{where}.id: {row.id} is given twice (also {rows_seen[row.id]})")
            rows_seen[row.id] = where
    return scope


def payload_of(m: ExportedMemory, version: str, now: str) -> dict[str, Any]:
    """The stored payload of an exported memory, as the service writes one: mem0's fields,
    ours, the caller's metadata and this service's index version (the keyword text is
    added once it is computed from this payload)."""
    payload: dict[str, Any] = dict(m.metadata)
    for key in RECORD_FIELDS:
        value = getattr(m, key)
        if value is not None:
            payload[key] = value
    payload.update(
        {
            "data": m.memory,
            "hash": m.hash or memory_hash(m.memory),
            "created_at": m.created_at or now,
            "updated_at": m.updated_at or m.created_at or now,
            INDEX_KEY: version,
        }
    )
    if m.prev_id:
        payload[PREV_KEY] = m.prev_id
    if m.retired is not None:
        payload[LIFECYCLE_KEY] = RETIRED
        for key, value in (
            (RETIRED_AT_KEY, m.retired.at),
            (SUCCESSOR_KEY, m.retired.superseded_by),
            (REASON_KEY, m.retired.because),
        ):
            if value is not None:
                payload[key] = value
    return payload


IMPORT_BATCH = 64  # memories embedded per call: one batch, bounded memory


async def import_document(
    engine: MemoryEngine, doc: ExportDocument, max_chars: int
) -> dict[str, Any]:
    """Validate the whole document, then write its memories; see the module docstring."""
    check_document(doc, max_chars)
    row_ids = [row.id for m in doc.memories for row in m.history]
    owners = await engine.history_ids_in_use(row_ids)
    for i, m in enumerate(doc.memories):
        for j, row in enumerate(m.history):
            owner = owners.get(row.id)
            if owner is not None and owner != m.id:
                raise FormatError(
                    f"memories[{i}].history[{j}].id: {row.id} is a history row of another memory"
                )
    in_document = {m.id: {"data": m.memory, "actor_id": m.actor_id} for m in doc.memories}

    def previous_payload(memory_id: str) -> dict[str, Any] | None:
        """The memory a turn was written after: in this document, else already stored."""
        if memory_id in in_document:
            return in_document[memory_id]
        record = engine.store.get(vector_id=memory_id)
        return None if record is None else (record.payload or {})

    now = datetime.now(UTC).isoformat()
    settings = engine.cfg.retrieval
    imported, events, skipped = 0, 0, []
    for start in range(0, len(doc.memories), IMPORT_BATCH):
        batch = doc.memories[start : start + IMPORT_BATCH]
        payloads, dense = [], []
        for m in batch:
            payload = payload_of(m, engine.index_version, now)
            texts = await asyncio.to_thread(stored_index_texts, payload, settings, previous_payload)
            payload["text_lemmatized"] = texts.lexical
            payloads.append(payload)
            dense.append(texts.dense)
        vectors = await engine.passage_vectors(dense)
        for m, payload, vector in zip(batch, payloads, vectors, strict=True):
            rows = [row.model_dump() for row in m.history]
            written = await engine.restore_memory(m.id, payload, vector, rows)
            if written is None:
                skipped.append(m.id)
            else:
                imported += 1
                events += written
    return {"imported": imported, "skipped": skipped, "history_events": events}
