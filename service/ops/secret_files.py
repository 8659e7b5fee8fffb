"""The service's other secrets, re-read from their mounted files while it runs.

In a cluster every secret reaches the service as a file of a mounted Secret (the operator's
`secret_files.py`), and a rotated Secret reaches the pod without a restart: kubelet writes
the new files into a fresh directory and swaps a symlink (`..data`) to it in one rename, so
a secret's path keeps its name but resolves to another file. The service key has its own
re-reader (`auth.KeyRing`) and the certificate its own (`tls.CertificateReloader`); this one
follows the rest — the PostgreSQL DSNs, the embedder's and the extraction model's API keys,
the Qdrant server's API key and CA — and hands a changed value to whatever holds the old one
(`on_change`: the pools' connection string, mem0's model clients, the Qdrant clients).

Every `interval` seconds each file is stat'ed (what its path resolves to, inode, size,
modification time); a file whose stat changed, or that has not been read for
`refresh_seconds` (a rewrite in place within one timestamp tick), is read again. A file that
is missing, empty, unreadable or not UTF-8, or a value its holder refuses, keeps the last
good value in use, with a warning naming the field and why. No value ever reaches a log line
or an exception.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from memorystore.config import ConfigError, SecretSource, ServiceConfig

__all__ = ["POLL_SECONDS", "REFRESH_SECONDS", "SecretFiles", "followed_secrets"]

log = logging.getLogger("memorystore.service.ops.secret_files")

POLL_SECONDS = 5.0  # how often the files are stat'ed
REFRESH_SECONDS = 60.0  # how often each file is read even though its stat did not change

Apply = Callable[[str], None]
Signature = tuple[str, int, int, int, int]
_NOTHING_REFUSED = object()  # `refused` before any refusal (None is a missing file's stat)


def followed_secrets(cfg: ServiceConfig) -> dict[str, SecretSource]:
    """The file-based secrets of `cfg` this module follows, by the field they are read as.

    Not the service key (auth.KeyRing), the certificate (tls.CertificateReloader) nor the
    backup signing key (read for each backup). A secret taken from an environment variable
    cannot change while the process runs, so it is not followed."""
    vectors = cfg.vector_store.postgres.database if cfg.vector_store.postgres else None
    candidates = {
        "history.postgres.dsn": cfg.history.postgres.dsn if cfg.history.postgres else None,
        "vectorStore.postgres.database.dsn": vectors.dsn if vectors else None,
        "vectorStore.server.apiKey": cfg.vector_store.server.api_key
        if cfg.vector_store.server
        else None,
        "vectorStore.server.ca": cfg.vector_store.server.ca if cfg.vector_store.server else None,
        "embedder.apiKey": cfg.embedder.api_key,
        "llm.apiKey": cfg.llm.api_key if cfg.llm else None,
    }
    return {
        name: source.model_copy(update={"generate": False})  # a reload never creates a file
        for name, source in candidates.items()
        if source is not None and source.file and not (source.env and os.environ.get(source.env))
    }


def _signature(path: str) -> Signature | None:
    """What `path` is now: the file it resolves to (kubelet swaps a symlink), its inode,
    size and modification time; None when it cannot be stat'ed."""
    try:
        stat = os.stat(path)
        resolved = os.path.realpath(path)
    except OSError:
        return None
    return resolved, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


@dataclass
class _Followed:
    name: str
    source: SecretSource
    value: str | None  # the last good value (None: never read successfully)
    seen: Signature | None  # the stat last acted on
    read_at: float
    uses: list[Apply] = field(default_factory=list)
    refused: object = _NOTHING_REFUSED  # the stat (or None) of a file already warned about


class SecretFiles:
    """`SecretFiles(followed_secrets(cfg))` before the secrets' holders read them (so a
    change in between is not missed), `on_change(field, apply)` once they are built, then
    `start()`; `check()` does one round now (tests, or a caller's own loop)."""

    def __init__(
        self,
        secrets: dict[str, SecretSource],
        *,
        interval: float = POLL_SECONDS,
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reloads = 0  # values handed to their holders since start-up
        self._followed: dict[str, _Followed] = {}
        for name, source in secrets.items():
            assert source.file, f"{name}: only a file-based secret can be followed"
            seen = _signature(source.file)
            value = self._read(name, source, warn=False)  # its holder fails start-up, naming it
            self._followed[name] = _Followed(name, source, value, seen, clock())

    @property
    def fields(self) -> list[str]:
        """The fields followed, and handed to a holder when they change."""
        return sorted(name for name, f in self._followed.items() if f.uses)

    def on_change(self, name: str, apply: Apply) -> None:
        """Call `apply(value)` with each new value of `name` (if it is followed)."""
        followed = self._followed.get(name)
        if followed is not None:
            followed.uses.append(apply)

    def check(self) -> list[str]:
        """Re-read what changed and hand new values over; the fields that changed."""
        changed: list[str] = []
        with self._lock:
            for followed in self._followed.values():
                if followed.uses and self._check(followed):
                    changed.append(followed.name)
        return changed

    def _check(self, followed: _Followed) -> bool:
        assert followed.source.file
        seen = _signature(followed.source.file)
        now = self._clock()
        if seen == followed.seen and now - followed.read_at < self.refresh_seconds:
            return False
        followed.seen, followed.read_at = seen, now
        value = self._read(followed.name, followed.source, warn=seen != followed.refused)
        if value is None:
            followed.refused = seen
            return False
        if value == followed.value:
            followed.refused = _NOTHING_REFUSED
            return False
        for apply in followed.uses:
            try:
                apply(value)
            except ConfigError as exc:  # e.g. a DSN that moves to another database
                self._refuse(followed, seen, str(exc))
                return False
            except Exception as exc:  # its message could hold the value: only its type
                self._refuse(followed, seen, f"it could not be applied ({type(exc).__name__})")
                return False
        followed.value, followed.refused = value, _NOTHING_REFUSED
        self.reloads += 1
        log.info("%s: the secret in %s changed; now in use", followed.name, followed.source.file)
        return True

    def _refuse(self, followed: _Followed, seen: Signature | None, why: str) -> None:
        if seen != followed.refused:
            log.warning("%s: keeping the last good secret: %s", followed.name, why)
        followed.refused = seen

    @staticmethod
    def _read(name: str, source: SecretSource, warn: bool = True) -> str | None:
        """The secret now, or None (with a warning naming the field and why) when the file
        is missing, empty, unreadable or not text."""
        try:
            value = source.read(name)
        except ConfigError as exc:  # names the field and the file, never the value
            if warn:
                log.warning("%s: keeping the last good secret: %s", name, exc)
            return None
        if value is None:  # an optional secret's file, missing or empty
            if warn:
                log.warning(
                    "%s: keeping the last good secret: %s is missing or empty", name, source.file
                )
            return None
        return value.get_secret_value()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception as exc:  # the poller outlives any surprise; the old values stay
                log.error(  # its type only: a message could quote what a file holds
                    "re-reading the secret files failed (%s); the next round retries",
                    type(exc).__name__,
                )

    def start(self) -> None:
        """Follow the files in a daemon thread (nothing to do when no field has a holder)."""
        if self._thread is None and self.fields:
            self._thread = threading.Thread(target=self._run, name="secret-files", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
