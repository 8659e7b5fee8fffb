"""Backups of a whole store, and restoring one into an empty store.

A backup is a directory, `<target>/<name>/`, written as `<target>/.<name>.partial/` and
renamed when complete (a crash leaves no directory that looks finished):

- `memories.jsonl.gz` — one JSON object per memory, `{"id", "payload"}`: the vector store's
  whole payload (text, hash, timestamps, scope ids, metadata, retired state, index texts);
- `vectors.f32` — the dense vectors, float32 little-endian, row *i* belonging to line *i*
  (so a restore never re-embeds, and the restored store answers searches exactly as before);
- `history.db` — mem0's change history, an SQLite online backup;
- `sessions.db` — the session journal (exchanges not yet consolidated), the same way;
- `manifest.json` — format, counts, embedder, and every file's size and SHA-256;
- `manifest.sha256` — the manifest's own SHA-256 (`sha256sum -c` reads it), so no byte of a
  backup can change unnoticed.

It is taken while the service serves: writes wait while the vector store is read and the
two databases are copied (`MemoryEngine.writes_paused`), reads go on. It is logical, not
the engine's files: the same backup restores into the embedded engine or a Qdrant server.

A restore checks everything before it writes anything: the format, every file's checksum,
every record, the embedder (provider, model, dimensions) against the target's config, and
that the target store is empty. Afterwards it checks the counts (memories and history
events) against the manifest, and leaves `restored-from.json` in the data directory so a
second run (an init container restarted) does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gzip
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memorystore.config import ServiceBackup, ServiceConfig
from memorystore.service.engine.mem0_seam import history_connection
from memorystore.service.lifecycle.journal import journal_path
from memorystore.spec import OBJECT_NAME_PATTERN

FORMAT = "memorystore.backup/1"
MANIFEST = "manifest.json"
MANIFEST_SUM = "manifest.sha256"  # the manifest's own checksum (it cannot hold it itself)
MEMORIES = "memories.jsonl.gz"
VECTORS = "vectors.f32"
HISTORY = "history.db"
SESSIONS = "sessions.db"
FILES = (MEMORIES, VECTORS, HISTORY, SESSIONS)
MARKER = "restored-from.json"
# a Kubernetes object name (DNS subdomain), so a MemoryStoreBackup's name is a valid one
_BATCH = 1000

log = logging.getLogger("memorystore.service")


class BackupError(Exception):
    """A backup or restore refused or failed; `status` is the HTTP answer the API gives."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


POSTGRES_REFUSAL = (
    "this store keeps its memories in PostgreSQL (history.postgres or vectorStore.postgres): "
    "back the database up with its own tools (pg_dump, CloudNativePG backups); exports "
    "(POST /v1/exports/) move single scopes"
)


def _refuse_postgres(cfg: ServiceConfig) -> None:
    """A backup holds SQLite files and the engine's points; a PostgreSQL store has neither."""
    if cfg.history.postgres is not None or cfg.vector_store.postgres is not None:
        raise BackupError(POSTGRES_REFUSAL, 409)


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a backup: it must be a Kubernetes object name (a
    MemoryStoreBackup's), which also keeps it one plain directory name."""
    if len(name) > 253 or not re.fullmatch(OBJECT_NAME_PATTERN, name):
        return (
            f"name {name!r} is not a valid backup name: a Kubernetes object name (lower-case "
            "letters, digits, '-' and '.', each dot-separated part starting and ending with a "
            "letter or digit, at most 253 characters)"
        )
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _sum_line(manifest: Path) -> bytes:
    """`manifest.sha256`'s exact content, as `sha256sum` writes it."""
    return f"{_sha256(manifest)}  {MANIFEST}\n".encode()


def _copy_db(source: sqlite3.Connection, dest: Path) -> int:
    """SQLite online backup of `source` into a new file; returns its history rows (if any).

    The copy is switched to a rollback journal: a WAL database (what the service runs) cannot
    be opened from a read-only mount, which is how a restore mounts the backup volume."""
    target = sqlite3.connect(dest)
    try:
        source.backup(target)
        target.execute("PRAGMA journal_mode=DELETE")
        return _count_rows(target, "history")
    finally:
        target.close()


def _read_only(path: Path) -> sqlite3.Connection:
    """A backup's database, opened without writing anything beside it (read-only mounts)."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _count_rows(connection: sqlite3.Connection, table: str) -> int:
    row = connection.execute(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?", (table,)
    ).fetchone()
    if not row or not row[0]:
        return 0
    return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@dataclass
class Snapshot:
    """What the dump wrote; becomes the manifest."""

    memories: int
    history_events: int


def _dump(engine: Any, work: Path) -> Snapshot:
    """Write the store's points and databases into `work` (writes are paused by the caller)."""
    dims = engine.cfg.embedder.vector_size()
    count = 0
    pending: list[list[float]] = []
    with (
        gzip.open(work / MEMORIES, "wt", encoding="utf-8", compresslevel=1) as lines,
        (work / VECTORS).open("wb") as vectors,
    ):
        for point_id, vector, payload in engine.store.points(_BATCH):
            if len(vector) != dims:
                raise BackupError(
                    f"memory {point_id} has a {len(vector)}-dimensional vector, the config "
                    f"says {dims}: the store does not match its config",
                    500,
                )
            lines.write(json.dumps({"id": point_id, "payload": payload}, ensure_ascii=False))
            lines.write("\n")
            pending.append(vector)
            count += 1
            if len(pending) == _BATCH:
                vectors.write(np.asarray(pending, dtype="<f4").tobytes())
                pending = []
        if pending:
            vectors.write(np.asarray(pending, dtype="<f4").tobytes())
    with history_connection(engine.memory) as connection:
        history_events = _copy_db(connection, work / HISTORY)
    sessions_db = journal_path(engine.cfg)
    source = sqlite3.connect(sessions_db) if sessions_db.exists() else sqlite3.connect(":memory:")
    try:
        _copy_db(source, work / SESSIONS)
    finally:
        source.close()
    return Snapshot(count, history_events)


def _target(cfg: ServiceConfig) -> Path:
    if cfg.backup is None:
        raise BackupError("no backup target is configured (backup.path)", 409)
    root = Path(cfg.backup.path)
    if not root.is_dir():
        raise BackupError(f"backup target {root} does not exist or is not a directory", 503)
    if not os.access(root, os.W_OK | os.X_OK):
        raise BackupError(f"backup target {root} is not writable", 503)
    return root


def _storage_error(root: Path, exc: OSError | sqlite3.OperationalError) -> BackupError:
    """What went wrong writing into the target. SQLite reports a full disk as an I/O error
    ("disk I/O error", "database or disk is full"), so the free space decides then."""
    code = getattr(exc, "errno", None)
    if isinstance(exc, sqlite3.OperationalError):
        code = errno.ENOSPC if shutil.disk_usage(root).free < (1 << 20) else errno.EIO
    if code in (errno.ENOSPC, errno.EDQUOT):
        return BackupError(
            f"backup target {root} is full ({os.strerror(code)}); the store is unchanged",
            507,
        )
    reason = os.strerror(code) if code else type(exc).__name__
    return BackupError(f"backup target {root} failed: {reason}; the store is unchanged", 503)


def _finish(
    work: Path, name: str, snapshot: Snapshot, cfg: ServiceConfig, started: float
) -> dict[str, Any]:
    files: dict[str, dict[str, Any]] = {
        f: {"bytes": (work / f).stat().st_size, "sha256": _sha256(work / f)} for f in FILES
    }
    manifest = {
        "format": FORMAT,
        "name": name,
        "tenant": cfg.tenant,
        "created_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "memories": snapshot.memories,
        "history_events": snapshot.history_events,
        "bytes": sum(f["bytes"] for f in files.values()),
        "embedder": cfg.embedder.identity(),
        "collection": cfg.vector_store.collection,
        "files": files,
        "path": name,
    }
    (work / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    (work / MANIFEST_SUM).write_bytes(_sum_line(work / MANIFEST))
    for f in (*FILES, MANIFEST, MANIFEST_SUM):
        with (work / f).open("rb") as handle:
            os.fsync(handle.fileno())
    return manifest


async def take(engine: Any, name: str) -> dict[str, Any]:
    """Back the store up into `<backup.path>/<name>/` while it serves; returns the manifest."""
    cfg: ServiceConfig = engine.cfg
    _refuse_postgres(cfg)
    problem = name_problem(name)
    if problem:
        raise BackupError(problem, 422)
    root = _target(cfg)
    final = root / name
    if final.exists():
        raise BackupError(f"backup {name} already exists in {root}", 409)
    work = root / f".{name}.partial"
    started = time.time()
    try:
        shutil.rmtree(work, ignore_errors=True)  # what an interrupted attempt left
        work.mkdir()
        async with engine.writes_paused():
            snapshot = await asyncio.to_thread(_dump, engine, work)
        manifest = await asyncio.to_thread(_finish, work, name, snapshot, cfg, started)
        os.rename(work, final)
    except (OSError, sqlite3.OperationalError) as exc:
        error = _storage_error(root, exc)  # before the partial files go: it reads free space
        shutil.rmtree(work, ignore_errors=True)
        raise error from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    manifest["duration_s"] = round(time.time() - started, 3)
    log.info(
        "backup %s: %d memories, %d history events, %d bytes in %.1f s",
        name,
        manifest["memories"],
        manifest["history_events"],
        manifest["bytes"],
        manifest["duration_s"],
    )
    return manifest


def take_stopped(cfg: ServiceConfig, target: Path, name: str) -> dict[str, Any]:
    """`memorystore backup`: the store `cfg` names, its service stopped (the embedded engine
    allows one process), into `target/name`; a summary of the manifest."""
    from memorystore.service.engine.core import MemoryEngine

    _refuse_postgres(cfg)
    cfg = cfg.model_copy(update={"backup": ServiceBackup(path=str(target))})
    engine = MemoryEngine(cfg)
    try:
        manifest = asyncio.run(take(engine, name))
    finally:
        engine.close()
    return {k: manifest[k] for k in ("name", "memories", "history_events", "bytes", "duration_s")}


def describe(cfg: ServiceConfig, name: str) -> dict[str, Any]:
    """The manifest of a finished backup in the target (BackupError 404 when there is none)."""
    problem = name_problem(name)
    if problem:
        raise BackupError(problem, 422)
    root = _target(cfg)
    path = root / name / MANIFEST
    if not path.is_file():
        raise BackupError(f"backup {name} not found in {root}", 404)
    return json.loads(path.read_text())


def remove(cfg: ServiceConfig, name: str) -> None:
    describe(cfg, name)  # refuses bad names, 404 for none
    shutil.rmtree(_target(cfg) / name)


# --- restore ---------------------------------------------------------------------------------


def _records(source: Path, dims: int) -> Iterator[tuple[str, np.ndarray, dict[str, Any]]]:
    """The backup's memories, each checked; raises BackupError naming the first bad one."""
    row_bytes = dims * 4
    with (
        gzip.open(source / MEMORIES, "rt", encoding="utf-8") as lines,
        (source / VECTORS).open("rb") as vectors,
    ):
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                point_id = str(uuid.UUID(str(record["id"])))
                payload = record["payload"]
                if not isinstance(payload, dict) or not isinstance(payload.get("data"), str):
                    raise ValueError("payload without text")
            except (ValueError, KeyError, TypeError) as exc:
                raise BackupError(
                    f"{MEMORIES} line {number} is not a valid memory ({exc})"
                ) from None
            raw = vectors.read(row_bytes)
            if len(raw) != row_bytes:
                raise BackupError(f"{VECTORS} ends before memory {number}: the backup is cut short")
            vector = np.frombuffer(raw, dtype="<f4")
            if not np.isfinite(vector).all():
                raise BackupError(f"{VECTORS}: memory {number}'s vector is not finite")
            yield point_id, vector, payload
        if vectors.read(1):
            raise BackupError(f"{VECTORS} holds more vectors than {MEMORIES} has memories")


def verify(source: Path, cfg: ServiceConfig) -> dict[str, Any]:
    """Check a backup against the target's config, reading all of it; returns the manifest."""
    path = source / MANIFEST
    if not path.is_file():
        raise BackupError(f"{source} is not a backup: no {MANIFEST} (incomplete or wrong path)")
    summed = source / MANIFEST_SUM
    recorded = summed.read_bytes() if summed.is_file() else b""
    if recorded != _sum_line(path):
        raise BackupError(f"{path} does not match {MANIFEST_SUM}: the backup is damaged")
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        raise BackupError(f"{path} is not valid JSON: the backup is damaged") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{path}: format is not {FORMAT}")
    ours, theirs = cfg.embedder.identity(), manifest.get("embedder")
    if theirs != ours:
        raise BackupError(
            f"backup {manifest.get('name')} was made with embedder {theirs}, this store's is "
            f"{ours}: its vectors would not match (restore into a store with the same embedder)"
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != set(FILES):
        raise BackupError(f"{path}: files must list {', '.join(FILES)}")
    for name, meta in files.items():
        file = source / name
        if not file.is_file():
            raise BackupError(f"{file} is missing: the backup is incomplete")
        if file.stat().st_size != meta.get("bytes") or _sha256(file) != meta.get("sha256"):
            raise BackupError(f"{file} does not match its checksum: the backup is damaged")
    count = sum(1 for _ in _records(source, ours["dimensions"]))
    if count != manifest.get("memories"):
        raise BackupError(
            f"{MEMORIES} holds {count} memories, the manifest says {manifest['memories']}"
        )
    for db in (HISTORY, SESSIONS):
        connection = _read_only(source / db)
        try:
            if connection.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise BackupError(f"{db} fails SQLite's integrity check")
            if db == HISTORY and _count_rows(connection, "history") != manifest.get(
                "history_events"
            ):
                raise BackupError(f"{HISTORY}'s events do not match the manifest's count")
        except sqlite3.DatabaseError as exc:
            raise BackupError(f"{db} is not a readable SQLite database ({exc})") from None
        finally:
            connection.close()
    return manifest


def _marker(cfg: ServiceConfig) -> Path:
    return Path(cfg.data_dir) / MARKER


def restore(source: Path, cfg: ServiceConfig) -> dict[str, Any]:
    """Restore `source` into the empty store `cfg` names (the service must not be running).

    Returns `{"restored": bool, "memories", "history_events", "name"}`; `restored` is False
    when this very backup was already restored here (nothing is written then).
    """
    _refuse_postgres(cfg)
    from memorystore.service.engine.core import MemoryEngine

    manifest = verify(source, cfg)
    marker = _marker(cfg)
    if marker.is_file():
        done = json.loads(marker.read_text())
        if (
            done.get("name") == manifest["name"]
            and done.get("created_at") == manifest["created_at"]
        ):
            return {**_summary(manifest), "restored": False}
        raise BackupError(f"{cfg.data_dir} already holds a restore of backup {done.get('name')}")
    sessions_db = journal_path(cfg)
    engine = MemoryEngine(cfg)
    try:
        with history_connection(engine.memory) as connection:
            events = _count_rows(connection, "history")
            written = _any_rows(connection)
        if engine.count() or written or _has_rows(sessions_db):
            raise BackupError(
                f"the target store is not empty ({engine.count()} memories, {events} history "
                "events): restore only into a new store"
            )
        _load_points(engine, source, manifest["embedder"]["dimensions"])
        backup_history = _read_only(source / HISTORY)
        try:
            with history_connection(engine.memory) as connection:
                backup_history.backup(connection)
                events = _count_rows(connection, "history")
        finally:
            backup_history.close()
        _restore_file(source / SESSIONS, sessions_db)
        memories = engine.count()
    finally:
        engine.close()
    if memories != manifest["memories"] or events != manifest["history_events"]:
        raise BackupError(
            f"restored {memories} memories and {events} history events, the backup holds "
            f"{manifest['memories']} and {manifest['history_events']}",
            500,
        )
    marker.write_text(json.dumps({k: manifest[k] for k in ("name", "created_at", "memories")}))
    return {**_summary(manifest), "restored": True}


def _summary(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: manifest[k] for k in ("name", "memories", "history_events")}


def _any_rows(connection: sqlite3.Connection) -> bool:
    tables = connection.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    return any(_count_rows(connection, name) for (name,) in tables)


def _has_rows(db: Path) -> bool:
    if not db.exists():
        return False
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return _any_rows(connection)
    finally:
        connection.close()


def _load_points(engine: Any, source: Path, dims: int) -> None:
    batch: list[tuple[str, np.ndarray, dict[str, Any]]] = []
    for record in _records(source, dims):
        batch.append(record)
        if len(batch) == _BATCH:
            _insert(engine, batch)
            batch = []
    if batch:
        _insert(engine, batch)


def _insert(engine: Any, batch: list[tuple[str, np.ndarray, dict[str, Any]]]) -> None:
    engine.store.insert(
        vectors=[vector.tolist() for _, vector, _ in batch],
        payloads=[payload for _, _, payload in batch],
        ids=[point_id for point_id, _, _ in batch],
    )


def _restore_file(source: Path, dest: Path) -> None:
    """An SQLite copy through a temporary file renamed into place (never half a file)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    os.close(fd)
    try:
        src = _read_only(source)
        try:
            _copy_db(src, Path(tmp))
        finally:
            src.close()
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
