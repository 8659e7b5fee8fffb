"""What the two SQLite files of a backup may hold: exactly the schema the service writes.

Why: a restore opens files someone else may have written. An SQLite file can carry more than
rows: triggers that run on a later write, views, indexes over expressions, virtual tables,
generated columns. A restore reads rows only, from files opened read-only and immutable,
and refuses any schema object the service does not create itself, naming it, before any
row is read. The expected schemas come from the running code (mem0's history columns in
`mem0_seam.HISTORY_COLUMNS`, the session journal as `SessionJournal` creates it), so a
change there changes what a restore accepts, and the contract tests say so.
"""

from __future__ import annotations

import functools
import sqlite3
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memorystore.service.engine.mem0_seam import HISTORY_COLUMNS
from memorystore.service.lifecycle.journal import SessionJournal
from memorystore.service.portability.backup.files import SESSIONS, BackupError

__all__ = [
    "Schema",
    "check_schema",
    "history_schema",
    "journal_schema",
    "read_schema",
    "tables",
]

# mem0's own table of recent messages (extraction context): format 1 backups carry it; it is
# never restored (a cache of raw messages, not memories), only its shape is checked
_MEM0_MESSAGES = ("id", "session_scope", "role", "content", "name", "created_at")


@dataclass(frozen=True)
class Schema:
    """What an SQLite file may hold: tables with exactly these columns, these indexes."""

    tables: Mapping[str, frozenset[str]]
    indexes: frozenset[str]


def read_schema(db: sqlite3.Connection) -> Schema:
    tables, indexes = {}, set()
    for kind, name in db.execute("SELECT type, name FROM sqlite_master").fetchall():
        if kind == "table":
            columns = db.execute(f'PRAGMA table_xinfo("{name}")').fetchall()
            tables[name] = frozenset(str(c[1]) for c in columns)
        elif kind == "index":
            indexes.add(name)
    return Schema(tables, frozenset(indexes))


def history_schema(legacy: bool = False) -> Schema:
    """mem0's history table (mem0_seam.HISTORY_COLUMNS); format 1 also had mem0's messages."""
    tables = {"history": frozenset(HISTORY_COLUMNS)}
    indexes = {"sqlite_autoindex_history_1"}
    if legacy:
        tables["messages"] = frozenset(_MEM0_MESSAGES)
        indexes.add("sqlite_autoindex_messages_1")
    return Schema(tables, frozenset(indexes))


@functools.cache
def journal_schema() -> tuple[str, Schema]:
    """The session journal's table and schema, as the running code creates them (so a
    change to the journal changes what a restore expects, and its tests say so)."""
    with tempfile.TemporaryDirectory(prefix="memorystore-schema-") as tmp:
        path = Path(tmp) / SESSIONS
        SessionJournal(path).close()
        db = sqlite3.connect(path)
        try:
            schema = read_schema(db)
        finally:
            db.close()
    (table,) = [t for t in schema.tables if not t.startswith("sqlite_")]
    return table, schema


def tables(db: sqlite3.Connection) -> set[str]:
    rows = db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    return {str(name) for (name,) in rows}


def check_schema(db: sqlite3.Connection, file: str, expected: Schema) -> None:
    """Refuse, naming it, any schema object the service does not write into this file."""
    rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    for kind, name, _, sql in rows:
        if kind == "table":
            if name not in expected.tables:
                raise BackupError(f"refused: {file} has a table {name!r} the service never writes")
            if str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
                raise BackupError(f"refused: {file}'s table {name!r} is a virtual table")
        elif kind == "index":
            if name not in expected.indexes:
                raise BackupError(f"refused: {file} has an index {name!r} the service never writes")
        else:
            raise BackupError(
                f"refused: {file} has a {kind} {name!r}: a backup holds tables of rows only"
            )
    for table in tables(db):
        columns = db.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
        names = {str(c[1]) for c in columns}
        extra = sorted(names - expected.tables[table])
        missing = sorted(expected.tables[table] - names)
        if extra or missing:
            raise BackupError(
                f"refused: {file}'s table {table!r} has "
                + (f"columns the service never writes: {extra}" if extra else "")
                + ("; " if extra and missing else "")
                + (f"no column {missing}" if missing else "")
            )
        hidden = [str(c[1]) for c in columns if c[6]]
        if hidden:
            raise BackupError(f"refused: {file}'s table {table!r} has generated columns {hidden}")
