"""The service's own small tables (idempotency records, session journal, exports) on either
database: a SQLite file per store (one replica), or the shared PostgreSQL (history.postgres).

Each store's logic is written once over `Tables` (single statements and transactions, `?`
placeholders in both dialects), with `LocalTables` and `PgTables` underneath.
"""

from __future__ import annotations

import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, ClassVar, Protocol

import psycopg

from memorystore.service.state import postgres


def open_local(path: Path, schema: str = "") -> sqlite3.Connection:
    """One connection shared by threads under the caller's lock, autocommit, WAL (a crash
    loses nothing committed), waiting for a second process rather than failing, and
    `secure_delete` on: a deleted row's bytes are overwritten, not left in a free page (an
    erasure must leave no text in the file; `checkpoint` then empties the WAL)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA secure_delete=ON")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA busy_timeout=5000")
    if schema:
        db.executescript(schema)
    return db


def checkpoint_local(db: sqlite3.Connection) -> bool:
    """Copy the WAL into the database file and empty it (after an erasure: the WAL still
    holds the pages as they were before the delete). False when a reader in another
    process kept part of it (the next checkpoint finishes the job)."""
    busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return not busy


def storable(text: str) -> bool:
    """Whether both stores can keep `text` as a key: PostgreSQL's text holds no NUL, and
    neither store takes a string UTF-8 cannot encode (a lone surrogate)."""
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def checked_key(text: str, field: str) -> str:
    """`text` if both stores can keep it as a key, else ValueError naming `field` (so the
    SQLite store refuses what the PostgreSQL one could not store)."""
    if not isinstance(text, str) or not storable(text):
        raise ValueError(f"{field}: must be a string without NUL or surrogate characters")
    return text


# --- statement runners: one SQL text for both databases ------------------------------------

Params = Sequence[Any]


class Statements(Protocol):
    """The statements of one transaction (`?` placeholders in both dialects)."""

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]: ...

    def many(self, sql: str, params: Iterable[Params]) -> None: ...


class Tables(ABC):
    """What the store logic needs of a database: single statements and transactions."""

    # The database's clock in seconds since the epoch, as SQL: times that replicas compare
    # (a session's last exchange against "now") come from one clock, not from each replica's.
    CLOCK: ClassVar[str]

    @abstractmethod
    def _rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """One statement in a transaction of its own; its rows (none for a command)."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Statements]:
        """Statements that commit together, or not at all."""

    @abstractmethod
    def close(self) -> None: ...

    def checkpoint(self) -> bool:
        """Leave no deleted row in the database's own log (SQLite's WAL); True when done.
        PostgreSQL's log and dead rows are the database server's (docs/operations/erasure.md)."""
        return True


class _SqliteStatements:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._db.execute(sql, params).fetchall()

    def many(self, sql: str, params: Iterable[Params]) -> None:
        self._db.executemany(sql, params)


class LocalTables(Tables):
    """One SQLite connection shared by this process's threads under a lock (`open_local`:
    WAL, busy timeout, so another process waits instead of failing)."""

    CLOCK = "((julianday('now') - 2440587.5) * 86400.0)"  # SQLite < 3.42: no unixepoch()

    def __init__(self, path: Path, schema: str) -> None:
        self._db = open_local(path, schema)
        self._mutex = threading.Lock()

    def _rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._mutex:
            return self._db.execute(sql, params).fetchall()

    @contextmanager
    def _transaction(self) -> Iterator[Statements]:
        """IMMEDIATE: the write lock is taken (waiting for another process) before a read, so
        a read-then-write transaction cannot fail half-way on a snapshot another process
        made stale; rolled back on any error, so the connection is never left inside one."""
        with self._mutex:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteStatements(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def checkpoint(self) -> bool:
        with self._mutex:
            return checkpoint_local(self._db)

    def close(self) -> None:
        with self._mutex:
            self._db.close()


def _pg_sql(sql: str) -> str:
    # the stores' SQL holds no literal `?` or `%`: only placeholders
    return sql.replace("?", "%s")


class _PgStatements:
    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self._connection = connection

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        cursor = self._connection.execute(_pg_sql(sql), params)
        return cursor.fetchall() if cursor.description else []

    def many(self, sql: str, params: Iterable[Params]) -> None:
        batch = list(params)
        if batch:
            self._connection.cursor().executemany(_pg_sql(sql), batch)


class PgTables(Tables):
    """Pooled connections of the shared `postgres.Database`; no lock of its own: each statement or
    transaction runs on its own connection, and PostgreSQL orders the replicas' writes."""

    CLOCK = "extract(epoch FROM clock_timestamp())::float8"

    def __init__(self, database: postgres.Database) -> None:
        self._database = database

    def _rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._database.execute(_pg_sql(sql), params)

    @contextmanager
    def _transaction(self) -> Iterator[Statements]:
        with self._database.transaction() as connection:
            yield _PgStatements(connection)

    def close(self) -> None:
        """Nothing to close: the Database is shared (the app closes it)."""
