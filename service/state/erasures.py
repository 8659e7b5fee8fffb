"""The erasure ledger: what was erased, when, without the text.

Backups taken before an erasure cannot be edited, so every erasure is also written down: the
time, the digest of the erased scope's key (or none, for single memories) and the ids of the
memories deleted. A restore re-applies every erasure it can find (the backup's own ledger,
the backup target's and the live state's): a memory an erasure covers is never written back,
nor its history rows, nor a journal row or stored export of an erased scope. Re-applying is
idempotent, so applying the whole ledger is as right as applying only what came after the
backup, and never depends on clocks agreeing.

The digest is SHA-256 of the scope's canonical key (`EntityIds.key()`): the ledger holds no
id in clear, yet a restore can tell whether a memory falls under an erased scope by digesting
every scope that contains it (`scopes_containing`).

A scope erasure covers what the scope held when it was recorded: a memory created later
(`created_at` after the erasure's `at`), or a journal row or stored export made later, is the
scope's new life (a user who came back), not what was erased, so re-applying an old erasure
never deletes it. An erasure by id covers that memory whenever it was created.

This module is the pure part (the record, its line format, the predicates). Where the ledger
is kept (the state's tables, the backup target) is beside the stores that keep it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import combinations
from typing import Any

from memorystore.scope import IDENTITY_KEYS, OWNER_KEY, EntityIds, id_problem, scope_key

__all__ = [
    "Erasure",
    "ErasureSet",
    "Forgotten",
    "LedgerError",
    "epoch",
    "now",
    "scope_digest",
    "scopes_containing",
]


class LedgerError(ValueError):
    """A ledger line that is not an erasure record; the message names the line and field."""


def now() -> str:
    """The time an erasure is recorded with: RFC 3339, UTC, microseconds."""
    return datetime.now(UTC).isoformat()


def epoch(when: str | None) -> float | None:
    """An RFC 3339 time as seconds since the epoch; None when absent or unreadable (a time
    without a zone is taken as UTC, as mem0 writes none without one)."""
    if not isinstance(when, str):
        return None
    try:
        parsed = datetime.fromisoformat(when)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def scope_digest(ids: Mapping[str, str] | EntityIds) -> str:
    """SHA-256 (hex) of a scope's canonical key."""
    key = ids.key() if isinstance(ids, EntityIds) else scope_key(ids)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def scopes_containing(payload: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every scope whose reads would include a memory with this payload.

    A scope names a subset of the memory's ids; a scope without a user matches only memories
    that have no user (`confined_to_no_user`), so when the memory has a user every scope
    containing it names that user."""
    ids = {k: payload[k] for k in IDENTITY_KEYS if isinstance(payload.get(k), str) and payload[k]}
    names = sorted(ids)
    found = []
    for size in range(1, len(names) + 1):
        for chosen in combinations(names, size):
            if OWNER_KEY in ids and OWNER_KEY not in chosen:
                continue
            found.append({k: ids[k] for k in chosen})
    return found


_DIGEST_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Erasure:
    """One erasure: a whole scope (`scope_digest` set) or single memories (`memory_ids` only)."""

    at: str
    scope_digest: str | None = None
    memory_ids: tuple[str, ...] = field(default_factory=tuple)

    @property
    def when(self) -> float:
        """`at` in seconds since the epoch (a parsed record always has a readable one)."""
        seconds = epoch(self.at)
        assert seconds is not None
        return seconds

    def line(self) -> str:
        """The record as one JSON line (the ledger file's format)."""
        return json.dumps(
            {"at": self.at, "scope": self.scope_digest, "memories": list(self.memory_ids)},
            separators=(",", ":"),
        )

    @classmethod
    def parse(cls, line: str, where: str = "ledger") -> Erasure:
        """A record from `line`, checked field by field (a ledger is read from backups too)."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LedgerError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(data, dict) or set(data) != {"at", "scope", "memories"}:
            raise LedgerError(f"{where}: expected exactly the keys at, scope, memories")
        at, digest, memories = data["at"], data["scope"], data["memories"]
        if not isinstance(at, str):
            raise LedgerError(f"{where}.at: must be a string")
        try:
            when = datetime.fromisoformat(at)
        except ValueError:
            raise LedgerError(f"{where}.at: {at[:40]!r} is not an RFC 3339 time") from None
        if when.tzinfo is None:
            raise LedgerError(f"{where}.at: {at[:40]!r} has no time zone")
        if digest is not None and not (
            isinstance(digest, str) and len(digest) == 64 and set(digest) <= _DIGEST_CHARS
        ):
            raise LedgerError(f"{where}.scope: must be null or a SHA-256 hex digest")
        if not isinstance(memories, list):
            raise LedgerError(f"{where}.memories: must be a list of memory ids")
        for i, memory_id in enumerate(memories):
            problem = id_problem(memory_id)
            if problem:
                raise LedgerError(f"{where}.memories[{i}]: {problem}")
        if digest is None and not memories:
            raise LedgerError(f"{where}: erases nothing (no scope, no memory)")
        return cls(at=at, scope_digest=digest, memory_ids=tuple(memories))


class ErasureSet:
    """Many erasures at once, asked whether they cover a memory, a scope or a history row."""

    def __init__(self, erasures: Iterable[Erasure] = ()) -> None:
        self.erasures = list(erasures)
        # each erased scope's digest -> the latest time it was erased
        self._digests: dict[str, float] = {}
        for e in self.erasures:
            if e.scope_digest:
                self._digests[e.scope_digest] = max(
                    e.when, self._digests.get(e.scope_digest, e.when)
                )
        self._ids = {i for e in self.erasures for i in e.memory_ids}

    def __bool__(self) -> bool:
        return bool(self.erasures)

    @property
    def memory_ids(self) -> frozenset[str]:
        """Every id erased by id (a scope erasure lists the memories it deleted too)."""
        return frozenset(self._ids)

    def memory_erased(self, memory_id: str, payload: Mapping[str, Any] | None = None) -> bool:
        """The memory was erased by id, or falls under a scope erased after it was created
        (a memory without a readable `created_at` counts as created before)."""
        if memory_id in self._ids:
            return True
        if payload is None or not self._digests:
            return False
        return self._covered(payload, epoch(payload.get("created_at")))

    def scope_erased(
        self, ids: Mapping[str, str] | EntityIds, created: float | None = None
    ) -> bool:
        """This exact scope was erased (a journal row's or a stored export's scope), or a
        wider one containing all its memories was: a scope with a user is covered by that
        user's erasure. With `created` (seconds since the epoch), only by an erasure made
        after that time."""
        found = ids.filters() if isinstance(ids, EntityIds) else dict(ids)
        return self._covered(found, created)

    def _covered(self, ids: Mapping[str, Any], created: float | None) -> bool:
        for scope in scopes_containing(ids):
            at = self._digests.get(scope_digest(scope))
            if at is not None and (created is None or created < at):
                return True
        return False

    def lines(self) -> list[str]:
        return [e.line() for e in self.erasures]


@dataclass(frozen=True)
class Forgotten:
    """One erasure as the places that keep text see it: the record, and the payloads of the
    memories it covers that were still stored when it ran (empty when it is re-applied after
    they were deleted: what depends on their text was then done already)."""

    erasure: Erasure
    memories: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def erased(self) -> ErasureSet:
        return ErasureSet([self.erasure])

    @property
    def whole_scope(self) -> bool:
        return self.erasure.scope_digest is not None

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self.erasure.memory_ids) | frozenset(self.memories)

    def texts(self) -> set[str]:
        """The erased memories' texts (the ones known), for the places that hold copies."""
        found = (payload.get("data") for payload in self.memories.values())
        return {text for text in found if isinstance(text, str) and text}
