"""Idempotent writes: a retried request with the same Idempotency-Key replays the first answer.

Kept in its own SQLite file (WAL, busy timeout), separate from mem0's history DB, whose
single connection mem0 owns. Entries expire after `ttl_seconds`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memorystore.keyed_locks import KeyedLocks
from memorystore.service.local_db import open_local


class KeyReused(ValueError):
    """The key was first used for a different request: replaying would be wrong."""


def fingerprint(method: str, path: str, body: Any) -> str:
    raw = json.dumps([method, path, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


class IdempotencyStore:
    def __init__(self, path: Path, ttl_seconds: float = 24 * 3600) -> None:
        self._db = open_local(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, fingerprint TEXT, "
            "status INTEGER, response TEXT, created REAL)"
        )
        self._mutex = threading.Lock()
        self._key_locks = KeyedLocks()
        self.ttl = ttl_seconds

    def _get(self, key: str) -> tuple[str, int, str] | None:
        with self._mutex:
            row = self._db.execute(
                "SELECT fingerprint, status, response FROM idempotency WHERE key=? AND created>?",
                (key, time.time() - self.ttl),
            ).fetchone()
        return row

    def _put(self, key: str, fp: str, status: int, response: Any) -> None:
        with self._mutex:
            self._db.execute(
                "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, ?, ?)",
                (key, fp, status, json.dumps(response), time.time()),
            )
            self._db.execute("DELETE FROM idempotency WHERE created<?", (time.time() - self.ttl,))

    async def run(
        self, key: str, fp: str, action: Callable[[], Awaitable[tuple[int, Any]]]
    ) -> tuple[int, Any, bool]:
        """Run `action` once per key; returns (status, body, replayed)."""
        async with self._key_locks.hold(key):
            row = await asyncio.to_thread(self._get, key)
            if row is not None:
                if row[0] != fp:
                    raise KeyReused("Idempotency-Key was already used for a different request body")
                return row[1], json.loads(row[2]), True
            status, body = await action()
            if status < 500:
                await asyncio.to_thread(self._put, key, fp, status, body)
            return status, body, False

    def close(self) -> None:
        with self._mutex:
            self._db.close()
