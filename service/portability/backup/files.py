"""A backup's files, and the backup target as a directory that nothing can lead out of.

Why this shape: the target is a volume more than the service can write to (another pod on a
ReadWriteMany claim, someone with `kubectl exec`), so it is handled as hostile ground:

- every operation goes through a directory file descriptor opened without following a
  symbolic link (`O_NOFOLLOW`), and every entry under it is opened relative to that
  descriptor, never by a path the kernel would resolve again: a link planted in the target,
  or the target itself being one, cannot make the service read, write or delete elsewhere;
- a backup's name is taken under an advisory lock (`flock` on `.<name>.lock`) before any
  other file operation on that name, so two backups of one name cannot interleave (the
  second is refused with 409 at once, never queued), and a partial directory
  (`.<name>.partial`) is removed only by whoever holds its name: at start-up and before
  each backup, the partials of names nobody holds are what a killed process left.

Lock files are removed when released (under the lock); a process that locked a file which
was unlinked meanwhile notices (the inode changed) and locks the new one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from memorystore.config import ServiceConfig
from memorystore.service.state.erasure_ledger import LEDGER_FILE
from memorystore.spec import OBJECT_NAME_PATTERN

__all__ = [
    "ERASURES",
    "FILES",
    "FORMAT",
    "HISTORY",
    "LEGACY_FILES",
    "LEGACY_FORMAT",
    "LEGACY_SUM",
    "MANIFEST",
    "MANIFEST_LIMIT",
    "MEMORIES",
    "POSTGRES_REFUSAL",
    "SESSIONS",
    "SIGNATURE",
    "VECTORS",
    "BackupError",
    "Target",
    "create_file",
    "fd_path",
    "file_digest",
    "name_problem",
    "open_dir",
    "open_file",
    "partial_name",
    "read_small",
    "refuse_postgres",
]

FORMAT = "memorystore.backup/2"
# The format before signatures and the erasure ledger: read only with --trust-unsigned.
LEGACY_FORMAT = "memorystore.backup/1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"  # HMAC-SHA256 of manifest.json with the store's backup key
MEMORIES = "memories.jsonl.gz"
VECTORS = "vectors.f32"
HISTORY = "history.db"
SESSIONS = "sessions.db"
ERASURES = LEDGER_FILE  # the erasure ledger as it was when the backup was taken
FILES = (MEMORIES, VECTORS, HISTORY, SESSIONS, ERASURES)
LEGACY_FILES = (MEMORIES, VECTORS, HISTORY, SESSIONS)
LEGACY_SUM = "manifest.sha256"  # format 1's own checksum of its manifest
MANIFEST_LIMIT = 1 << 20  # a manifest lists five files: anything bigger is not one

POSTGRES_REFUSAL = (
    "this store keeps its memories in PostgreSQL (history.postgres or vectorStore.postgres): "
    "back the database up with its own tools (pg_dump, CloudNativePG backups); exports "
    "(POST /v1/exports/) move single scopes"
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LEFT_BEHIND = re.compile(r"^\.(?P<name>.+)\.(?P<kind>partial|lock)$")


class BackupError(Exception):
    """A backup or restore refused or failed; `status` is the HTTP answer the API gives."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def refuse_postgres(cfg: ServiceConfig) -> None:
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


def partial_name(name: str) -> str:
    return f".{name}.partial"


def _lock_name(name: str) -> str:
    return f".{name}.lock"


def fd_path(dir_fd: int, name: str = "") -> str:
    """A path that reaches `name` through the open directory `dir_fd` (Linux's /proc magic
    link), for what takes only paths (SQLite): no component of it can be swapped."""
    base = f"/proc/self/fd/{dir_fd}"
    return f"{base}/{name}" if name else base


def open_dir(path: Path | str, dir_fd: int | None = None) -> int:
    """A directory's descriptor; ELOOP/ENOTDIR when it is a symbolic link or not a directory."""
    return os.open(path, _DIR_FLAGS, dir_fd=dir_fd)


def open_file(name: str, dir_fd: int) -> int:
    """A regular file under `dir_fd`, for reading; refuses links and anything not a file."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{name} is not a regular file")
    return fd


def read_small(fd: int, limit: int, what: str) -> bytes:
    """All of a small file, refusing one larger than `limit` before reading it."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise BackupError(f"{what} is {size} bytes, more than a {what} can be ({limit})")
    chunks, total = [], 0
    while chunk := os.read(fd, 1 << 16):
        total += len(chunk)
        if total > limit:
            raise BackupError(f"{what} grew past {limit} bytes while it was read")
        chunks.append(chunk)
    return b"".join(chunks)


def file_digest(name: str, dir_fd: int) -> tuple[int, str]:
    """(bytes, SHA-256) of the regular file `name` under `dir_fd`."""
    fd = open_file(name, dir_fd)
    try:
        with os.fdopen(os.dup(fd), "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        return os.fstat(fd).st_size, digest
    finally:
        os.close(fd)


def create_file(name: str, dir_fd: int) -> BinaryIO:
    """A new file under `dir_fd` for writing (mode 0600: a backup holds every memory)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(name, flags, 0o600, dir_fd=dir_fd), "wb")


def _entry(name: str, dir_fd: int) -> str:
    """'missing', 'dir', 'link' or 'other' for an entry of `dir_fd`, without following it."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "other"


class Target:
    """The backup target (`backup.path`), open: every entry is reached through `fd`."""

    def __init__(self, root: Path, fd: int) -> None:
        self.root = root
        self.fd = fd

    @classmethod
    def open(cls, root: Path) -> Target:
        """The target at `root`: a real directory the service can write into (503 otherwise:
        the volume is missing, read-only, or not what was configured)."""
        try:
            mode = os.stat(root, follow_symlinks=False).st_mode
        except FileNotFoundError:
            raise BackupError(
                f"backup target {root} does not exist or is not a directory", 503
            ) from None
        if stat.S_ISLNK(mode):
            raise BackupError(
                f"backup target {root} is a symbolic link: give the directory itself "
                "(no link is followed into or out of a backup target)",
                503,
            )
        if not stat.S_ISDIR(mode):
            raise BackupError(
                f"backup target {root} does not exist or is not a directory", 503
            ) from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise BackupError(f"backup target {root} is not writable", 503)
        try:
            return cls(root, open_dir(root))
        except OSError as exc:
            raise BackupError(
                f"backup target {root} cannot be opened: {exc.strerror}", 503
            ) from None

    @classmethod
    def of(cls, cfg: ServiceConfig) -> Target:
        if cfg.backup is None:
            raise BackupError("no backup target is configured (backup.path)", 409)
        return cls.open(Path(cfg.backup.path))

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- names, locks and partial directories ------------------------------------------------

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Hold `name` (no other process or request may take, delete or clean it meanwhile);
        409 at once when someone else holds it."""
        fd = self._acquire(name)
        if fd is None:
            raise BackupError(
                f"backup {name} is being taken or deleted right now: try again when it is done",
                409,
            )
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_lock_name(name), dir_fd=self.fd)
            os.close(fd)  # closing releases the lock

    def _acquire(self, name: str) -> int | None:
        lock = _lock_name(name)
        for _ in range(100):  # each retry means another holder unlinked the file just now
            if _entry(lock, self.fd) == "link":  # never follow one: take it away instead
                os.unlink(lock, dir_fd=self.fd)
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(lock, flags, 0o600, dir_fd=self.fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            try:
                now = os.stat(lock, dir_fd=self.fd, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is not None and now.st_ino == os.fstat(fd).st_ino:
                return fd
            os.close(fd)
        raise BackupError(f"backup {name}'s lock file keeps being replaced", 503)

    def remove_partial(self, name: str) -> None:
        """Remove `name`'s partial directory (the caller holds `name`)."""
        self._remove_entry(partial_name(name))

    def remove_stale_partials(self) -> list[str]:
        """Remove every `.<name>.partial` whose name nobody holds (what a killed backup left),
        and such a name's lock file; returns the names whose partial went. A partial being
        written (its name held) stays."""
        cleaned = []
        for entry in sorted(os.listdir(self.fd)):
            found = _LEFT_BEHIND.match(entry)
            if not found or name_problem(found["name"]):
                continue
            name = found["name"]
            try:
                with self.lock(name):  # releasing it removes the lock file
                    if self.kind(partial_name(name)) != "missing":
                        self._remove_entry(partial_name(name))
                        cleaned.append(name)
            except BackupError:
                continue  # held: a backup in progress
        return cleaned

    def _remove_entry(self, entry: str) -> None:
        """Remove one entry of the target: a directory's tree (never following a link in it),
        or the link or file itself."""
        kind = _entry(entry, self.fd)
        if kind == "dir":
            shutil.rmtree(entry, dir_fd=self.fd)
        elif kind != "missing":
            os.unlink(entry, dir_fd=self.fd)

    def kind(self, name: str) -> str:
        """'missing', 'dir', 'link' or 'other' for `<target>/<name>`."""
        return _entry(name, self.fd)

    def backup_dir(self, name: str) -> int:
        """The finished backup `name`'s directory descriptor: 404 when there is none, 400 for
        anything that is not a directory (a link is never followed)."""
        kind = self.kind(name)
        if kind == "missing":
            raise BackupError(f"backup {name} not found in {self.root}", 404)
        if kind != "dir":
            what = "a symbolic link" if kind == "link" else "not a directory"
            raise BackupError(
                f"{self.root}/{name} is {what}, not a backup: refused (nothing outside the "
                "backup target is read or deleted)",
                400,
            )
        try:
            return open_dir(name, self.fd)
        except OSError as exc:  # swapped for a link after the check
            raise BackupError(f"{self.root}/{name} cannot be opened: {exc.strerror}", 400) from None

    def manifest(self, name: str) -> dict[str, Any]:
        """The manifest of the finished backup `name` (404 when it has none)."""
        fd = self.backup_dir(name)
        try:
            try:
                file = open_file(MANIFEST, fd)
            except FileNotFoundError:
                raise BackupError(f"backup {name} not found in {self.root}", 404) from None
            except OSError:
                raise BackupError(
                    f"{self.root}/{name}/{MANIFEST} is not a regular file", 400
                ) from None
            try:
                raw = read_small(file, MANIFEST_LIMIT, MANIFEST)
            finally:
                os.close(file)
        finally:
            os.close(fd)
        try:
            manifest = json.loads(raw)
        except ValueError:
            raise BackupError(f"{self.root}/{name}/{MANIFEST} is not valid JSON", 400) from None
        if not isinstance(manifest, dict):
            raise BackupError(f"{self.root}/{name}/{MANIFEST} is not a JSON object", 400)
        return manifest

    def remove(self, name: str) -> bool:
        """Remove backup `name` and any partial of it, under its lock; False when neither
        existed. Anything but a directory in the backup's place is refused (400), never
        followed; a partial is removed whatever it is (a link as a link)."""
        with self.lock(name):
            kind = self.kind(name)
            if kind not in ("dir", "missing"):
                os.close(self.backup_dir(name))  # raises the 400 naming what it is
            found = kind == "dir"
            if found:
                self._remove_entry(name)
            if self.kind(partial_name(name)) != "missing":
                self._remove_entry(partial_name(name))
                found = True
            return found
