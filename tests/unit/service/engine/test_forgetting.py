"""The one erasure path (engine/forgetting.py) on a real engine (the embedded default, SQLite
state): failures, resumes and the links between memories. The whole path against every
file and table: tests/integration/test_erasure.py; killed half-way: test_erasure_crash.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memorystore.scope import EntityIds
from memorystore.service.engine.forgetting import ERASED_REASON
from memorystore.service.ops.runner import embedded_config
from memorystore.service.services import Services
from memorystore.service.state.erasures import Erasure, Forgotten, scope_digest

BOB = EntityIds(user_id="bob")


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    built = Services.build(embedded_config(tmp_path / "data"))
    yield built
    await built.aclose()


async def fact(services: Services, text: str, scope: EntityIds = BOB) -> str:
    (written, *_) = await services.engine.add([{"role": "user", "content": text}], scope, {}, False)
    return written["id"]


class Failing:
    """A place that fails the first `times` erasures it is asked to carry out."""

    def __init__(self, times: int) -> None:
        self.times = times

    def forget_erased(self, forgotten: Forgotten) -> int:
        if self.times:
            self.times -= 1
            raise OSError("the disk is gone")
        return 0

    def checkpoint(self) -> bool:
        return True


async def test_an_erasure_that_failed_half_way_is_finished_by_a_later_resume(services):
    engine = services.engine
    kept = await fact(services, "alice likes tea", EntityIds(user_id="alice"))
    erased = await fact(services, "bob likes chess")
    engine.forgetting.places.append(Failing(1))
    with pytest.raises(OSError):
        await services.erase(BOB)
    assert [e.scope_digest for _, e in engine.ledger.pending()] == [scope_digest(BOB)]
    assert await engine.existing([erased]) == {erased}  # recorded, not carried out

    assert await engine.forgetting.resume(older_than_s=3600) == 0  # too recent to be stale
    assert await engine.forgetting.resume() == 1
    assert engine.ledger.pending() == []
    assert await engine.existing([erased, kept]) == {kept}


async def test_a_resume_leaves_an_erasure_that_is_running_alone(services):
    engine = services.engine
    await fact(services, "bob likes chess")
    entered, release = asyncio.Event(), asyncio.Event()

    class Slow(Failing):
        def forget_erased(self, forgotten: Forgotten) -> int:
            loop.call_soon_threadsafe(entered.set)
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
            return 0

    loop = asyncio.get_running_loop()
    engine.forgetting.places.append(Slow(0))
    running = asyncio.create_task(services.erase(BOB))
    await entered.wait()
    assert await engine.forgetting.resume() == 0
    release.set()
    assert await running == 1


async def test_a_resumed_scope_erasure_spares_what_the_scope_holds_since(services):
    """bob erased an hour ago, the erasure interrupted; bob came back: his new memory stays,
    the one from before the erasure goes."""
    engine = services.engine
    before = await fact(services, "bob likes chess")
    stamp = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    await asyncio.to_thread(engine.store.update, before, None, {"created_at": stamp})
    at = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    engine.ledger.record(Erasure(at, scope_digest(BOB), ()))
    since = await fact(services, "bob likes go")
    assert await engine.forgetting.resume() == 1
    assert await engine.existing([before, since]) == {since}


async def test_erasing_one_memory_unlinks_the_memories_that_quote_it(services):
    engine = services.engine
    old = await fact(services, "My favourite colour is qorvgreen")
    new = await fact(services, "My favourite colour is now zentrablue")
    retired = await asyncio.to_thread(engine.store.get, vector_id=old)
    assert "zentrablue" in retired.payload["retired_because"]
    turns = [
        {"role": "user", "content": "I met Zorblax today", "name": "bob"},
        {"role": "user", "content": "We played chess", "name": "bob"},
    ]
    first, second = (r["id"] for r in await engine.add(turns, BOB, {}, False))
    linked = await asyncio.to_thread(engine.store.get, vector_id=second)
    assert linked.payload["prev_id"] == first

    await engine.batch_delete([new, first])

    retired = await asyncio.to_thread(engine.store.get, vector_id=old)
    assert retired.payload["retired_because"] == ERASED_REASON
    assert retired.payload["lifecycle"] == "retired"
    linked = await asyncio.to_thread(engine.store.get, vector_id=second)
    assert "prev_id" not in linked.payload and linked.payload["data"] == "We played chess"
    with pytest.raises(LookupError):
        await engine.history(new, EntityIds())
