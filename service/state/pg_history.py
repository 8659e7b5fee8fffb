"""mem0's change history in PostgreSQL (history.postgres), shared by the service's replicas.

mem0 keeps its history in SQLite (`mem0.memory.storage.SQLiteManager`) and has no plan to
make it pluggable (mem0 issues 3098, 3925), so this class has the same methods and returns
the same rows: `mem0_seam.use_history` puts it where mem0 calls them. Columns and their text
timestamps are mem0's, so the API answers the same on either store. Rows of one memory come
back in mem0's order (created_at, then updated_at), ties in the order they were written.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from memorystore.service.engine.mem0_seam import HISTORY_COLUMNS, history_values
from memorystore.service.state.postgres import Database, Migration

__all__ = ["MIGRATIONS", "PgHistory"]

MESSAGES_KEPT = 10  # mem0 keeps a session scope's last 10 messages (its save_messages)

MIGRATIONS = [
    Migration(
        "history",
        1,
        "mem0's history and messages tables",
        """
        CREATE TABLE IF NOT EXISTS memorystore_history (
            id text PRIMARY KEY,
            memory_id text NOT NULL,
            old_memory text,
            new_memory text,
            event text NOT NULL,
            created_at text,
            updated_at text,
            is_deleted integer NOT NULL DEFAULT 0,
            actor_id text,
            role text,
            seq bigint GENERATED ALWAYS AS IDENTITY
        );
        CREATE INDEX IF NOT EXISTS memorystore_history_memory
            ON memorystore_history (memory_id, created_at, updated_at, seq);
        CREATE TABLE IF NOT EXISTS memorystore_messages (
            id text PRIMARY KEY,
            session_scope text NOT NULL,
            role text,
            content text,
            name text,
            created_at text NOT NULL,
            seq bigint GENERATED ALWAYS AS IDENTITY
        );
        CREATE INDEX IF NOT EXISTS memorystore_messages_scope
            ON memorystore_messages (session_scope, created_at, seq);
        """,
    )
]

_INSERT = (
    f"INSERT INTO memorystore_history ({', '.join(HISTORY_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * len(HISTORY_COLUMNS))})"
)


def _row(values: Iterable[Any]) -> dict[str, Any]:
    row = dict(zip(HISTORY_COLUMNS, values, strict=True))
    row["is_deleted"] = bool(row["is_deleted"])
    return row


class PgHistory:
    """`SQLiteManager`'s interface on a shared PostgreSQL database."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def add_history(
        self,
        memory_id: str,
        old_memory: str | None,
        new_memory: str | None,
        event: str,
        *,
        created_at: str | None = None,
        updated_at: str | None = None,
        is_deleted: int = 0,
        actor_id: str | None = None,
        role: str | None = None,
    ) -> None:
        self.batch_add_history(
            [
                {
                    "memory_id": memory_id,
                    "old_memory": old_memory,
                    "new_memory": new_memory,
                    "event": event,
                    "created_at": created_at,
                    "updated_at": updated_at,
                    "is_deleted": is_deleted,
                    "actor_id": actor_id,
                    "role": role,
                }
            ]
        )

    def batch_add_history(self, records: list[dict[str, Any]]) -> None:
        """The records, each under a new row id, in one transaction (as mem0's)."""
        values = history_values([{**r, "id": str(uuid.uuid4())} for r in records])
        with self.database.transaction() as connection:
            connection.cursor().executemany(_INSERT, values)

    def get_history(self, memory_id: str) -> list[dict[str, Any]]:
        rows = self.database.execute(
            f"SELECT {', '.join(HISTORY_COLUMNS)} FROM memorystore_history "
            "WHERE memory_id = %s ORDER BY created_at, updated_at, seq",
            (memory_id,),
        )
        return [_row(r) for r in rows]

    def save_messages(self, messages: list[dict[str, Any]], session_scope: str) -> None:
        if not messages:
            return
        now = datetime.now(UTC).isoformat()
        rows = [
            (str(uuid.uuid4()), session_scope, m.get("role"), m.get("content"), m.get("name"), now)
            for m in messages
        ]
        with self.database.transaction() as connection:
            connection.cursor().executemany(
                "INSERT INTO memorystore_messages (id, session_scope, role, content, name, "
                "created_at) VALUES (%s, %s, %s, %s, %s, %s)",
                rows,
            )
            connection.execute(
                "DELETE FROM memorystore_messages WHERE session_scope = %s AND id NOT IN ("
                "SELECT id FROM memorystore_messages WHERE session_scope = %s "
                "ORDER BY created_at DESC, seq DESC LIMIT %s)",
                (session_scope, session_scope, MESSAGES_KEPT),
            )

    def get_last_messages(self, session_scope: str, limit: int = 10) -> list[dict[str, Any]]:
        rows = self.database.execute(
            "SELECT role, content, name, created_at FROM (SELECT role, content, name, "
            "created_at, seq FROM memorystore_messages WHERE session_scope = %s "
            "ORDER BY created_at DESC, seq DESC LIMIT %s) last ORDER BY created_at, seq",
            (session_scope, limit),
        )
        return [dict(zip(("role", "content", "name", "created_at"), r, strict=True)) for r in rows]

    def reset(self) -> None:
        """Empty both tables (mem0's drops them; the schema here belongs to the migrations)."""
        with self.database.transaction() as connection:
            connection.execute("DELETE FROM memorystore_history")
            connection.execute("DELETE FROM memorystore_messages")

    def close(self) -> None:
        """Nothing of its own to close: the Database is the engine's, which closes it."""

    # --- what the service adds (portability: import keeps row ids and timestamps) --------

    def ids_in_use(self, ids: list[str]) -> dict[str, str]:
        """Which of these row ids exist: row id → the memory it belongs to."""
        if not ids:
            return {}
        rows = self.database.execute(
            "SELECT id, memory_id FROM memorystore_history WHERE id = ANY(%s)", (ids,)
        )
        return {str(row_id): str(owner) for row_id, owner in rows}

    def replace(self, memory_id: str, rows: list[dict[str, Any]]) -> int:
        """Make `memory_id`'s history exactly `rows`, in one transaction."""
        values = history_values(rows)
        with self.database.transaction() as connection:
            connection.execute("DELETE FROM memorystore_history WHERE memory_id = %s", (memory_id,))
            connection.cursor().executemany(_INSERT, values)
        return len(values)

    def count(self) -> int:
        return int(self.database.execute("SELECT count(*) FROM memorystore_history")[0][0])

    # --- erasure (mem0_seam.purge_history, purge_messages) ---------------------------------

    def purge(self, memory_ids: list[str]) -> int:
        """Delete every row of these memories (an erasure: no text, no row left)."""
        return self._delete_where_any("memorystore_history", "memory_id", memory_ids)

    def session_scopes(self) -> list[str]:
        rows = self.database.execute("SELECT DISTINCT session_scope FROM memorystore_messages")
        return [str(scope) for (scope,) in rows]

    def purge_messages(self, session_scopes: list[str]) -> int:
        """Delete the recent messages mem0 keeps for these session scopes."""
        return self._delete_where_any("memorystore_messages", "session_scope", session_scopes)

    def _delete_where_any(self, table: str, column: str, values: list[str]) -> int:
        if not values:
            return 0
        rows = self.database.execute(
            f"DELETE FROM {table} WHERE {column} = ANY(%s) RETURNING 1", (values,)
        )
        return len(rows)
