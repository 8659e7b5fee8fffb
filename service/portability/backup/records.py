"""A backup's records, each checked before it is kept: memories, history rows, journal rows.

Why: a backup is files on a volume, and a restore writes what they hold into the store
verbatim (the memories keep their ids, timestamps and vectors). So each record goes through
exactly what an import checks (`portability/checks.py`): a memory's payload is read as an
exported memory, checked, written back as a payload the way an import writes one, and kept
only when that gives back the very payload read, so no key or value reaches the store that
no check saw. Sizes are bounded before anything is parsed: a line or a value longer than a
request could ever have written (`record_limit`) is refused as soon as it is seen.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import model_validator

from memorystore.config import ServiceConfig
from memorystore.scope import MAX_ID_CHARS, EntityIds
from memorystore.service.api.schemas import ExportedMemory, HistoryRow
from memorystore.service.engine.mem0_seam import HISTORY_COLUMNS
from memorystore.service.portability.checks import (
    FormatError,
    check_history_row,
    check_journal_row,
    check_memory,
    metadata_problem,
    strict_json,
    validated,
)
from memorystore.service.portability.document import export_memory, payload_of
from memorystore.service.retrieval.reindex import INDEX_KEY

__all__ = [
    "JOURNAL_COLUMNS",
    "LEXICAL_KEY",
    "MemoryRecord",
    "history_row",
    "journal_row",
    "memory_record",
    "rechecked",
    "record_limit",
]

LEXICAL_KEY = "text_lemmatized"  # the keyword text, derived from the memory's text
# the session journal's columns a restore knows how to check (lifecycle/journal.py)
JOURNAL_COLUMNS = (
    "seq",
    "scope",
    "session",
    "messages",
    "metadata",
    "saved",
    "raw",
    "created",
    "consolidated",
)


def record_limit(cfg: ServiceConfig) -> int:
    """The most bytes one record (a memory's line, a history or journal value) may take:
    twice what one request may carry, plus a memory's text in the widest encoding sixteen
    times over (its keyword text and escapes). Anything longer no write could have made."""
    limits = cfg.limits
    return 2 * limits.max_request_bytes + 16 * 4 * limits.max_memory_chars


class _Memory(ExportedMemory):
    """An exported memory read from a line `strict_json` has checked whole already (no
    surrogate, no NaN, no deep nesting): the per-field JSON walk is not repeated."""

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        return data


class _HistoryRow(HistoryRow):
    """A history row read from SQLite, whose text is valid UTF-8 (Python's sqlite3 refuses
    anything else) and holds no float: nothing for the JSON walk to find."""

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        return data


class MemoryRecord:
    """One memory of a backup, checked: its id, vector row number and payload."""

    __slots__ = ("memory_id", "payload")

    def __init__(self, memory_id: str, payload: dict[str, Any]) -> None:
        self.memory_id = memory_id
        self.payload = payload


def _first_difference(read: Mapping[str, Any], rebuilt: Mapping[str, Any]) -> str:
    for key in sorted(set(read) | set(rebuilt), key=str):
        if read.get(key, ...) != rebuilt.get(key, ...):
            return str(key)
    return "?"


def memory_record(line: bytes, at: str, cfg: ServiceConfig) -> MemoryRecord:
    """A memories.jsonl.gz line as a checked memory, or FormatError naming why."""
    record = strict_json(line, at)
    if not isinstance(record, dict) or set(record) != {"id", "payload"}:
        raise FormatError(f"{at}: must be an object of exactly `id` and `payload`")
    memory_id, payload = record["id"], record["payload"]
    if not isinstance(payload, dict):
        raise FormatError(f"{at}.payload: must be an object")
    item = export_memory(memory_id, payload, [])
    memory = validated(_Memory, item, at)
    check_memory(memory, at, cfg.limits.max_memory_chars, None)
    too_big = metadata_problem(memory.metadata, cfg.limits.max_metadata_bytes, f"{at}.metadata")
    if too_big:
        raise FormatError(too_big)
    version, lexical = payload.get(INDEX_KEY), payload.get(LEXICAL_KEY)
    if not isinstance(version, str) or not 0 < len(version) <= MAX_ID_CHARS:
        raise FormatError(f"{at}.payload.{INDEX_KEY}: must be an index version (text)")
    if lexical is not None and not isinstance(lexical, str):
        raise FormatError(f"{at}.payload.{LEXICAL_KEY}: must be text")
    rebuilt = payload_of(memory, version, "")
    if lexical is not None:
        rebuilt[LEXICAL_KEY] = lexical
    if rebuilt != payload:
        key = _first_difference(payload, rebuilt)
        raise FormatError(
            f"{at}.payload.{key}: not what a memory's payload holds (a payload is kept only "
            "as an import would write it)"
        )
    return MemoryRecord(memory.id, payload)


def history_row(values: Sequence[Any], at: str, cfg: ServiceConfig) -> dict[str, Any]:
    """A history.db row (HISTORY_COLUMNS order) as a checked row dict."""
    row = dict(zip(HISTORY_COLUMNS, values, strict=True))
    checked = validated(_HistoryRow, row, at)
    check_history_row(checked, None, at, cfg.limits.max_memory_chars)
    return checked.model_dump()


def journal_row(values: Sequence[Any], at: str, cfg: ServiceConfig) -> EntityIds:
    """Check a sessions.db row (JOURNAL_COLUMNS order); its scope."""
    return check_journal_row(dict(zip(JOURNAL_COLUMNS, values, strict=True)), at, cfg.limits)


class _Rechecked:
    """The records of bytes already checked record by record: a restore's second pass reads
    files whose SHA-256 it compares again at the end of each (and moves nothing in unless
    each is the one the first pass checked), so it only parses them."""

    @staticmethod
    def memory_record(line: bytes, at: str, cfg: ServiceConfig) -> MemoryRecord:
        record = json.loads(line)
        return MemoryRecord(record["id"], record["payload"])

    @staticmethod
    def history_row(values: Sequence[Any], at: str, cfg: ServiceConfig) -> dict[str, Any]:
        row = dict(zip(HISTORY_COLUMNS, values, strict=True))
        row["is_deleted"] = bool(row["is_deleted"])
        return row

    @staticmethod
    def journal_row(values: Sequence[Any], at: str, cfg: ServiceConfig) -> EntityIds:
        scope = values[JOURNAL_COLUMNS.index("scope")]
        return EntityIds(**json.loads(scope))


rechecked = _Rechecked()
