"""The `memorystore.export/1` format: what an export holds, and every refusal of an import
document (the pure parts of service/portability/document.py; the HTTP round trip is in
tests/integration/test_export_batch.py)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from memorystore.scope import EntityIds
from memorystore.service.api.schemas import MAX_BATCH, ExportDocument, ExportRequest
from memorystore.service.engine.mem0_seam import memory_hash
from memorystore.service.portability.document import (
    FORMAT,
    FormatError,
    check_document,
    export_document,
    export_memory,
    payload_of,
)
from memorystore.service.retrieval.indexing import PREV_KEY, stored_index_texts
from memorystore.service.retrieval.reindex import INDEX_KEY
from memorystore.service.state.saved_exports import ExportStore
from memorystore.spec import RetrievalSettings

ID = str(uuid.UUID(int=0xABCDEF))
PREV = str(uuid.UUID(int=2))
ROW = str(uuid.UUID(int=3))
WHEN = "2026-01-02T03:04:05.000006+00:00"
TEXT = "I live in Hangzhou."
PAYLOAD: dict[str, Any] = {
    "data": TEXT,
    "hash": memory_hash(TEXT),
    "created_at": WHEN,
    "updated_at": WHEN,
    "text_lemmatized": "alice: I live in Hangzhou.",
    "user_id": "alice",
    "agent_id": "coach",
    "role": "user",
    "actor_id": "alice",
    PREV_KEY: PREV,
    INDEX_KEY: "multilingual/context/centred",
    "lifecycle": "retired",
    "retired_at": WHEN,
    "superseded_by": PREV,
    "retired_because": "moved",
    "topic": "home",
    "date": "2026-01-01",
}
HISTORY = [
    {
        "id": ROW,
        "memory_id": ID,
        "old_memory": None,
        "new_memory": TEXT,
        "event": "ADD",
        "created_at": WHEN,
        "updated_at": WHEN,
        "is_deleted": False,
        "actor_id": "alice",
        "role": "user",
    }
]


def document(**changes: Any) -> dict[str, Any]:
    doc = export_document(
        "e1", "tenant", EntityIds(user_id="alice"), {"type": "object"}, [(ID, PAYLOAD, HISTORY)]
    )
    doc.update(changes)
    return doc


def with_memory(**fields: Any) -> dict[str, Any]:
    doc = document()
    doc["memories"] = [{**doc["memories"][0], **fields}]
    return doc


def check(doc: dict[str, Any], max_chars: int = 2000) -> EntityIds:
    return check_document(ExportDocument.model_validate(doc), max_chars)


def test_an_exported_memory_separates_metadata_from_what_the_service_writes():
    item = export_memory(ID, PAYLOAD, HISTORY)
    assert item["metadata"] == {"topic": "home", "date": "2026-01-01"}
    assert item["retired"] == {"at": WHEN, "superseded_by": PREV, "because": "moved"}
    assert item["prev_id"] == PREV and item["agent_id"] == "coach" and item["run_id"] is None
    assert item["history"] == HISTORY
    assert export_memory(ID, {"data": "x"}, [])["retired"] is None


def test_a_document_counts_and_orders_its_memories():
    older = {**PAYLOAD, "created_at": "2025-01-01T00:00:00+00:00"}
    records = [(ID, PAYLOAD, HISTORY), (PREV, older, [])]
    doc = export_document("e", "t", EntityIds(user_id="alice"), {}, records)
    assert doc["format"] == FORMAT == "memorystore.export/1"
    assert doc["scope"] == {"user_id": "alice"}
    assert [m["id"] for m in doc["memories"]] == [PREV, ID]
    assert doc["counts"] == {"memories": 2, "history_events": 1}


def test_payload_of_inverts_export_memory_except_the_derived_fields():
    (memory,) = ExportDocument.model_validate(document()).memories
    payload = payload_of(memory, "v2", "now")
    derived = {k: v for k, v in PAYLOAD.items() if k != "text_lemmatized"}  # added at import
    assert payload == {**derived, INDEX_KEY: "v2"}


def test_missing_timestamps_and_hash_are_filled_in():
    (memory,) = ExportDocument.model_validate(
        with_memory(hash=None, created_at=None, updated_at=None, retired=None)
    ).memories
    payload = payload_of(memory, "v", "now")
    assert payload["hash"] == memory_hash(TEXT)
    assert payload["created_at"] == payload["updated_at"] == "now"
    assert "lifecycle" not in payload


def test_an_imported_memory_is_indexed_with_speaker_date_and_the_turn_before():
    (memory,) = ExportDocument.model_validate(document()).memories
    payload = payload_of(memory, "v", "now")
    asked: list[str] = []

    def before(memory_id: str) -> dict[str, Any]:
        asked.append(memory_id)
        return {"data": "hello", "actor_id": "bob"}

    texts = stored_index_texts(payload, RetrievalSettings(), before)
    assert asked == [PREV]
    assert texts.dense == "bob: hello\nalice: I live in Hangzhou."
    assert texts.lexical == "(2026-01-01) alice: I live in Hangzhou."
    plain = stored_index_texts(payload, RetrievalSettings(context=False), before)
    assert plain.dense == plain.lexical == TEXT


def test_a_valid_document_passes_and_names_its_scope():
    assert check(document()) == EntityIds(user_id="alice")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (document(scope={}), "scope"),
        (with_memory(memory="x" * 2001), "memories[0].memory"),
        (with_memory(hash="0" * 32), "memories[0].hash"),
        (with_memory(created_at="yesterday"), "memories[0].created_at"),
        (with_memory(updated_at="2026-13-01"), "memories[0].updated_at"),
        (with_memory(user_id="bob"), "memories[0]"),
        (with_memory(user_id=None), "memories[0]"),
        (with_memory(metadata={"user_id": "bob"}), "memories[0].metadata.user_id"),
        (with_memory(metadata={"index_version": "x"}), "memories[0].metadata.index_version"),
        (with_memory(history=[{**HISTORY[0], "memory_id": PREV}]), "memories[0].history[0]"),
        (with_memory(history=[HISTORY[0], HISTORY[0]]), "memories[0].history[1].id"),
        (
            with_memory(history=[{**HISTORY[0], "new_memory": "x" * 2001}]),
            "memories[0].history[0].new_memory",
        ),
        # checked as a restore checks a backup's memories (service/portability/checks.py)
        (with_memory(expiration_date="never"), "memories[0].expiration_date"),
        (with_memory(retired={"at": "later"}), "memories[0].retired.at"),
        (with_memory(retired={"superseded_by": "*"}), "memories[0].retired.superseded_by"),
        (
            with_memory(history=[{**HISTORY[0], "created_at": "yesterday"}]),
            "memories[0].history[0].created_at",
        ),
    ],
)
def test_check_document_names_the_field(doc: dict[str, Any], field: str):
    with pytest.raises(FormatError, match=r"^" + field.replace("[", r"\[").replace("]", r"\]")):
        check(doc)


def test_duplicate_memory_ids_are_refused():
    doc = document()
    doc["memories"] = doc["memories"] * 2
    with pytest.raises(FormatError, match=r"memories\[1\]\.id: .* twice"):
        check(doc)


@pytest.mark.parametrize(
    ("doc", "loc"),
    [
        (document(format="memorystore.export/2"), ("format",)),
        (document(scope={"user_id": "*"}), ("scope", "user_id")),
        (document(scope={"user_id": "a b"}), ("scope", "user_id")),
        (document(extra=1), ("extra",)),
        (with_memory(id="1"), ("memories", 0, "id")),
        (with_memory(id=ID.upper()), ("memories", 0, "id")),
        (with_memory(memory=""), ("memories", 0, "memory")),
        (with_memory(memory=5), ("memories", 0, "memory")),
        (with_memory(user_id="a\x00b"), ("memories", 0, "user_id")),
        (with_memory(prev_id="x"), ("memories", 0, "prev_id")),
        (with_memory(metadata=[]), ("memories", 0, "metadata")),
        (with_memory(history=[{**HISTORY[0], "id": "r"}]), ("memories", 0, "history", 0, "id")),
        (with_memory(surprise=True), ("memories", 0, "surprise")),
        (document(memories=[document()["memories"][0]] * (MAX_BATCH + 1)), ("memories",)),
    ],
)
def test_the_shape_is_refused_naming_the_field(doc: dict[str, Any], loc: tuple[Any, ...]):
    with pytest.raises(ValidationError) as caught:
        ExportDocument.model_validate(doc)
    assert caught.value.errors()[0]["loc"][: len(loc)] == loc


@pytest.mark.parametrize("schema", [[1], 5, "not json", '"a string"', None])
def test_the_export_schema_must_be_a_json_object(schema: Any):
    with pytest.raises(ValidationError) as caught:
        ExportRequest.model_validate({"schema": schema, "user_id": "alice"})
    assert caught.value.errors()[0]["loc"] == ("schema",)


def test_the_export_schema_may_come_as_text():
    request = ExportRequest.model_validate({"schema": '{"type": "object"}', "user_id": "a"})
    assert request.export_schema == {"type": "object"}


# --- the exports store (state/saved_exports.py) --------------------------------------------------


def stored(export_id: str, scope: dict[str, str], *members: dict[str, str]) -> dict[str, Any]:
    return {"id": export_id, "scope": scope, "memories": [dict(m) for m in members]}


def test_the_store_finds_by_id_and_the_latest_of_exactly_a_scope(tmp_path):
    store = ExportStore(tmp_path / "exports.db")
    alice, coach = {"user_id": "alice"}, {"user_id": "alice", "agent_id": "coach"}
    store.put(EntityIds(**alice), stored("a1", alice, alice))
    store.put(EntityIds(**alice), stored("a2", alice, alice, coach))
    store.put(EntityIds(**coach), stored("c1", coach, coach))
    assert store.get("a1") == (EntityIds(**alice), stored("a1", alice, alice))
    assert store.get("nope") is None
    assert store.latest(EntityIds(**alice))["id"] == "a2"
    assert store.latest(EntityIds(**coach))["id"] == "c1"
    assert store.latest(EntityIds(agent_id="coach")) is None
    store.close()


def test_forget_drops_every_export_holding_a_memory_of_the_scope(tmp_path):
    store = ExportStore(tmp_path / "exports.db")
    alice, coach = {"user_id": "alice"}, {"user_id": "alice", "agent_id": "coach"}
    agent, bob = {"agent_id": "coach"}, {"user_id": "bob"}
    store.put(EntityIds(**alice), stored("only-alice", alice, alice))
    store.put(EntityIds(**alice), stored("with-coach", alice, alice, coach))
    store.put(EntityIds(**alice), stored("empty", alice))
    store.put(EntityIds(**agent), stored("agent", agent, agent))
    store.put(EntityIds(**bob), stored("bob", bob, bob))
    assert store.forget(EntityIds(**coach)) == 1  # only the export that holds coach memories
    assert store.get("with-coach") is None and store.get("only-alice") is not None
    assert store.forget(EntityIds(**alice)) == 2  # alice's own, the empty one too
    assert store.forget(EntityIds(agent_id="coach")) == 1  # agent-only: never alice's
    assert store.get("bob") is not None
    store.close()


def test_exports_expire(tmp_path):
    store = ExportStore(tmp_path / "exports.db", retention_s=0.05)
    alice = {"user_id": "alice"}
    store.put(EntityIds(**alice), stored("old", alice))
    time.sleep(0.1)
    assert store.get("old") is None and store.latest(EntityIds(**alice)) is None
    store.put(EntityIds(**alice), stored("new", alice))  # prunes the expired one
    with store._mutex:
        ids = [row[0] for row in store._db.execute("SELECT id FROM exports")]
    assert ids == ["new"]
    store.close()
