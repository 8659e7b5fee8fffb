"""What an erasure costs on the embedded default, the on-disk purge included: printed figures.

A store of N memories (N from ERASURE_COST_MEMORIES, 1000 by default; the report's figures
were taken at 1000 and 10000) is written through the engine's own insert (random unit
vectors: the embedder's speed is not what is measured here) across 20 users, with a history
row each. Then, timed: erasing one user (a twentieth of the store: ledger, places, deletes,
history, checkpoints and the shard rewrite), one memory, and the shard rewrite alone. The
assertions check what was erased, not how fast (no timed assertion: machines differ).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from pathlib import Path

import pytest

from memorystore.scope import EntityIds
from memorystore.service.engine.mem0_seam import create_memory
from memorystore.service.ops.runner import embedded_config
from memorystore.service.services import Services

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

USERS = 20


def _vector(rng: random.Random, dims: int) -> list[float]:
    raw = [rng.gauss(0, 1) for _ in range(dims)]
    norm = sum(x * x for x in raw) ** 0.5
    return [x / norm for x in raw]


async def _fill(services: Services, count: int) -> dict[str, list[str]]:
    rng = random.Random(3)
    engine = services.engine
    dims = engine.cfg.embedder.vector_size()
    ids: dict[str, list[str]] = {}
    for i in range(count):
        user = f"user-{i % USERS}"
        memory_id = str(uuid.uuid4())
        text = f"{user} said note number {i}: {rng.random():.6f}"
        metadata = {"user_id": user, "role": "user"}
        await create_memory(engine.memory, memory_id, _vector(rng, dims), text, text, metadata)
        ids.setdefault(user, []).append(memory_id)
    return ids


async def _measure(data: Path, count: int) -> dict[str, float]:
    services = Services.build(embedded_config(data))
    try:
        ids = await _fill(services, count)
        engine = services.engine
        started = time.perf_counter()
        erased = await services.erase(EntityIds(user_id="user-0"))
        scope_s = time.perf_counter() - started
        assert erased == len(ids["user-0"])
        assert engine.count() == count - erased
        started = time.perf_counter()
        await engine.delete(ids["user-1"][0], EntityIds())
        one_s = time.perf_counter() - started
        started = time.perf_counter()
        await asyncio.to_thread(engine.store.purge)  # type: ignore[attr-defined]
        purge_s = time.perf_counter() - started
        assert engine.count() == count - erased - 1
        assert await asyncio.to_thread(engine.ledger.pending) == []
        return {"user": scope_s, "memory": one_s, "purge": purge_s, "erased": erased}
    finally:
        await services.aclose()


def test_the_cost_of_an_erasure_is_measured_and_printed(tmp_path: Path):
    count = int(os.environ.get("ERASURE_COST_MEMORIES", "1000"))
    figures = asyncio.run(_measure(tmp_path / "data", count))
    print(
        f"\nerasure on the embedded default, {count} memories: one user "
        f"({figures['erased']:.0f} memories) {figures['user']:.2f} s, one memory "
        f"{figures['memory']:.2f} s, of which the shard rewrite alone takes "
        f"{figures['purge']:.2f} s"
    )
