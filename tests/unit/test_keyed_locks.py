"""Per-key locks: same key one at a time, other keys in parallel, nothing left behind."""

from __future__ import annotations

import asyncio

from memorystore.keyed_locks import KeyedLocks


async def test_same_key_serialises_other_keys_overlap():
    locks = KeyedLocks()
    inside: dict[str, int] = {"a": 0, "b": 0}
    peak: dict[str, int] = {"a": 0, "b": 0}
    overlap = asyncio.Event()

    async def worker(key: str) -> None:
        async with locks.hold(key):
            inside[key] += 1
            peak[key] = max(peak[key], inside[key])
            if inside["a"] and inside["b"]:
                overlap.set()
            await asyncio.sleep(0.01)
            inside[key] -= 1

    await asyncio.gather(*(worker(k) for k in "aaaabbbb"))
    assert peak == {"a": 1, "b": 1}
    assert overlap.is_set()
    assert len(locks) == 0


async def test_lock_is_released_when_the_body_raises():
    locks = KeyedLocks()
    try:
        async with locks.hold("k"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert len(locks) == 0
    async with asyncio.timeout(1):
        async with locks.hold("k"):
            pass
