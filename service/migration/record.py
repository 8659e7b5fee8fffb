"""What a store remembers of its embedder migration: the state, and the settings of every
embedder that has an index, so a restarted service opens the same indexes.

Why a record apart from the config: the config says which embedder is wanted, but the live
index was made by the embedder that was wanted before, and only the store knows which. It
is kept beside the store's other state (a JSON file in the data directory, replaced
atomically), written before the service acts on a step: a crash leaves either the old
record with nothing done, or the new one with its actions to redo (each is idempotent).

With PostgreSQL the record is a row of the store's database instead, which every replica
reads (`PgRecords`), beside one row per replica saying which state it routes by (its
acknowledgement, `acknowledge`): the replica that carries the migration out waits for every
live replica to route by a new state before it acts on it.

A store that has no record yet (made before migrations existed, or new) gets one naming
the configured embedder as live: until now a store's embedder could not change.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from memorystore.service.migration.state import Phase, State
from memorystore.service.state import postgres
from memorystore.spec import EmbedderSettings

__all__ = [
    "MIGRATIONS",
    "RECORD_FILE",
    "FileRecords",
    "IndexRecord",
    "MigrationRecord",
    "PgRecords",
    "Records",
    "collection_of",
    "load",
    "save",
]

RECORD_FILE = "embedder-migration.json"
# what of an embedder's settings the record keeps: what makes its vectors (never a secret)
_KEPT = ("provider", "model", "base_url", "dimensions", "threads", "runtime")


def collection_of(base: str, origin: str, index: str) -> str:
    """The collection an index lives in: the store's own for the index it was created with
    (its memories stay where they are), `<collection>_<index>` for any later one."""
    if index == origin:
        return base
    return f"{base}_{re.sub(r'[^a-z0-9]+', '_', index.lower()).strip('_')}"


@dataclass
class IndexRecord:
    """One index's embedder, and how far its back-fill went (for status; the back-fill
    itself resumes from what the index holds, not from these counts)."""

    embedder: dict[str, Any]
    done: int = 0
    total: int = 0

    def settings(self) -> EmbedderSettings:
        return EmbedderSettings.model_validate(self.embedder)


@dataclass
class MigrationRecord:
    state: State
    origin: str  # the index the store was created with: it keeps the store's collection
    indexes: dict[str, IndexRecord] = field(default_factory=dict)
    # indexes the state no longer names whose deletion is not known to be done
    pending_drops: dict[str, IndexRecord] = field(default_factory=dict)
    errors: int = 0  # memories a back-fill could not embed (retried on the next pass)
    last_error: str | None = None
    # shared records: the embedder the most recently started replica is configured with (a
    # replica still running an older config during a rollout must not act on its own)
    asked: str | None = None

    @classmethod
    def new(cls, embedder: EmbedderSettings) -> MigrationRecord:
        name = embedder.index_name()
        return cls(State(name), name, {name: IndexRecord(kept_settings(embedder))})

    def as_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "state": state_json(self.state),
            "origin": self.origin,
            "indexes": {name: asdict(index) for name, index in self.indexes.items()},
            "pending_drops": {name: asdict(i) for name, i in self.pending_drops.items()},
            "errors": self.errors,
            "last_error": self.last_error,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> MigrationRecord:
        try:
            raw = dict(data["state"])
            raw["phase"] = Phase(raw["phase"])
            state = State(**raw)
            indexes = {
                str(name): IndexRecord(**index) for name, index in dict(data["indexes"]).items()
            }
            drops = {
                str(name): IndexRecord(**index)
                for name, index in dict(data.get("pending_drops") or {}).items()
            }
            record = cls(state, str(data["origin"]), indexes, drops)
            record.errors = int(data.get("errors") or 0)
            record.last_error = data.get("last_error")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: not an embedder migration record ({exc})") from None
        missing = [i for i in state.writes if i not in indexes]
        if missing:
            raise ValueError(f"{where}: the record names no embedder for index {missing[0]!r}")
        return record


def kept_settings(embedder: EmbedderSettings) -> dict[str, Any]:
    dumped = embedder.model_dump(mode="json")
    return {key: dumped[key] for key in _KEPT if dumped.get(key) is not None}


def load(path: Path) -> MigrationRecord | None:
    """The record at `path`, None when there is none; ValueError naming the file when it
    cannot be read (a start-up error: guessing the live index could serve wrong vectors)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not an embedder migration record")
    return MigrationRecord.from_json(data, str(path))


def save(path: Path, record: MigrationRecord) -> None:
    """Replace the record atomically and durably (written aside, synced, renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.tmp")
    with open(aside, "w", encoding="utf-8") as handle:
        json.dump(record.as_json(), handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(aside, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class Records(Protocol):
    """Where a store's migration record lives. With one replica the replica calls are
    no-ops; shared records are read by several replicas, which acknowledge each state."""

    shared: bool

    def load(self) -> MigrationRecord | None: ...

    def save(self, record: MigrationRecord) -> None: ...

    def create_if_absent(self, record: MigrationRecord) -> MigrationRecord: ...

    def ask(self, index: str, started: float) -> None: ...

    def acknowledge(self, replica: str, state: State) -> None: ...

    def lagging(self, state: State, within_s: float) -> list[str]: ...

    def forget(self, replica: str) -> None: ...


class FileRecords:
    """The record as a file in the data directory (one process owns the store)."""

    shared = False

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> MigrationRecord | None:
        return load(self.path)

    def save(self, record: MigrationRecord) -> None:
        save(self.path, record)

    def create_if_absent(self, record: MigrationRecord) -> MigrationRecord:
        found = self.load()
        if found is None:
            self.save(record)
            return record
        return found

    # one replica: nobody else asks, follows or lags
    def ask(self, index: str, started: float) -> None:
        return None

    def acknowledge(self, replica: str, state: State) -> None:
        return None

    def lagging(self, state: State, within_s: float) -> list[str]:
        return []

    def forget(self, replica: str) -> None:
        return None


MIGRATIONS: list[postgres.Migration] = [
    postgres.Migration(
        "embedder_migration",
        1,
        "embedder migration record and replica acknowledgements",
        """
CREATE TABLE memorystore_embedder_migration (
    id smallint PRIMARY KEY CHECK (id = 1),
    record jsonb NOT NULL,
    asked text,
    asked_at double precision
);
CREATE TABLE memorystore_embedder_migration_acks (
    replica text PRIMARY KEY,
    state jsonb NOT NULL,
    seen timestamptz NOT NULL DEFAULT now()
);
""",
    )
]


class PgRecords:
    """The record as the one row of a table in the store's database (replicas share it)."""

    shared = True

    def __init__(self, database: postgres.Database) -> None:
        self.database = database

    def load(self) -> MigrationRecord | None:
        rows = self.database.execute("SELECT record, asked FROM memorystore_embedder_migration")
        if not rows:
            return None
        data, asked = rows[0]
        if not isinstance(data, dict):
            raise ValueError("memorystore_embedder_migration: not an embedder migration record")
        record = MigrationRecord.from_json(data, "memorystore_embedder_migration")
        record.asked = asked
        return record

    def ask(self, index: str, started: float) -> None:
        """Record `index` as the one asked for, unless a replica started later asked first."""
        self.database.execute(
            "UPDATE memorystore_embedder_migration SET asked = %s, asked_at = %s "
            "WHERE id = 1 AND (asked_at IS NULL OR asked_at <= %s)",
            (index, started, started),
        )

    def save(self, record: MigrationRecord) -> None:
        self.database.execute(
            "INSERT INTO memorystore_embedder_migration (id, record) VALUES (1, %s::jsonb) "
            "ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            (json.dumps(record.as_json()),),
        )

    def create_if_absent(self, record: MigrationRecord) -> MigrationRecord:
        """The stored record, or `record` stored (replicas starting together agree)."""
        self.database.execute(
            "INSERT INTO memorystore_embedder_migration (id, record) VALUES (1, %s::jsonb) "
            "ON CONFLICT (id) DO NOTHING",
            (json.dumps(record.as_json()),),
        )
        found = self.load()
        assert found is not None
        return found

    def acknowledge(self, replica: str, state: State) -> None:
        self.database.execute(
            "INSERT INTO memorystore_embedder_migration_acks (replica, state, seen) "
            "VALUES (%s, %s::jsonb, now()) ON CONFLICT (replica) DO UPDATE "
            "SET state = excluded.state, seen = now()",
            (replica, json.dumps(state_json(state))),
        )

    def lagging(self, state: State, within_s: float) -> list[str]:
        """The replicas seen within `within_s` that do not route by `state` yet."""
        rows = self.database.execute(
            "SELECT replica, state FROM memorystore_embedder_migration_acks "
            "WHERE seen > now() - make_interval(secs => %s)",
            (within_s,),
        )
        wanted = state_json(state)
        return [str(replica) for replica, seen in rows if seen != wanted]

    def forget(self, replica: str) -> None:
        self.database.execute(
            "DELETE FROM memorystore_embedder_migration_acks WHERE replica = %s", (replica,)
        )


def state_json(state: State) -> dict[str, Any]:
    data = asdict(state)
    data["phase"] = str(state.phase)
    return data
