"""The tenant keys the service accepts, re-read from their files while it runs.

In a cluster the keys are files of a mounted Secret (`<store>-service-key`: `api-key` and,
during a rotation's grace period, `previous-api-key`). The operator rewrites that Secret
on a rotation and kubelet updates the files in place, so the service reloads them instead
of restarting: at most once a second when a presented token matches no key (a freshly
rotated key works as soon as the file changes), and every `refresh_seconds` in any case (a
removed previous key stops working). Every comparison is constant-time, and no key or
token ever reaches a log line or an exception.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Callable

from memorystore.config import ConfigError, SecretSource

log = logging.getLogger("memorystore.service")

REFRESH_SECONDS = 10.0
MISS_RELOAD_SECONDS = 1.0


class KeyRing:
    def __init__(
        self,
        current: SecretSource,
        previous: SecretSource | None = None,
        *,
        refresh_seconds: float = REFRESH_SECONDS,
        miss_reload_seconds: float = MISS_RELOAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Reads the keys now: a missing or empty current key fails start-up naming apiKey."""
        self._current_source = current
        # Reloads never create a key file, even where start-up may (`generate: true`).
        self._current_reload = current.model_copy(update={"generate": False})
        self._previous_source = previous
        self.refresh_seconds = refresh_seconds
        self.miss_reload_seconds = miss_reload_seconds
        self._clock = clock
        self._lock = threading.Lock()
        key = current.resolve("apiKey").get_secret_value().encode()
        self._keys: tuple[bytes, ...] = (key, *self._read_previous())
        self._loaded_at = clock()

    @property
    def size(self) -> int:
        """How many keys are accepted now (1, or 2 during a grace period)."""
        return len(self._keys)

    def check(self, token: str) -> bool:
        """True when `token` is an accepted key."""
        presented = token.encode("utf-8", "surrogateescape")
        now = self._clock()
        if now - self._loaded_at >= self.refresh_seconds:
            self.reload()
        if _matches(presented, self._keys):
            return True
        if self._clock() - self._loaded_at >= self.miss_reload_seconds:
            self.reload()
            return _matches(presented, self._keys)
        return False

    def reload(self) -> None:
        """Re-read the key files. A current key that cannot be read or is empty keeps the
        last good one (a half-written mount must not lock every agent out)."""
        if not self._lock.acquire(blocking=False):
            return  # another request is reloading: answer with the keys as they are
        try:
            self._loaded_at = self._clock()
            try:
                current = self._current_reload.resolve("apiKey").get_secret_value().encode()
            except ConfigError as exc:
                log.warning("keeping the last service key: %s", exc)
                current = self._keys[0]
            try:
                previous = self._read_previous()
            except ConfigError as exc:
                log.warning("no previous service key accepted: %s", exc)
                previous = ()
            keys = (current, *previous)
            if keys != self._keys:
                log.info(
                    "service keys reloaded: %s, %s",
                    "current key changed" if current != self._keys[0] else "current key unchanged",
                    "previous key accepted" if previous else "no previous key",
                )
                self._keys = keys
        finally:
            self._lock.release()

    def _read_previous(self) -> tuple[bytes, ...]:
        if self._previous_source is None:
            return ()
        value = self._previous_source.read("previousApiKey")
        return (value.get_secret_value().encode(),) if value is not None else ()


def _matches(presented: bytes, keys: tuple[bytes, ...]) -> bool:
    """Compares against every key, without stopping at a match: the time taken does not
    tell which key matched, nor how much of one."""
    found = False
    for key in keys:
        found |= hmac.compare_digest(presented, key)
    return found
