"""A backup's records, each checked as an import checks one (service/portability/backup/
records.py and portability/checks.py): generated valid memories are kept exactly as read,
and generated hostile ones are refused naming the field. The expected SQLite schemas are the
running code's, so a change to the journal or to mem0's history table fails here first."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.config import SecretSource, ServiceConfig
from memorystore.service.engine.core import RESERVED_METADATA_KEYS
from memorystore.service.engine.mem0_seam import HISTORY_COLUMNS, memory_hash
from memorystore.service.portability.backup import records
from memorystore.service.portability.backup import schema as schemas
from memorystore.service.portability.checks import FormatError, strict_json

CFG = ServiceConfig(api_key=SecretSource(file="/nonexistent"))
WHEN = "2026-01-02T03:04:05.000006+00:00"

ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_:é中", min_size=1, max_size=20)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=20),
)
metadata = st.dictionaries(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10).filter(
        lambda k: k not in RESERVED_METADATA_KEYS and k != "id"
    ),
    values,
    max_size=4,
)


@st.composite
def payloads(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    text = draw(st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1))
    payload: dict[str, Any] = {**draw(metadata)}
    scope = draw(
        st.dictionaries(
            st.sampled_from(["user_id", "agent_id", "run_id"]), ids, min_size=1, max_size=3
        )
    )
    payload.update(scope)
    payload.update(
        {
            "data": text,
            "hash": memory_hash(text),
            "created_at": WHEN,
            "updated_at": WHEN,
            "index_version": "multilingual/context/centred",
            "text_lemmatized": text,
        }
    )
    if draw(st.booleans()):
        payload["role"] = "user"
    if draw(st.booleans()):
        payload["prev_id"] = str(uuid.uuid4())
    return str(uuid.uuid4()), payload


def line(memory_id: str, payload: dict[str, Any]) -> bytes:
    return json.dumps({"id": memory_id, "payload": payload}, ensure_ascii=False).encode()


@settings(max_examples=200, deadline=None)
@given(record=payloads())
def test_a_memory_as_the_service_writes_it_is_kept_exactly(record):
    memory_id, payload = record
    kept = records.memory_record(line(memory_id, payload), "line 1", CFG)
    assert kept.memory_id == memory_id and kept.payload == payload


HOSTILE = [
    ("user_id", 123),
    ("user_id", "*"),
    ("agent_id", "a b"),
    ("run_id", ""),
    ("user_id", ["alice"]),
    ("data", ""),
    ("data", None),
    ("hash", "0" * 32),
    ("created_at", "yesterday"),
    ("prev_id", "not-a-uuid"),
    ("index_version", 7),
    ("lifecycle", "bogus"),
    ("text_lemmatized", {"x": 1}),
    ("retired_at", "x"),
]


@settings(max_examples=150, deadline=None)
@given(record=payloads(), edit=st.sampled_from(HOSTILE))
def test_a_hostile_payload_is_refused_naming_the_field(record, edit):
    memory_id, payload = record
    field, value = edit
    payload = {**payload, field: value}
    if field == "data" and value:  # keep the hash consistent with the new text
        payload["hash"] = memory_hash(value)
    with pytest.raises(FormatError) as caught:
        records.memory_record(line(memory_id, payload), "line 1", CFG)
    message = str(caught.value)
    assert message.startswith("line 1"), message
    expected = {"data": "memory", "retired_at": "payload"}.get(field, field)
    assert expected in message, message


def test_a_memory_without_any_scope_is_refused():
    memory_id, payload = str(uuid.uuid4()), {"data": "x", "hash": memory_hash("x")}
    payload.update({"created_at": WHEN, "updated_at": WHEN, "index_version": "v"})
    with pytest.raises(FormatError, match="has no user_id, agent_id or run_id"):
        records.memory_record(line(memory_id, payload), "line 1", CFG)


def test_metadata_over_the_limit_is_refused():
    memory_id, payload = str(uuid.uuid4()), {"data": "x", "hash": memory_hash("x")}
    payload.update({"created_at": WHEN, "updated_at": WHEN, "index_version": "v"})
    payload.update({"user_id": "u", "blob": "x" * CFG.limits.max_metadata_bytes})
    with pytest.raises(FormatError, match=r"limits\.maxMetadataBytes"):
        records.memory_record(line(memory_id, payload), "line 1", CFG)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1, "a": 2}', "given twice"),
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": Infinity}', "Infinity is not a JSON number"),
        ('{"a": "\\ud800"}', "lone surrogate"),
        ("[" * 100 + "]" * 100, "nested deeper"),
    ],
)
def test_json_that_a_payload_cannot_hold_is_refused(text: str, reason: str):
    with pytest.raises(FormatError, match=reason):
        strict_json(text, "at")


def journal_values(**changes: Any) -> tuple[Any, ...]:
    row = {
        "seq": 1,
        "scope": '{"user_id": "carol"}',
        "session": "walk",
        "messages": '[{"role": "user", "content": "hi", "name": null}]',
        "metadata": "{}",
        "saved": 0,
        "raw": 1,
        "created": 1.0,
        "consolidated": None,
        **changes,
    }
    return tuple(row[c] for c in records.JOURNAL_COLUMNS)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"scope": '{"user_id": "*"}'}, "scope.user_id"),
        ({"scope": '{"user_id":"carol"}'}, "canonical key"),
        ({"session": ""}, "session"),
        ({"messages": "[]"}, "messages: must be a list of 1"),
        ({"messages": '[{"role": "god", "content": "x"}]'}, "messages[0].role"),
        ({"messages": '[{"role": "user", "content": "x", "evil": 1}]'}, "messages[0]"),
        ({"metadata": '{"user_id": "x"}'}, "metadata.user_id: reserved"),
        ({"saved": 2}, "saved"),
        ({"created": float("nan")}, "created"),
        ({"consolidated": "soon"}, "consolidated"),
    ],
)
def test_a_hostile_journal_row_is_refused_naming_the_column(changes, reason):
    assert records.journal_row(journal_values(), "row 1", CFG).filters() == {"user_id": "carol"}
    with pytest.raises(FormatError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        records.journal_row(journal_values(**changes), "row 1", CFG)


def test_every_journal_column_the_service_creates_is_checked():
    """A column added to the journal must get a check here before a restore accepts it."""
    table, schema = schemas.journal_schema()
    assert set(schema.tables[table]) == set(records.JOURNAL_COLUMNS)


def test_the_history_schema_is_mem0s(tmp_path: Path):
    """mem0's own history table, as it creates it, is what a restore expects."""
    from mem0.memory.storage import SQLiteManager

    SQLiteManager(str(tmp_path / "history.db")).close()
    db = sqlite3.connect(tmp_path / "history.db")
    try:
        live = schemas.read_schema(db)
    finally:
        db.close()
    expected = schemas.history_schema()
    assert live.tables["history"] == expected.tables["history"] == set(HISTORY_COLUMNS)
    assert expected.indexes <= live.indexes
    # format 1's extra table is mem0's message cache, exactly
    legacy = schemas.history_schema(legacy=True)
    assert legacy.tables["messages"] == live.tables["messages"]


def test_a_record_limit_is_what_no_request_could_exceed():
    limit = records.record_limit(CFG)
    assert limit > 2 * CFG.limits.max_request_bytes
    assert limit > 4 * CFG.limits.max_memory_chars
