"""One asyncio lock per key, created on demand and dropped when nobody holds or awaits it.

`exclusive()` stops every key for a moment (a backup's consistent snapshot): it waits for
the holders in flight and makes new ones wait until it ends. A task that already holds a
key is never made to wait by it (nested holds would otherwise deadlock with the snapshot).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Hashable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

_HOLDING: contextvars.ContextVar[int] = contextvars.ContextVar("keyed_locks_holding", default=0)


class KeyedLocks:
    def __init__(self) -> None:
        # key -> (lock, holders + waiters); the event loop is single-threaded, so plain dict
        # updates between awaits are atomic.
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}
        self._open = asyncio.Event()  # cleared while exclusive() runs
        self._open.set()
        self._active = 0  # hold() calls past the gate, not yet finished
        self._idle = asyncio.Event()
        self._idle.set()
        self._exclusive = asyncio.Lock()

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        nested = _HOLDING.get() > 0
        while not nested and not self._open.is_set():
            await self._open.wait()
        self._active += 1
        self._idle.clear()
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        token = _HOLDING.set(_HOLDING.get() + 1)
        try:
            async with lock:
                yield
        finally:
            _HOLDING.reset(token)
            _, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    @asynccontextmanager
    async def hold_many(self, keys: Sequence[Hashable]) -> AsyncIterator[None]:
        """Every key of `keys` (repeats once), taken in one order (sorted by repr) so two
        holders of overlapping sets cannot deadlock."""
        async with AsyncExitStack() as held:
            for key in sorted(set(keys), key=repr):
                await held.enter_async_context(self.hold(key))
            yield

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """No key is held while the body runs; holders in flight finish first."""
        async with self._exclusive:
            self._open.clear()
            try:
                await self._idle.wait()
                yield
            finally:
                self._open.set()

    def __len__(self) -> int:
        return len(self._locks)
