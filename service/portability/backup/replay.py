"""One pass over a backup, record by record, through its checks: what a restore does twice.

Why: the same walk checks the backup (`Check`: nothing written) and then writes it (`Stage`:
a complete store under the staging directory), so what is written is exactly what was
checked: the second pass only parses, and every file's SHA-256 is compared again at its end
(nothing is moved in unless each is still the one the first pass checked). The walk
applies the erasures (`ErasureSet`): what they cover is never handed to the sink; history
rows of memories the backup does not hold are handed over without their text; a turn whose
previous turn was erased is indexed and embedded again without it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from memorystore.service.engine.mem0_seam import (
    HISTORY_COLUMNS,
    history_connection,
    history_values,
)
from memorystore.service.lifecycle.journal import SessionJournal
from memorystore.service.portability.backup import reader, records, schema
from memorystore.service.retrieval.indexing import PREV_KEY, stored_index_texts
from memorystore.service.retrieval.reindex import INDEX_KEY
from memorystore.service.state.erasures import ErasureSet

__all__ = ["BATCH", "Check", "Counts", "Sink", "Stage", "replay"]

BATCH = 1000
T = TypeVar("T")


class Sink(Protocol):
    def memories(self, batch: list[tuple[dict[str, Any], str, np.ndarray]]) -> None: ...

    def history(self, rows: list[dict[str, Any]]) -> None: ...

    def journal(self, rows: list[tuple[Any, ...]]) -> None: ...


class Check:
    """The first pass: everything is read and checked, nothing is written."""

    def memories(self, batch: list[tuple[dict[str, Any], str, np.ndarray]]) -> None:
        pass

    def history(self, rows: list[dict[str, Any]]) -> None:
        pass

    def journal(self, rows: list[tuple[Any, ...]]) -> None:
        pass


@dataclass
class Counts:
    memories: int = 0
    history_events: int = 0
    exchanges: int = 0
    erased: set[str] = field(default_factory=set)  # memory ids not written
    erased_history: int = 0
    erased_exchanges: int = 0
    scrubbed_history: int = 0  # rows kept without text (their memory was deleted before)


def _in_batches(items: Iterator[T], write: Callable[[list[T]], None]) -> None:
    """Hand `items` to `write` BATCH at a time (none: no call)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == BATCH:
            write(batch)
            batch = []
    if batch:
        write(batch)


def replay(src: reader.Source, erasures: ErasureSet, sink: Sink, check: bool = True) -> Counts:
    """Read the whole backup through its checks, handing `sink` what is to be written.
    `check=False`: the second pass, over bytes the first one checked (reader.Source)."""
    counts = Counts()
    held: set[str] = set()

    def memories() -> Iterator[tuple[dict[str, Any], str, np.ndarray]]:
        for record, vector in src.memories(check):
            held.add(record.memory_id)
            if erasures.memory_erased(record.memory_id, record.payload):
                counts.erased.add(record.memory_id)
                continue
            counts.memories += 1
            yield record.payload, record.memory_id, vector

    def history() -> Iterator[dict[str, Any]]:
        for row in src.history(check):
            memory_id = row["memory_id"]
            if memory_id in counts.erased or erasures.memory_erased(memory_id):
                counts.erased_history += 1
                continue
            if memory_id not in held and (row["old_memory"] or row["new_memory"]):
                row = {**row, "old_memory": None, "new_memory": None}
                counts.scrubbed_history += 1
            counts.history_events += 1
            yield row

    _in_batches(memories(), sink.memories)
    _in_batches(history(), sink.history)
    exchanges: list[tuple[Any, ...]] = []
    created_at = records.JOURNAL_COLUMNS.index("created")
    for values, scope in src.journal(check):
        if erasures.scope_erased(scope, float(values[created_at])):
            counts.erased_exchanges += 1
            continue
        exchanges.append(values)
        counts.exchanges += 1
    if exchanges:
        sink.journal(exchanges)
    return counts


class Stage:
    """The second pass: a complete store under the staging directory (or, for a Qdrant
    server, the points in its collection)."""

    def __init__(self, engine: Any, staging: Path, erased: set[str]) -> None:
        self.engine = engine
        self.erased = erased
        self.journal_db: sqlite3.Connection | None = None
        self.journal_path = staging / "sessions.db"

    def memories(self, batch: list[tuple[dict[str, Any], str, np.ndarray]]) -> None:
        vectors, payloads, ids = [], [], []
        for payload, memory_id, vector in batch:
            if payload.get(PREV_KEY) in self.erased:
                payload, vector = self._unchained(payload)
            payloads.append(payload)
            ids.append(memory_id)
            vectors.append(vector.tolist())
        self.engine.store.insert(vectors=vectors, payloads=payloads, ids=ids)

    def _unchained(self, payload: dict[str, Any]) -> tuple[dict[str, Any], np.ndarray]:
        """A turn whose previous turn was erased: its index texts held that turn's line, so
        they are computed again without it (and its vector embedded again)."""
        payload = {k: v for k, v in payload.items() if k != PREV_KEY}
        engine = self.engine
        texts = stored_index_texts(payload, engine.cfg.retrieval, lambda _: None)
        payload[records.LEXICAL_KEY] = texts.lexical
        payload[INDEX_KEY] = engine.index_version
        vector = engine.memory.embedding_model.embed(texts.dense, "add")
        return payload, np.asarray(vector, dtype="<f4")

    def history(self, rows: list[dict[str, Any]]) -> None:
        columns = ", ".join(HISTORY_COLUMNS)
        marks = ", ".join("?" * len(HISTORY_COLUMNS))
        with history_connection(self.engine.memory) as connection:
            connection.execute("BEGIN")
            try:
                connection.executemany(
                    f"INSERT INTO history ({columns}) VALUES ({marks})", history_values(rows)
                )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def journal(self, rows: list[tuple[Any, ...]]) -> None:
        SessionJournal(self.journal_path).close()  # its schema, as the service makes it
        table, _ = schema.journal_schema()
        columns = ", ".join(records.JOURNAL_COLUMNS)
        marks = ", ".join("?" * len(records.JOURNAL_COLUMNS))
        db = sqlite3.connect(self.journal_path, isolation_level=None)
        try:
            db.execute("BEGIN")
            db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
            db.execute("COMMIT")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()
