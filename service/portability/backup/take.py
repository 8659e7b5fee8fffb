"""Taking a backup of the whole store while it serves, and finding or deleting one.

A backup is a directory, `<target>/<name>/`, written as `<target>/.<name>.partial/` under
the name's lock and renamed when complete (a crash leaves no directory that looks finished,
and the partial is removed at the next start or backup):

- `memories.jsonl.gz` — one JSON object per memory, `{"id", "payload"}`: the vector store's
  whole payload (text, hash, timestamps, scope ids, metadata, retired state, index texts);
- `vectors.f32` — the dense vectors, float32 little-endian, row *i* belonging to line *i*
  (so a restore never re-embeds, and the restored store answers searches exactly as before);
- `history.db` — mem0's change history (its `history` table; mem0's cache of recent
  messages is left out), an SQLite online backup, vacuumed so no deleted row's bytes remain;
- `sessions.db` — the session journal (exchanges not yet consolidated), the same way;
- `erasures.jsonl` — the erasure ledger (`state/erasure_ledger.py`) as it was: a restore
  re-applies it, and every later one it finds, so an old backup never brings back what was
  erased;
- `manifest.json` — format, counts, embedder, and every file's size and SHA-256;
- `manifest.sig` — the manifest's HMAC-SHA256 with the store's backup key (`signing.py`).

It is taken while the service serves: writes wait while the vector store is read and the
databases are copied (`MemoryEngine.writes_paused`), reads go on. It is logical, not the
engine's files: the same backup restores into the embedded engine or a Qdrant server.
"""

from __future__ import annotations

import asyncio
import errno
import gzip
import json
import logging
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memorystore.config import ConfigError, ServiceBackup, ServiceConfig
from memorystore.service.engine.mem0_seam import history_connection
from memorystore.service.lifecycle.journal import journal_path
from memorystore.service.portability.backup import signing
from memorystore.service.portability.backup.files import (
    ERASURES,
    FILES,
    FORMAT,
    HISTORY,
    MANIFEST,
    MEMORIES,
    SESSIONS,
    SIGNATURE,
    VECTORS,
    BackupError,
    Target,
    create_file,
    fd_path,
    file_digest,
    name_problem,
    open_dir,
    partial_name,
    refuse_postgres,
)
from memorystore.service.state.erasure_ledger import (
    TargetLedger,
    target_ledger_path,
)
from memorystore.service.state.erasures import Erasure, LedgerError

__all__ = [
    "LIVE_LEDGER",
    "clean_partials",
    "describe",
    "live_ledger_path",
    "remove",
    "take",
    "take_stopped",
]

LIVE_LEDGER = "erasures.db"  # the store's own erasure ledger, in its data directory
_BATCH = 1000
# mem0 keeps the last messages of each scope in history.db for its extraction prompts: raw
# text, not memories, so a backup leaves them out (and a restore would not restore them)
_LEFT_OUT = ("messages",)

log = logging.getLogger("memorystore.service")


def live_ledger_path(cfg: ServiceConfig) -> Path:
    return cfg.path_in_data_dir(None, LIVE_LEDGER)


def _count_rows(connection: sqlite3.Connection, table: str) -> int:
    row = connection.execute(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?", (table,)
    ).fetchone()
    if not row or not row[0]:
        return 0
    return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _copy_db(source: sqlite3.Connection, dest: str) -> int:
    """SQLite online backup of `source` into a new file; returns its history rows (if any)."""
    target = sqlite3.connect(dest)
    try:
        source.backup(target)
        return _count_rows(target, "history")
    finally:
        target.close()


def _compact(path: str, left_out: tuple[str, ...] = ()) -> None:
    """Drop what a backup leaves out, rewrite the file without free pages (a deleted row's
    bytes stay in them otherwise), and switch it to a rollback journal: a WAL database
    cannot be opened from a read-only mount, which is how a restore mounts the volume."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for table in left_out:
            db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute("VACUUM")
    finally:
        db.close()


@dataclass
class Snapshot:
    """What the dump wrote; becomes the manifest."""

    memories: int
    history_events: int
    # the live index's embedder: during an embedder migration, the one reads are served by
    # (a restore needs its vectors' maker, not the one being migrated to)
    embedder: dict[str, Any]


def _dump(engine: Any, work: int) -> Snapshot:
    """Write the store's points, databases and ledger into the directory `work` (writes
    are paused by the caller)."""
    embedder = engine.live_embedder
    dims = embedder.vector_size()
    count = 0
    pending: list[list[float]] = []
    with (
        create_file(MEMORIES, work) as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as lines,
        create_file(VECTORS, work) as vectors,
    ):
        for point_id, vector, payload in engine.store.points(_BATCH):
            if len(vector) != dims:
                raise BackupError(
                    f"memory {point_id} has a {len(vector)}-dimensional vector, its embedder "
                    f"makes {dims}: the store does not match its config",
                    500,
                )
            record = {"id": point_id, "payload": payload}
            lines.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
            pending.append(vector)
            count += 1
            if len(pending) == _BATCH:
                vectors.write(np.asarray(pending, dtype="<f4").tobytes())
                pending = []
        if pending:
            vectors.write(np.asarray(pending, dtype="<f4").tobytes())
    with history_connection(engine.memory) as connection:
        history_events = _copy_db(connection, fd_path(work, HISTORY))
    sessions_db = journal_path(engine.cfg)
    source = sqlite3.connect(sessions_db) if sessions_db.exists() else sqlite3.connect(":memory:")
    try:
        _copy_db(source, fd_path(work, SESSIONS))
    finally:
        source.close()
    with create_file(ERASURES, work) as ledger:
        ledger.write("".join(f"{e.line()}\n" for e in engine.ledger.entries()).encode())
    return Snapshot(count, history_events, embedder.identity())


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
    work: int, name: str, snapshot: Snapshot, cfg: ServiceConfig, started: float, key: bytes
) -> dict[str, Any]:
    """Compact the databases, write the manifest and its signature, make it all durable."""
    _compact(fd_path(work, HISTORY), _LEFT_OUT)
    _compact(fd_path(work, SESSIONS))
    files: dict[str, dict[str, Any]] = {}
    for file in FILES:
        size, digest = file_digest(file, work)
        files[file] = {"bytes": size, "sha256": digest}
    manifest = {
        "format": FORMAT,
        "name": name,
        "tenant": cfg.tenant,
        "created_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "memories": snapshot.memories,
        "history_events": snapshot.history_events,
        "bytes": sum(f["bytes"] for f in files.values()),
        "embedder": snapshot.embedder,
        "collection": cfg.vector_store.collection,
        "files": files,
        "path": name,
        "signed_with": signing.key_id(key),
    }
    text = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    with create_file(MANIFEST, work) as out:
        out.write(text)
    with create_file(SIGNATURE, work) as out:
        out.write(signing.sign(text, key))
    for file in (*FILES, MANIFEST, SIGNATURE):
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=work)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    os.fsync(work)
    return manifest


def _key(cfg: ServiceConfig) -> bytes:
    try:
        return signing.signing_key(cfg)
    except ConfigError as exc:  # checked at start-up: a mount that went away since
        raise BackupError(f"cannot sign the backup: {exc}", 503) from None


def _sync_target_ledger(engine: Any, root: Path) -> None:
    """Append to the target's ledger the erasures it lacks (made while the target was not
    mounted), so a restore from this target re-applies them too."""
    erasures: list[Erasure] = engine.ledger.entries()
    if not erasures:
        return
    ledger = TargetLedger(target_ledger_path(root, engine.cfg.tenant))
    known = {e.line() for e in ledger.entries()}
    for erasure in erasures:
        if erasure.line() not in known:
            ledger.append(erasure)


async def take(engine: Any, name: str) -> dict[str, Any]:
    """Back the store up into `<backup.path>/<name>/` while it serves; returns the manifest."""
    cfg: ServiceConfig = engine.cfg
    refuse_postgres(cfg)
    problem = name_problem(name)
    if problem:
        raise BackupError(problem, 422)
    started = time.time()
    with Target.of(cfg) as target, target.lock(name):
        target.remove_stale_partials()
        target.remove_partial(name)  # what an interrupted attempt of this name left
        if target.kind(name) != "missing":
            raise BackupError(f"backup {name} already exists in {target.root}", 409)
        key = _key(cfg)
        partial = partial_name(name)
        try:
            os.mkdir(partial, 0o700, dir_fd=target.fd)
            work = open_dir(partial, target.fd)
            try:
                async with engine.writes_paused():
                    snapshot = await asyncio.to_thread(_dump, engine, work)
                manifest = await asyncio.to_thread(_finish, work, name, snapshot, cfg, started, key)
            finally:
                os.close(work)
            os.rename(partial, name, src_dir_fd=target.fd, dst_dir_fd=target.fd)
            os.fsync(target.fd)
        except (OSError, sqlite3.OperationalError) as exc:
            error = _storage_error(target.root, exc)  # before the files go: it reads free space
            target.remove_partial(name)
            raise error from None
        except BaseException:
            target.remove_partial(name)
            raise
        try:
            await asyncio.to_thread(_sync_target_ledger, engine, target.root)
        except (OSError, LedgerError) as exc:
            log.warning("backup %s: the target's erasure ledger was not updated: %s", name, exc)
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
    allows one process), into `target/name`, signed with the config's backup key (or the
    data directory's, generated once); a summary of the manifest."""
    from memorystore.service.engine.core import MemoryEngine

    refuse_postgres(cfg)
    signing_key = cfg.backup.signing_key if cfg.backup is not None else None
    backup = ServiceBackup(path=str(target), signing_key=signing_key)
    cfg = cfg.model_copy(update={"backup": backup})
    _key(cfg)  # a missing or short key is refused before the store is opened
    engine = MemoryEngine(cfg)
    try:
        manifest = asyncio.run(take(engine, name))
    finally:
        engine.close()
    keys = ("name", "memories", "history_events", "bytes", "duration_s", "signed_with")
    return {k: manifest[k] for k in keys}


def describe(cfg: ServiceConfig, name: str) -> dict[str, Any]:
    """The manifest of a finished backup in the target: 404 when there is none, 409 while
    it is being taken."""
    problem = name_problem(name)
    if problem:
        raise BackupError(problem, 422)
    with Target.of(cfg) as target:
        if target.kind(name) == "missing" and target.kind(partial_name(name)) != "missing":
            with target.lock(name):  # 409 while a backup of it runs; else the partial is stale
                target.remove_partial(name)
        return target.manifest(name)


def remove(cfg: ServiceConfig, name: str) -> None:
    """Delete a backup's files, finished or partial (404 when there are none)."""
    problem = name_problem(name)
    if problem:
        raise BackupError(problem, 422)
    with Target.of(cfg) as target:
        if not target.remove(name):
            raise BackupError(f"backup {name} not found in {target.root}", 404)


def clean_partials(cfg: ServiceConfig) -> list[str]:
    """At start-up: remove what backups killed mid-way left in the target (nothing when
    there is no target, or it is not mounted: the service runs without it)."""
    if cfg.backup is None:
        return []
    try:
        with Target.of(cfg) as target:
            cleaned = target.remove_stale_partials()
    except BackupError as exc:
        log.warning("backup target not usable at start-up: %s", exc)
        return []
    if cleaned:
        log.info("removed the partial files of interrupted backups: %s", ", ".join(cleaned))
    return cleaned
