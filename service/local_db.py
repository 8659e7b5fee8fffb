"""The service's own small SQLite files (idempotency keys, session journal, exports)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_local(path: Path, schema: str = "") -> sqlite3.Connection:
    """One connection shared by threads under the caller's lock, autocommit, WAL (a crash
    loses nothing committed), waiting for a second process rather than failing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA busy_timeout=5000")
    if schema:
        db.executescript(schema)
    return db
