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


async def test_exclusive_waits_for_holders_and_holds_new_ones_back():
    locks = KeyedLocks()
    events: list[str] = []
    inside = asyncio.Event()

    async def writer(name: str, delay: float) -> None:
        async with locks.hold(name):
            events.append(f"{name}+")
            inside.set()
            await asyncio.sleep(delay)
            events.append(f"{name}-")

    first = asyncio.create_task(writer("a", 0.05))
    await inside.wait()

    async def snapshot() -> None:
        async with locks.exclusive():
            events.append("snap+")
            await asyncio.sleep(0.05)
            events.append("snap-")

    snap = asyncio.create_task(snapshot())
    await asyncio.sleep(0.01)
    late = asyncio.create_task(writer("b", 0))
    await asyncio.gather(first, snap, late)
    assert events == ["a+", "a-", "snap+", "snap-", "b+", "b-"]
    assert len(locks) == 0


async def test_a_nested_hold_is_not_stopped_by_a_pending_exclusive():
    locks = KeyedLocks()
    entered = asyncio.Event()
    go_on = asyncio.Event()
    done: list[str] = []

    async def nested() -> None:
        async with locks.hold("outer"):
            entered.set()
            await go_on.wait()
            async with locks.hold("inner"):  # exclusive() is pending: must not deadlock
                done.append("inner")

    async def snapshot() -> None:
        async with locks.exclusive():
            done.append("snap")

    task = asyncio.create_task(nested())
    await entered.wait()
    snap = asyncio.create_task(snapshot())
    await asyncio.sleep(0.01)
    go_on.set()
    async with asyncio.timeout(2):
        await asyncio.gather(task, snap)
    assert done == ["inner", "snap"]
