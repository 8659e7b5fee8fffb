"""Where the erasure ledger is kept: the store's state and, with a backup target, beside the
backups.

- `LocalLedger`: `<dataDir>/erasures.db` (SQLite, like the other small tables);
- `PgLedger`: the table `memorystore_erasures` of `history.postgres`, shared by replicas;
- `TargetLedger`: `<backup.path>/erasures-<store digest>.jsonl` (`target_ledger_path`), one
  `Erasure.line()` per line, appended and fsync'd at every erasure. A restore reads the one of
  the store that took the backup, so restoring an old backup from that target re-applies
  erasures recorded after the backup, even when the data directory is new. One file per
  store: two stores sharing a target never apply each other's erasures (a digest names a
  scope, not a tenant).

Records are appended, never changed: an erasure is a fact about the past. Beside them the
state keeps which records were carried out to the end (`done`): an erasure is recorded before
anything is deleted, so a service killed half-way finds it `pending` at its next start and
carries it out again (every step is idempotent).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path

from memorystore.service.state import postgres
from memorystore.service.state.erasures import Erasure, LedgerError
from memorystore.service.state.tables import LocalTables, PgTables, Tables

__all__ = [
    "LEDGER_FILE",
    "MIGRATIONS",
    "LocalLedger",
    "PgLedger",
    "TargetLedger",
    "target_ledger_path",
]

LEDGER_FILE = "erasures.jsonl"  # in every backup: the ledger as it was when it was taken


def target_ledger_path(root: Path, tenant: str) -> Path:
    """One store's ledger file in a backup target, named by a digest of its tenant name
    (which holds a `/`), so that stores sharing a target keep apart."""
    digest = hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:16]
    return root / f"erasures-{digest}.jsonl"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS erasures (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS erasures_done (seq INTEGER PRIMARY KEY);
"""

MIGRATIONS: list[postgres.Migration] = [
    postgres.Migration(
        "erasures",
        1,
        "erasure ledger",
        """
CREATE TABLE memorystore_erasures (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    record text NOT NULL
);
""",
    ),
    postgres.Migration(
        "erasures",
        2,
        "erasures carried out",
        "CREATE TABLE memorystore_erasures_done (seq bigint PRIMARY KEY);",
    ),
]


class _Ledger(Tables):
    _table: str

    def record(self, erasure: Erasure) -> int:
        """Append the record; its sequence number (for `done`)."""
        ((seq,),) = self._rows(
            f"INSERT INTO {self._table} (record) VALUES (?) RETURNING seq", (erasure.line(),)
        )
        return int(seq)

    def entries(self) -> list[Erasure]:
        rows = self._rows(f"SELECT seq, record FROM {self._table} ORDER BY seq")
        return [Erasure.parse(str(line), f"{self._table} row {seq}") for seq, line in rows]

    def done(self, seq: int) -> None:
        """The erasure `seq` was carried out to the end."""
        self._rows(
            f"INSERT INTO {self._table}_done (seq) VALUES (?) ON CONFLICT (seq) DO NOTHING",
            (seq,),
        )

    def pending(self) -> list[tuple[int, Erasure]]:
        """The erasures recorded but not carried out to the end, oldest first."""
        rows = self._rows(
            f"SELECT e.seq, e.record FROM {self._table} e LEFT JOIN {self._table}_done d "
            "ON d.seq = e.seq WHERE d.seq IS NULL ORDER BY e.seq"
        )
        return [
            (int(seq), Erasure.parse(str(line), f"{self._table} row {seq}")) for seq, line in rows
        ]

    def last(self) -> int:
        """The newest record's sequence number (0: none); replicas watch it to forget texts."""
        ((seq,),) = self._rows(f"SELECT COALESCE(MAX(seq), 0) FROM {self._table}")
        return int(seq)


class LocalLedger(_Ledger, LocalTables):
    _table = "erasures"

    def __init__(self, path: Path) -> None:
        LocalTables.__init__(self, path, _SCHEMA)


class PgLedger(_Ledger, PgTables):
    _table = "memorystore_erasures"


class TargetLedger:
    """The ledger file in a backup target: appended with `O_APPEND` and fsync'd, read whole.

    A partial last line (a crash mid-append) is ignored when reading; any other bad line is
    an error naming it, since the file sits on a volume others may write to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mutex = threading.Lock()

    def append(self, erasure: Erasure) -> None:
        data = (erasure.line() + "\n").encode("utf-8")
        with self._mutex:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

    def entries(self) -> list[Erasure]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return []
        with os.fdopen(fd, "rb") as fh:
            text = fh.read().decode("utf-8", errors="strict")
        lines = text.split("\n")
        complete, last = lines[:-1], lines[-1]  # `last` is "" when the file ends in a newline
        found = []
        for number, line in enumerate(complete, 1):
            if line:
                found.append(Erasure.parse(line, f"{self.path.name} line {number}"))
        if last:  # a crash mid-append: keep it unless it is a whole record
            with contextlib.suppress(LedgerError):
                found.append(Erasure.parse(last, f"{self.path.name} line {len(lines)}"))
        return found
