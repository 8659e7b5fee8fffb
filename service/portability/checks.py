"""What an imported or restored memory, history row or journal row must be to be kept.

Why one module: an import (`POST /v1/imports/`) and a restore both write memories that did
not come through the API's write path, from documents and files someone else may have
written. Both run the same checks, and the same ones a write gets: literal ids (the one id
grammar, `memorystore.scope.id_problem`: no `*`, no whitespace, strings only), text within
`limits.maxMemoryChars`, mem0's hash, readable timestamps, no reserved metadata key, JSON a
payload can hold. Each failure is a FormatError whose message starts with where it is.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memorystore.config import Limits
from memorystore.scope import IDENTITY_KEYS, EntityIds, ScopeError
from memorystore.service.api.schemas import (
    MAX_JSON_DEPTH,
    ExportedMemory,
    HistoryRow,
    Message,
    check_metadata,
    json_problem,
)
from memorystore.service.engine.mem0_seam import memory_hash
from memorystore.service.state.tables import storable

__all__ = [
    "FormatError",
    "check_history_row",
    "check_journal_row",
    "check_memory",
    "metadata_problem",
    "strict_json",
    "timestamp_problem",
    "validated",
]

M = TypeVar("M", bound=BaseModel)


class FormatError(ValueError):
    """A memory, row or document that cannot be written; the message starts with its path."""


def validated(model: type[M], data: Any, at: str) -> M:
    """`data` as `model`, or a FormatError naming the first field at fault under `at`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"])
        where = f"{at}.{field}" if field else at
        raise FormatError(f"{where}: {error['msg'].removeprefix('Value error, ')}") from None


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key[:64]!r} is given twice in one object")
        found[key] = value
    return found


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _nested_deeper(value: Any, depth: int) -> bool:
    """Whether containers nest `depth` deep or more (only containers are visited)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, dict | list):
                if level + 1 >= depth:
                    return True
                stack.append((child, level + 1))
    return False


def _storable(value: Any) -> bool:
    """No lone surrogate anywhere (UTF-8 cannot encode one) and no deep nesting: the
    common case decided at C speed; `json_problem` then names what is wrong."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not isinstance(value, dict | list) or not _nested_deeper(value, MAX_JSON_DEPTH)


def strict_json(text: str | bytes, at: str) -> Any:
    """JSON as RFC 8259 has it: no NaN or Infinity, no key given twice in an object (which
    value would win is the reader's guess), nothing a payload cannot hold."""
    try:
        value = json.loads(
            text, object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant
        )
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise FormatError(f"{at}: not valid JSON ({reason[:200]})") from None
    if not _storable(value):
        problem = json_problem(value, "")
        if problem:
            raise FormatError(f"{at}.{problem}" if not problem.startswith(":") else at + problem)
    return value


def timestamp_problem(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return f"{value[:64]!r} is not an ISO 8601 timestamp"
    return None


def _uuid_problem(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        if str(uuid.UUID(value)) == value:
            return None
    except ValueError:
        pass
    return f"{value[:64]!r} is not a memory id (a UUID in canonical form)"


def metadata_problem(metadata: Mapping[str, Any], limit: int, at: str) -> str | None:
    """Metadata larger than limits.maxMetadataBytes, measured as it is stored (compact
    UTF-8 JSON), as a message naming `at`; None when it fits."""
    size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())
    if size > limit:
        return f"{at}: {size} bytes as JSON, more than limits.maxMetadataBytes ({limit})"
    return None


def _text(value: str | None, where: str, max_chars: int) -> None:
    if value is not None and len(value) > max_chars:
        raise FormatError(f"{where}: longer than limits.maxMemoryChars ({max_chars})")


def check_history_row(row: HistoryRow, memory_id: str | None, at: str, max_chars: int) -> None:
    """One mem0 history row: its texts within the limit, its times readable, and (given
    `memory_id`) the memory it belongs to."""
    if memory_id is not None and row.memory_id != memory_id:
        raise FormatError(f"{at}.memory_id: is not the memory's id {memory_id}")
    for field in ("old_memory", "new_memory"):
        _text(getattr(row, field), f"{at}.{field}", max_chars)
    for field in ("created_at", "updated_at"):
        problem = timestamp_problem(getattr(row, field))
        if problem:
            raise FormatError(f"{at}.{field}: {problem}")


def check_memory(m: ExportedMemory, at: str, max_chars: int, scope: EntityIds | None) -> None:
    """One memory as an import or a restore writes it: everything a write would refuse.

    `scope`: the import document's scope, which the memory must lie inside; a restore
    passes None (a backup holds every scope) and the memory then needs one id of its own."""
    _text(m.memory, f"{at}.memory", max_chars)
    if m.hash is not None and m.hash != memory_hash(m.memory):
        raise FormatError(f"{at}.hash: is not the md5 of `memory` (mem0's hash)")
    for field in ("created_at", "updated_at", "expiration_date"):
        problem = timestamp_problem(getattr(m, field))
        if problem:
            raise FormatError(f"{at}.{field}: {problem}")
    ids = {k: v for k in IDENTITY_KEYS if (v := getattr(m, k))}
    if scope is None:
        if not ids:
            raise FormatError(f"{at}: has no user_id, agent_id or run_id (every memory has one)")
    elif not scope.contains(ids):
        raise FormatError(
            f"{at}: its user_id/agent_id/run_id lie outside the document's scope {scope.filters()}"
        )
    try:
        check_metadata(m.metadata)
    except ScopeError as exc:
        raise FormatError(f"{at}.{exc}") from None
    problem = json_problem(m.metadata, f"{at}.metadata")
    if problem:
        raise FormatError(problem)
    if m.retired is not None:
        for field, problem in (
            ("at", timestamp_problem(m.retired.at)),
            ("superseded_by", _uuid_problem(m.retired.superseded_by)),
        ):
            if problem:
                raise FormatError(f"{at}.retired.{field}: {problem}")
    for j, row in enumerate(m.history):
        check_history_row(row, m.id, f"{at}.history[{j}]", max_chars)


_JOURNAL_MESSAGE_KEYS = frozenset({"role", "content", "name"})


def check_journal_row(row: Mapping[str, Any], at: str, limits: Limits) -> EntityIds:
    """One session-journal row (`lifecycle/journal.py`'s columns) as the exchanges API
    would have journalled it; returns its scope."""
    scope_text, session = row.get("scope"), row.get("session")
    if not isinstance(scope_text, str):
        raise FormatError(f"{at}.scope: must be text")
    scope_ids = strict_json(scope_text, f"{at}.scope")
    if not isinstance(scope_ids, dict) or not set(scope_ids) <= set(IDENTITY_KEYS):
        raise FormatError(f"{at}.scope: must be an object of user_id, agent_id, run_id")
    try:
        scope = EntityIds(**scope_ids)
    except (ValueError, TypeError) as exc:
        raise FormatError(f"{at}.scope.{exc}") from None
    if not scope or scope.key() != scope_text:
        raise FormatError(f"{at}.scope: is not a scope's canonical key")
    if not isinstance(session, str) or not session or not storable(session):
        raise FormatError(f"{at}.session: must be non-empty text without NUL or surrogates")
    if len(session) > 256:
        raise FormatError(f"{at}.session: longer than 256 characters")
    messages = strict_json(_text_of(row, "messages", at), f"{at}.messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= limits.max_messages:
        raise FormatError(f"{at}.messages: must be a list of 1 to {limits.max_messages} messages")
    for i, message in enumerate(messages):
        where = f"{at}.messages[{i}]"
        if not isinstance(message, dict) or not set(message) <= _JOURNAL_MESSAGE_KEYS:
            raise FormatError(f"{where}: must be an object of role, content, name")
        validated(Message, message, where)
        _text(message.get("content"), f"{where}.content", limits.max_memory_chars)
    metadata = strict_json(_text_of(row, "metadata", at), f"{at}.metadata")
    if not isinstance(metadata, dict):
        raise FormatError(f"{at}.metadata: must be an object")
    try:
        check_metadata(metadata)
    except ScopeError as exc:
        raise FormatError(f"{at}.{exc}") from None
    too_big = metadata_problem(metadata, limits.max_metadata_bytes, f"{at}.metadata")
    if too_big:
        raise FormatError(too_big)
    for flag in ("saved", "raw"):
        if row.get(flag) not in (0, 1) or isinstance(row.get(flag), float):
            raise FormatError(f"{at}.{flag}: must be 0 or 1")
    for field, optional in (("created", False), ("consolidated", True)):
        value = row.get(field)
        if value is None and optional:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise FormatError(f"{at}.{field}: must be a time in seconds")
        if not math.isfinite(value) or value < 0:
            raise FormatError(f"{at}.{field}: must be a time in seconds")
    seq = row.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise FormatError(f"{at}.seq: must be a positive integer")
    return scope


def _text_of(row: Mapping[str, Any], field: str, at: str) -> str:
    value = row.get(field)
    if not isinstance(value, str):
        raise FormatError(f"{at}.{field}: must be text")
    return value
