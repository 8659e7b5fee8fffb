"""Restoring a backup into a new, empty store: checked whole, written aside, then moved in.

Why this shape:

- **Checked first.** The manifest's signature, every file's checksum and every record
  (`reader.py`) are checked before anything is written: a refused backup leaves the target
  as it was (its data directory is not even created).
- **Erasures are re-applied.** The backup's own ledger, the target's `erasures.jsonl`
  beside the backup (appended at every erasure, so it knows those made after the backup)
  and the store's own ledger if it has one: a memory they cover is not written, nor its
  history rows, nor a journal row of an erased scope. History rows of memories the backup
  does not hold (deleted before it was taken) are kept without their text. The store's
  ledger afterwards holds every erasure applied, so its own backups carry them on.
- **Written aside, moved in.** The store is written complete under `<dataDir>/.restore/`
  (a Qdrant server's collection is written in place: it is empty, and only this restore of
  this backup may resume writing into it), then the moves into place are recorded
  (`commit.json`) and made. Killed before that record, the next run starts over; after it,
  the next run finishes the moves. The service refuses to start while `.restore/` exists,
  so a half-restored store is never served.
- `restored-from.json` marks a finished restore: running it again (an init container
  restarted) does nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memorystore.config import ServiceConfig, ServiceHistory, ServiceVectorStore
from memorystore.service.engine.mem0_seam import (
    history_connection,
)
from memorystore.service.lifecycle.journal import journal_path
from memorystore.service.portability.backup import reader, signing
from memorystore.service.portability.backup.files import BackupError, refuse_postgres
from memorystore.service.portability.backup.replay import Check, Counts, Stage, replay
from memorystore.service.portability.backup.take import LIVE_LEDGER, live_ledger_path
from memorystore.service.state.erasure_ledger import (
    LocalLedger,
    TargetLedger,
    target_ledger_path,
)
from memorystore.service.state.erasures import Erasure, ErasureSet, LedgerError

__all__ = ["MARKER", "STAGING", "pending_restore", "restore"]

log = logging.getLogger("memorystore.service")

STAGING = ".restore"  # in the data directory: the store being restored, until it is moved in
COMMIT = "commit.json"  # in STAGING: the moves that make the restore, once it is complete
BEGUN = "backup.json"  # in STAGING: which backup it is
MARKER = "restored-from.json"


def _staging(cfg: ServiceConfig) -> Path:
    return Path(cfg.data_dir) / STAGING


def pending_restore(cfg: ServiceConfig) -> str | None:
    """Why the service must not start: a restore into its data directory that was
    interrupted (None when there is none)."""
    staging = _staging(cfg)
    if not os.path.lexists(staging):
        return None
    return (
        f"an interrupted restore is pending in {staging}: run `memorystore restore` with the "
        "same backup again to finish it (the store is not served half-restored)"
    )


# --- the erasures a restore applies -----------------------------------------------------------


def _erasures(src: reader.Source, cfg: ServiceConfig) -> list[Erasure]:
    """The backup's ledger, the target's beside the backup (the ledger file of the store
    that took it), the store's own: one list."""
    found = src.ledger()
    beside = target_ledger_path(src.path.parent, str(src.manifest["tenant"]))
    with contextlib.suppress(FileNotFoundError):
        size = os.stat(beside, follow_symlinks=False).st_size
        if size > reader.LEDGER_LIMIT:
            raise BackupError(f"{beside} is larger than {reader.LEDGER_LIMIT} bytes: refused")
        try:
            found += TargetLedger(beside).entries()
        except (LedgerError, UnicodeDecodeError, OSError) as exc:
            raise BackupError(
                f"the erasure ledger beside the backup ({beside}) cannot be read: {exc}; a "
                "restore that cannot know what was erased does not run"
            ) from None
    own = live_ledger_path(cfg)
    if own.exists():
        ledger = LocalLedger(own)
        try:
            found += ledger.entries()
        finally:
            ledger.close()
    unique = {e.line(): e for e in found}
    return sorted(unique.values(), key=lambda e: (e.when, e.line()))


# --- the target store: empty, or this very restore ---------------------------------------------


def _destinations(cfg: ServiceConfig) -> dict[str, Path]:
    """What a restore moves into place: staging entry → where the store keeps it."""
    moves = {
        "history.db": cfg.path_in_data_dir(cfg.history.path, "history.db"),
        "sessions.db": journal_path(cfg),
        LIVE_LEDGER: live_ledger_path(cfg),
    }
    embedded = cfg.vector_store.embedded
    if embedded is not None:
        moves["qdrant"] = cfg.path_in_data_dir(embedded.path, "qdrant")
    return moves


def _sqlite_rows(path: Path) -> int:
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        return sum(
            int(db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])
            for (name,) in tables
            if not str(name).startswith("sqlite_")
        )
    finally:
        db.close()


def _require_empty(cfg: ServiceConfig, resuming: bool) -> None:
    """Refuse a target store that holds anything (opening it only if something is there)."""
    from memorystore.service.engine.core import MemoryEngine

    places = _destinations(cfg)
    local = [p for name, p in places.items() if name != LIVE_LEDGER and p.exists()]
    remote = cfg.vector_store.embedded is None and not resuming
    if not local and not remote:
        return
    engine = MemoryEngine(cfg)
    try:
        memories = engine.count()
    finally:
        engine.close()
    history = _sqlite_rows(places["history.db"])
    exchanges = _sqlite_rows(places["sessions.db"])
    if (memories and not resuming) or history or exchanges:
        raise BackupError(
            f"the target store is not empty ({memories} memories, {history} history rows, "
            f"{exchanges} journalled exchanges): restore only into a new store"
        )


# --- staging, commit ------------------------------------------------------------------------------


def _staged_config(cfg: ServiceConfig, staging: Path) -> ServiceConfig:
    vs = cfg.vector_store
    if vs.embedded is not None:
        vs = ServiceVectorStore(embedded={"path": None}, collection=vs.collection)
    return cfg.model_copy(
        update={"data_dir": str(staging), "history": ServiceHistory(), "vector_store": vs}
    )


def _write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _commit(cfg: ServiceConfig) -> dict[str, Any]:
    """Make the moves `commit.json` records (each one idempotent: a move already made is
    skipped), write the marker, remove the staging directory; the marker's content."""
    staging = _staging(cfg)
    plan = json.loads((staging / COMMIT).read_text())
    for entry, dest in plan["moves"].items():
        for suffix in ("", "-wal", "-shm", "-journal"):
            source, target = staging / f"{entry}{suffix}", Path(f"{dest}{suffix}")
            if os.path.lexists(source):
                target.parent.mkdir(parents=True, exist_ok=True)
                _remove(target)
                shutil.move(source, target)
            elif suffix and os.path.lexists(target):
                _remove(target)  # a stale side file of the empty store it replaces
    _fsync_dir(Path(cfg.data_dir))
    _write_durably(Path(cfg.data_dir) / MARKER, json.dumps(plan["marker"]).encode())
    shutil.rmtree(staging)
    return dict(plan["marker"])


def _same_backup(done: dict[str, Any], src: reader.Source) -> bool:
    if done.get("name") != src.manifest["name"]:
        return False
    if done.get("created_at") != src.manifest["created_at"]:
        return False
    return done.get("manifest_sha256") in (None, src.manifest_sha256)


def _begun(staging: Path, src: reader.Source) -> bool:
    """Whether the interrupted restore in `staging` was of this very backup."""
    try:
        return _same_backup(json.loads((staging / BEGUN).read_text()), src)
    except (OSError, ValueError):
        return False


def _summary(src: reader.Source) -> dict[str, Any]:
    return {k: src.manifest[k] for k in ("name", "memories", "history_events")}


def restore(
    source: Path,
    cfg: ServiceConfig,
    *,
    key_file: Path | None = None,
    trust_unsigned: bool = False,
) -> dict[str, Any]:
    """Restore `source` into the empty store `cfg` names (the service must not be running).

    Returns the backup's `name`, `memories` and `history_events`, `restored` (False when
    this very backup was restored here already: nothing is written then), `signature` (how
    far the backup was believed) and, once restored, what the erasures kept out."""
    refuse_postgres(cfg)
    key = signing.verifying_key(cfg, key_file)
    with reader.Source(source, cfg, key, trust_unsigned) as src:
        staging = _staging(cfg)
        resuming = False
        if os.path.lexists(staging):
            if (staging / COMMIT).exists():  # killed while moving in: finish the moves
                finished = _commit(cfg)
                if _same_backup(finished, src):
                    return {**_summary(src), "restored": True, "signature": src.trust}
            else:  # killed before: start over
                resuming = _begun(staging, src)
                if not resuming and cfg.vector_store.embedded is None:
                    raise BackupError(
                        f"{staging} holds an interrupted restore of another backup into a "
                        "Qdrant server's collection: finish that one first"
                    )
                _remove(staging)
        marker = Path(cfg.data_dir) / MARKER
        if marker.is_file():
            done = json.loads(marker.read_text())
            if _same_backup(done, src):
                return {**_summary(src), "restored": False, "signature": src.trust}
            raise BackupError(
                f"{cfg.data_dir} already holds a restore of backup {done.get('name')}"
            )
        erasures = ErasureSet(_erasures(src, cfg))
        src.check_checksums()
        checked = replay(src, erasures, Check())
        _require_empty(cfg, resuming)
        counts = _write(src, cfg, erasures, checked.erased)
    log.info(
        "restored backup %s: %d memories, %d history events; left out as erased: %d "
        "memories, %d history events, %d journalled exchanges",
        counts["name"],
        counts["memories"],
        counts["history_events"],
        len(checked.erased),
        checked.erased_history,
        checked.erased_exchanges,
    )
    return {
        **counts,
        "restored": True,
        "signature": src.trust,
        "erased": {
            "memories": len(checked.erased),
            "history_events": checked.erased_history,
            "exchanges": checked.erased_exchanges,
        },
    }


def _write(
    src: reader.Source, cfg: ServiceConfig, erasures: ErasureSet, erased: set[str]
) -> dict[str, Any]:
    """The second pass, into the staging directory; then the commit."""
    staging = _staging(cfg)
    staging.mkdir(parents=True)
    begun = {k: src.manifest[k] for k in ("name", "created_at")}
    begun["manifest_sha256"] = src.manifest_sha256
    _write_durably(staging / BEGUN, json.dumps(begun).encode())
    try:
        counts, memories, events = _stage(src, cfg, erasures, erased, staging)
        _write_ledger(staging / LIVE_LEDGER, erasures.erasures)
        moves = {name: str(dest) for name, dest in _destinations(cfg).items()}
        moves = {name: dest for name, dest in moves.items() if (staging / name).exists()}
        marker = {**begun, "memories": counts.memories, "history_events": counts.history_events}
        _write_durably(staging / COMMIT, json.dumps({"moves": moves, "marker": marker}).encode())
    except Exception:
        # what failed (a file changed since it was checked, a full disk) leaves the store as it
        # was; a Qdrant server's collection keeps its points for a run of this backup to resume
        if cfg.vector_store.embedded is not None:
            _remove(staging)
        raise
    _commit(cfg)
    return {"name": begun["name"], "memories": memories, "history_events": events}


def _stage(
    src: reader.Source, cfg: ServiceConfig, erasures: ErasureSet, erased: set[str], staging: Path
) -> tuple[Counts, int, int]:
    """The second pass, into `staging`: what was written, checked against what was meant."""
    from memorystore.service.engine.core import MemoryEngine

    engine = MemoryEngine(_staged_config(cfg, staging))
    try:
        counts = replay(src, erasures, Stage(engine, staging, erased), check=False)
        memories = engine.count()
        with history_connection(engine.memory) as connection:
            events = int(connection.execute("SELECT count(*) FROM history").fetchone()[0])
    finally:
        engine.close()
    if counts.erased != erased or memories != counts.memories or events != counts.history_events:
        raise BackupError(
            f"restored {memories} memories and {events} history events, the backup holds "
            f"{counts.memories} and {counts.history_events} to restore",
            500,
        )
    return counts, memories, events


def _write_ledger(path: Path, erasures: Iterable[Erasure]) -> None:
    """The restored store's ledger: every erasure applied, each carried out (`done`: the
    restore wrote nothing it covers, so the service has nothing to finish at start-up)."""
    ledger = LocalLedger(path)
    try:
        for erasure in erasures:
            ledger.done(ledger.record(erasure))
    finally:
        ledger.close()
