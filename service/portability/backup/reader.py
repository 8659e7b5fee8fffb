"""Reading a backup: every byte through a check, bounded before it is read, hashed as read.

Why: a restore trusts nothing in the files. The manifest is believed only on its signature
(`signing.py`) and only then are the files' sizes and checksums compared with it; the
records are read through `records.py`'s checks one at a time, each bounded in size before it
is parsed (a gzip line, an SQLite value: `record_limit`), so a decompression bomb or a 200 MB
memory costs a few megabytes of memory before it is refused. The two SQLite files are opened
read-only and immutable, and believed only when their schema is exactly what the service
writes: any other table, column, index, view or trigger is refused, named. Rows are read out
and checked; the files themselves are never copied into the store.

Every file is hashed again while its records are read (`_Hashing`), so what is written is
what was checked even if the files change between the check and the write.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memorystore.config import ServiceConfig
from memorystore.scope import EntityIds
from memorystore.service.engine.mem0_seam import HISTORY_COLUMNS
from memorystore.service.portability.backup import records, signing
from memorystore.service.portability.backup.files import (
    ERASURES,
    FILES,
    FORMAT,
    HISTORY,
    LEGACY_FILES,
    LEGACY_FORMAT,
    MANIFEST,
    MANIFEST_LIMIT,
    MEMORIES,
    SESSIONS,
    SIGNATURE,
    VECTORS,
    BackupError,
    fd_path,
    name_problem,
    open_dir,
    open_file,
    read_small,
)
from memorystore.service.portability.backup.schema import (
    Schema,
    check_schema,
    history_schema,
    journal_schema,
    tables,
)
from memorystore.service.portability.checks import FormatError, strict_json, timestamp_problem
from memorystore.service.state.erasures import Erasure, LedgerError

__all__ = ["LEDGER_LIMIT", "LEDGER_LINE_LIMIT", "Source"]

LEDGER_LIMIT = 256 << 20  # an erasure ledger larger than this is not one this service wrote
LEDGER_LINE_LIMIT = 16 << 20  # one erasure: a scope's digest and up to ~400k memory ids
_CHUNK = 1 << 20
_HEX = frozenset("0123456789abcdef")


class _Hashing(io.RawIOBase):
    """A file descriptor read once, front to back, hashing what passes."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.digest = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = os.read(self.fd, len(buffer))
        buffer[: len(data)] = data
        self.digest.update(data)
        self.size += len(data)
        return len(data)

    def finish(self) -> tuple[int, str]:
        """Hash the rest of the file too; (bytes, sha256) of all of it."""
        while chunk := os.read(self.fd, _CHUNK):
            self.digest.update(chunk)
            self.size += len(chunk)
        return self.size, self.digest.hexdigest()


def _read_exact(raw: _Hashing, size: int) -> bytes:
    parts, left = [], size
    while left:
        chunk = raw.read(left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _file_hash(fd: int) -> tuple[int, str]:
    os.lseek(fd, 0, os.SEEK_SET)
    return _Hashing(fd).finish()


class Source:
    """One backup directory, open for reading: the manifest checked against its signature
    and the target's config, each file's size against the manifest. Nothing is parsed but
    the manifest until a reader method is called."""

    def __init__(
        self,
        path: Path,
        cfg: ServiceConfig,
        key: signing.VerifyingKey,
        trust_unsigned: bool = False,
    ) -> None:
        self.path = path
        self.cfg = cfg
        try:
            self.fd = open_dir(path)
        except FileNotFoundError:
            raise BackupError(f"{path} does not exist") from None
        except OSError:
            raise BackupError(
                f"{path} is a symbolic link or not a directory: a backup is read only from "
                "the directory itself"
            ) from None
        try:
            self._open(key, trust_unsigned)
        except BaseException:
            os.close(self.fd)
            raise

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the manifest ---------------------------------------------------------------------

    def _read(self, name: str, limit: int) -> bytes | None:
        try:
            fd = open_file(name, self.fd)
        except FileNotFoundError:
            return None
        except OSError:
            raise BackupError(f"{self.path}/{name} is not a regular file") from None
        try:
            return read_small(fd, limit, name)
        finally:
            os.close(fd)

    def _open(self, key: signing.VerifyingKey, trust_unsigned: bool) -> None:
        raw = self._read(MANIFEST, MANIFEST_LIMIT)
        if raw is None:
            raise BackupError(
                f"{self.path} is not a backup: no {MANIFEST} (incomplete or wrong path)"
            )
        self.manifest_bytes = raw
        self.manifest_sha256 = hashlib.sha256(raw).hexdigest()
        self.trust = signing.verify(raw, self._read(SIGNATURE, 4096), key, trust_unsigned)
        try:
            manifest = strict_json(raw, MANIFEST)
        except FormatError as exc:
            raise BackupError(f"{exc}: the backup is damaged") from None
        if not isinstance(manifest, dict):
            raise BackupError(f"{MANIFEST}: not a JSON object")
        self.manifest: dict[str, Any] = manifest
        self.legacy = manifest.get("format") == LEGACY_FORMAT
        if manifest.get("format") != FORMAT and not self.legacy:
            raise BackupError(f"{MANIFEST}: format is not {FORMAT}")
        self.files = LEGACY_FILES if self.legacy else FILES
        self._check_manifest()
        for name in self.files:
            self._check_size(name)

    def _check_manifest(self) -> None:
        m = self.manifest
        name = m.get("name")
        if not isinstance(name, str) or name_problem(name):
            raise BackupError(f"{MANIFEST}.name: not a backup name")
        problem = (
            timestamp_problem(m["created_at"])
            if isinstance(m.get("created_at"), str)
            else ("must be a timestamp")
        )
        if problem:
            raise BackupError(f"{MANIFEST}.created_at: {problem}")
        for field in ("memories", "history_events"):
            value = m.get(field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BackupError(f"{MANIFEST}.{field}: must be a count")
        ours, theirs = self.cfg.embedder.identity(), m.get("embedder")
        if theirs != ours:
            raise BackupError(
                f"backup {name} was made with embedder {theirs}, this store's is "
                f"{ours}: its vectors would not match (restore into a store with the same "
                "embedder)"
            )
        files = m.get("files")
        if not isinstance(files, dict) or set(files) != set(self.files):
            raise BackupError(f"{MANIFEST}.files: must list {', '.join(self.files)}")
        for file, meta in files.items():
            size, digest = (meta or {}).get("bytes"), (meta or {}).get("sha256")
            if not isinstance(meta, dict) or not isinstance(size, int) or size < 0:
                raise BackupError(f"{MANIFEST}.files.{file}.bytes: must be a size")
            if not isinstance(digest, str) or len(digest) != 64 or not set(digest) <= _HEX:
                raise BackupError(f"{MANIFEST}.files.{file}.sha256: must be a SHA-256 digest")

    def _open_file(self, name: str) -> int:
        try:
            return open_file(name, self.fd)
        except FileNotFoundError:
            raise BackupError(f"{self.path}/{name} is missing: the backup is incomplete") from None
        except OSError:
            raise BackupError(f"{self.path}/{name} is not a regular file: refused") from None

    def _check_size(self, name: str) -> None:
        fd = self._open_file(name)
        try:
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size != self.manifest["files"][name]["bytes"]:
            raise BackupError(
                f"{name} does not match its checksum in the manifest ({size} bytes, the "
                f"manifest says {self.manifest['files'][name]['bytes']}): the file was changed "
                "or damaged"
            )

    def _compare(self, name: str, size: int, digest: str) -> None:
        meta = self.manifest["files"][name]
        if size != meta["bytes"] or digest != meta["sha256"]:
            raise BackupError(
                f"{name} does not match its checksum in the manifest: the file was changed "
                "or damaged after the backup was taken"
            )

    def check_checksums(self) -> None:
        """Hash every file whole (before any record is parsed, so a changed file is named as
        such rather than by the first odd record in it)."""
        for name in self.files:
            fd = self._open_file(name)
            try:
                self._compare(name, *_file_hash(fd))
            finally:
                os.close(fd)

    # --- the records ----------------------------------------------------------------------

    def memories(self, check: bool = True) -> Iterator[tuple[records.MemoryRecord, np.ndarray]]:
        """Each memory, checked, with its vector; the file's checksum is checked at the end.
        `check=False`: bytes a first pass checked (the checksum says whether they still
        are): only parsed, sizes still bounded."""
        read = records if check else records.rechecked
        expected = self.manifest["memories"]
        dims = int(self.manifest["embedder"]["dimensions"])
        row = dims * 4
        limit = records.record_limit(self.cfg)
        lines_fd, vectors_fd = self._open_file(MEMORIES), self._open_file(VECTORS)
        try:
            if os.fstat(vectors_fd).st_size != expected * row:
                raise BackupError(
                    f"{VECTORS} holds {os.fstat(vectors_fd).st_size} bytes, but {expected} "
                    f"memories of {dims} dimensions take {expected * row}"
                )
            raw = _Hashing(lines_fd)
            vectors = _Hashing(vectors_fd)
            lines = gzip.GzipFile(fileobj=io.BufferedReader(raw, _CHUNK), mode="rb")
            number = 0
            while True:
                try:
                    line = lines.readline(limit + 1)
                except (OSError, EOFError, zlib.error) as exc:
                    raise BackupError(f"{MEMORIES} is not a readable gzip stream ({exc})") from None
                if not line:
                    break
                number += 1
                at = f"{MEMORIES} line {number}"
                if number > expected:
                    raise BackupError(
                        f"{MEMORIES} holds more memories than the manifest's {expected}"
                    )
                if len(line) > limit:
                    raise BackupError(
                        f"{at} is longer than {limit} bytes, more than any memory can take "
                        "(limits.maxRequestBytes, limits.maxMemoryChars): refused before "
                        "reading further"
                    )
                if not line.endswith(b"\n"):
                    raise BackupError(f"{at} is cut short")
                try:
                    record = read.memory_record(line, at, self.cfg)
                except FormatError as exc:
                    raise BackupError(f"refused: {exc}") from None
                data = _read_exact(vectors, row)
                if len(data) != row:
                    raise BackupError(f"{VECTORS} ends before memory {number}")
                vector = np.frombuffer(data, dtype="<f4")
                if not np.isfinite(vector).all():
                    raise BackupError(f"{VECTORS}: memory {number}'s vector is not finite")
                yield record, vector
            if number != expected:
                raise BackupError(
                    f"{MEMORIES} holds {number} memories, the manifest says {expected}"
                )
            self._compare(MEMORIES, *raw.finish())
            self._compare(VECTORS, *vectors.finish())
        finally:
            os.close(lines_fd)
            os.close(vectors_fd)

    @contextmanager
    def _sqlite(self, name: str, schema: Schema) -> Iterator[sqlite3.Connection]:
        """The file, read-only and immutable, once its checksum and schema are right; its
        checksum is checked again when the caller is done (it read this very file)."""
        fd = self._open_file(name)
        try:
            self._compare(name, *_file_hash(fd))
            db = sqlite3.connect(f"file:{fd_path(fd)}?mode=ro&immutable=1", uri=True)
            try:
                db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, records.record_limit(self.cfg))
                db.execute("PRAGMA trusted_schema=OFF")
                try:
                    if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                        raise BackupError(f"{name} fails SQLite's integrity check")
                    check_schema(db, name, schema)
                    yield db
                except sqlite3.DataError as exc:  # a value over SQLITE_LIMIT_LENGTH
                    raise BackupError(
                        f"{name}: a value is longer than {records.record_limit(self.cfg)} bytes, "
                        f"more than any record can take ({exc}): refused before reading it"
                    ) from None
                except sqlite3.DatabaseError as exc:
                    raise BackupError(f"{name} is not a readable SQLite database ({exc})") from None
            finally:
                db.close()
            self._compare(name, *_file_hash(fd))
        finally:
            os.close(fd)

    def history(self, check: bool = True) -> Iterator[dict[str, Any]]:
        """Every history row, checked (the manifest's count first; `check`: memories')."""
        read = records if check else records.rechecked
        with self._sqlite(HISTORY, history_schema(self.legacy)) as db:
            if "history" not in tables(db):
                raise BackupError(f"{HISTORY} has no history table")
            (count,) = db.execute("SELECT count(*) FROM history").fetchone()
            if count != self.manifest["history_events"]:
                raise BackupError(
                    f"{HISTORY} holds {count} history events, the manifest says "
                    f"{self.manifest['history_events']}"
                )
            columns = ", ".join(HISTORY_COLUMNS)
            cursor = db.execute(f"SELECT {columns} FROM history ORDER BY rowid")
            for number, values in enumerate(cursor, 1):
                try:
                    yield read.history_row(values, f"{HISTORY} row {number}", self.cfg)
                except FormatError as exc:
                    raise BackupError(f"refused: {exc}") from None

    def journal(self, check: bool = True) -> Iterator[tuple[tuple[Any, ...], EntityIds]]:
        """Every journal row (records.JOURNAL_COLUMNS order), checked, with its scope
        (`check`: memories')."""
        read = records if check else records.rechecked
        table, schema = journal_schema()
        unknown = set(schema.tables[table]) - set(records.JOURNAL_COLUMNS)
        if unknown:  # the journal grew a column this restore cannot check: say so, loudly
            raise BackupError(
                f"the session journal has columns a restore cannot check yet: {sorted(unknown)}",
                500,
            )
        with self._sqlite(SESSIONS, schema) as db:
            if table not in tables(db):
                return
            columns = ", ".join(records.JOURNAL_COLUMNS)
            cursor = db.execute(f"SELECT {columns} FROM {table} ORDER BY seq")
            for number, values in enumerate(cursor, 1):
                try:
                    scope = read.journal_row(values, f"{SESSIONS} row {number}", self.cfg)
                except FormatError as exc:
                    raise BackupError(f"refused: {exc}") from None
                yield tuple(values), scope

    def ledger(self) -> list[Erasure]:
        """The erasures recorded up to the backup (none in format 1)."""
        if ERASURES not in self.files:
            return []
        fd = self._open_file(ERASURES)
        try:
            if os.fstat(fd).st_size > LEDGER_LIMIT:
                raise BackupError(f"{ERASURES} is larger than {LEDGER_LIMIT} bytes")
            raw = _Hashing(fd)
            lines = io.BufferedReader(raw, _CHUNK)
            found = []
            for number in range(1, 1 << 62):
                line = lines.readline(LEDGER_LINE_LIMIT + 1)
                if not line:
                    break
                if len(line) > LEDGER_LINE_LIMIT or not line.endswith(b"\n"):
                    raise BackupError(f"{ERASURES} line {number} is cut short or too long")
                try:
                    found.append(Erasure.parse(line.decode(), f"{ERASURES} line {number}"))
                except (LedgerError, UnicodeDecodeError) as exc:
                    raise BackupError(f"refused: {exc}") from None
            self._compare(ERASURES, *raw.finish())
            return found
        finally:
            os.close(fd)
