"""POST /v1/reindex/: the route's decisions, on the real Reindexer over a scripted store (the
re-index itself on the real engine and service: tests/integration/test_reindex.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from memorystore.service.api import maintenance
from memorystore.service.retrieval.reindex import Reindexer


class Store:
    """What the route and a run read: how many memories are behind (none listed: a run
    started here ends at once)."""

    def __init__(self, stale: int) -> None:
        self.stale = stale

    def count(self, filters: Any) -> int:
        return self.stale

    def list(self, filters: Any, top_k: int) -> tuple[list[Any], None]:
        return [], None


def app_with(stale: int) -> tuple[TestClient, Reindexer, list[Any]]:
    engine = SimpleNamespace(
        cfg=SimpleNamespace(retrieval=None), index_version="v2", store=Store(stale)
    )
    reindexer = Reindexer(engine)
    spawned: list[Any] = []

    def spawn(work: Any) -> None:
        spawned.append(work)
        work.close()  # recorded, not run: the route's answer is what is checked

    app = FastAPI()
    app.state.services = SimpleNamespace(reindexer=reindexer, spawn=spawn)
    app.include_router(maintenance.router)
    return TestClient(app), reindexer, spawned


def test_memories_behind_start_a_run_and_say_how_many():
    client, _, spawned = app_with(stale=7)
    answer = client.post("/v1/reindex/")
    assert answer.status_code == 202
    assert answer.json() == {"version": "v2", "pending": 7}
    assert len(spawned) == 1


def test_nothing_behind_starts_nothing():
    client, _, spawned = app_with(stale=0)
    answer = client.post("/v1/reindex/")
    assert answer.status_code == 200 and answer.json()["pending"] == 0
    assert spawned == []


def test_a_run_going_on_is_a_409_with_its_progress():
    client, reindexer, spawned = app_with(stale=3)
    reindexer.running = True
    answer = client.post("/v1/reindex/")
    assert answer.status_code == 409
    assert answer.json()["detail"] == "a re-index is already running"
    assert spawned == []


def test_two_runs_never_overlap():
    _, reindexer, _ = app_with(stale=3)

    async def both() -> list[Any]:
        return await asyncio.gather(reindexer.run(), reindexer.run(), return_exceptions=True)

    first, second = asyncio.run(both())
    assert isinstance(second, RuntimeError) and "already running" in str(second)
    assert first.finished and not reindexer.running
