"""Idempotent writes: a retried request with the same Idempotency-Key replays the first answer.

The records live in their own SQLite file (WAL, busy timeout), separate from mem0's history
DB whose single connection mem0 owns, or in PostgreSQL (history.postgres), where a retry
through another replica finds them too. A key is held while its first request runs (an
in-process lock, and with PostgreSQL an advisory lock across replicas), so a retry that
arrives meanwhile waits and replays instead of writing twice. Entries expire after
`ttl_seconds`.

A stored answer repeats what was written (an add's texts), so each record also keeps the ids
of the memories its answer names; an erasure deletes every record naming an erased memory
(`forget_erased`), and a retry of that key then runs again instead of handing the text back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar, Protocol

from memorystore.keyed_locks import KeyedLocks
from memorystore.service.state.erasures import Forgotten
from memorystore.service.state.postgres import Migration
from memorystore.service.state.tables import LocalTables, PgTables, Tables

TTL_SECONDS = 24 * 3600
# keys of an answer whose values are memory ids (an add's results: written, repeated, retired)
ID_KEYS = ("id", "duplicate_of", "superseded_by")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, fingerprint TEXT, "
    "status INTEGER, response TEXT, created REAL, memories TEXT NOT NULL DEFAULT '[]')"
)

MIGRATIONS = [
    Migration(
        "idempotency",
        1,
        "idempotency records",
        """
        CREATE TABLE IF NOT EXISTS memorystore_idempotency (
            key text PRIMARY KEY,
            fingerprint text NOT NULL,
            status integer NOT NULL,
            response text NOT NULL,
            created double precision NOT NULL
        );
        CREATE INDEX IF NOT EXISTS memorystore_idempotency_created
            ON memorystore_idempotency (created);
        """,
    ),
    Migration(
        "idempotency",
        2,
        "the memories each stored answer names (erasure)",
        "ALTER TABLE memorystore_idempotency ADD COLUMN memories text NOT NULL DEFAULT '[]';",
    ),
]


class KeyReused(ValueError):
    """The key was first used for a different request: replaying would be wrong."""


def memory_ids(body: Any) -> list[str]:
    """Every memory id an answer names (`ID_KEYS` at any depth), each once, in order."""

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ID_KEYS and isinstance(item, str):
                    yield item
                else:
                    yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    return list(dict.fromkeys(walk(body)))


def fingerprint(method: str, path: str, body: Any) -> str:
    raw = json.dumps([method, path, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


class Locks(Protocol):
    def hold(self, key: Hashable) -> AbstractAsyncContextManager[None]: ...


class _Records(Tables):
    """The records over either database; `_table` names the table."""

    _table: ClassVar[str]

    def get(self, key: str, since: float) -> tuple[str, int, str] | None:
        rows = self._rows(
            f"SELECT fingerprint, status, response FROM {self._table} WHERE key=? AND created>?",
            (key, since),
        )
        return (str(rows[0][0]), int(rows[0][1]), str(rows[0][2])) if rows else None

    def put(
        self,
        key: str,
        fp: str,
        status: int,
        response: str,
        now: float,
        since: float,
        memories: list[str] | None = None,
    ) -> None:
        named = json.dumps(memories or [])
        with self._transaction() as statements:
            statements.rows(
                f"INSERT INTO {self._table} "
                "(key, fingerprint, status, response, created, memories) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                "fingerprint=excluded.fingerprint, status=excluded.status, "
                "response=excluded.response, created=excluded.created, "
                "memories=excluded.memories",
                (key, fp, status, response, now, named),
            )
            statements.rows(f"DELETE FROM {self._table} WHERE created<?", (since,))

    def forget_erased(self, forgotten: Forgotten) -> int:
        """Delete every record whose answer names an erased memory; returns how many."""
        doomed_ids = forgotten.ids
        with self._transaction() as statements:
            rows = statements.rows(f"SELECT key, memories, response FROM {self._table}")
            doomed = [
                (key,)
                for key, named, response in rows
                if doomed_ids.intersection(json.loads(named) or memory_ids(json.loads(response)))
            ]
            statements.many(f"DELETE FROM {self._table} WHERE key=?", doomed)
        return len(doomed)


class LocalRecords(_Records, LocalTables):
    _table = "idempotency"

    def __init__(self, path: Path) -> None:
        LocalTables.__init__(self, path, _SCHEMA)
        columns = {row[1] for row in self._rows(f"PRAGMA table_info({self._table})")}
        if "memories" not in columns:  # a file written before erasures named memories
            self._rows(f"ALTER TABLE {self._table} ADD COLUMN memories TEXT NOT NULL DEFAULT '[]'")


class PgRecords(_Records, PgTables):
    _table = "memorystore_idempotency"


class IdempotencyStore:
    def __init__(
        self, records: _Records, locks: Locks | None = None, ttl_seconds: float = TTL_SECONDS
    ) -> None:
        self._records = records
        self._key_locks = locks if locks is not None else KeyedLocks()
        self.ttl = ttl_seconds

    async def run(
        self, key: str, fp: str, action: Callable[[], Awaitable[tuple[int, Any]]]
    ) -> tuple[int, Any, bool]:
        """Run `action` once per key; returns (status, body, replayed)."""
        async with self._key_locks.hold(key):
            row = await asyncio.to_thread(self._records.get, key, time.time() - self.ttl)
            if row is not None:
                if row[0] != fp:
                    raise KeyReused("Idempotency-Key was already used for a different request body")
                return row[1], json.loads(row[2]), True
            status, body = await action()
            if status < 500:
                now = time.time()
                await asyncio.to_thread(
                    self._records.put,
                    key,
                    fp,
                    status,
                    json.dumps(body),
                    now,
                    now - self.ttl,
                    memory_ids(body),
                )
            return status, body, False

    def forget_erased(self, forgotten: Forgotten) -> int:
        """An erasure's part here: no stored answer names an erased memory afterwards."""
        return self._records.forget_erased(forgotten)

    def checkpoint(self) -> bool:
        return self._records.checkpoint()

    def close(self) -> None:
        self._records.close()
