"""The service's state in a real PostgreSQL (history.postgres): mem0's history, the schema
migrations, the cross-replica locks, the scope chain and idempotency records.

"Replicas" here are separate `postgres.Database` objects (separate pools and connections), which is
what separate processes are to the database; the multi-process tests run real services
(test_pg_replicas.py).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from mem0.memory.storage import SQLiteManager

from memorystore.config import ConfigError
from memorystore.scope import EntityIds
from memorystore.service.state import idempotency, pg_history, postgres, scope_chain
from memorystore_dev.postgres import PostgresServer

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def dsn(pg_server: PostgresServer) -> str:
    return pg_server.database(f"t_{uuid.uuid4().hex[:12]}")


def _replica(dsn: str) -> postgres.Database:
    """A Database of its own (not the process registry's): one replica's pools."""
    return postgres.Database(
        dsn, field="history.postgres", pool_size=8, statement_timeout_seconds=5
    )


@pytest.fixture
def replicas(dsn: str) -> Iterator[list[postgres.Database]]:
    made = [_replica(dsn) for _ in range(3)]
    made[0].migrate([*pg_history.MIGRATIONS, *scope_chain.MIGRATIONS, *idempotency.MIGRATIONS])
    yield made
    for database in made:
        database.close()


def _without_ids(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "id"} for row in rows]


def test_the_postgres_history_answers_exactly_as_mem0s_sqlite_history(
    replicas: list[postgres.Database], tmp_path: Path
):
    sqlite = SQLiteManager(str(tmp_path / "history.db"))
    postgres = pg_history.PgHistory(replicas[0])
    for store in (sqlite, postgres):
        store.add_history(
            "m1",
            None,
            "I live in Hangzhou",
            "ADD",
            created_at="2026-01-01T00:00:00+00:00",
            updated_at="2026-01-01T00:00:00+00:00",
            actor_id="alice",
            role="user",
        )
        store.add_history(
            "m1",
            "I live in Hangzhou",
            "I live in Shanghai",
            "UPDATE",
            created_at="2026-01-01T00:00:00+00:00",
            updated_at="2026-02-01T00:00:00+00:00",
        )
        store.add_history(
            "m1",
            "I live in Shanghai",
            None,
            "DELETE",
            created_at="2026-03-01T00:00:00+00:00",
            updated_at="2026-03-01T00:00:00+00:00",
            is_deleted=1,
        )
        store.batch_add_history(
            [
                {
                    "memory_id": "m2",
                    "new_memory": "我住在杭州",
                    "event": "ADD",
                    "created_at": "2026-01-02",
                },
                {"memory_id": "m3", "new_memory": "x'; DROP TABLE history; --", "event": "ADD"},
            ]
        )
        store.save_messages([{"role": "user", "content": f"turn {i}"} for i in range(12)], "s1")
    for memory_id in ("m1", "m2", "m3", "absent"):
        assert _without_ids(postgres.get_history(memory_id)) == _without_ids(
            sqlite.get_history(memory_id)
        ), memory_id
    assert postgres.get_history("m1")[2]["is_deleted"] is True
    last = postgres.get_last_messages("s1", limit=10)
    # mem0 stamps a call's messages with one time, so which 10 SQLite keeps of 12 saved
    # together is its tie-break (here the first 10); PostgreSQL keeps the last 10 written
    assert len(last) == len(sqlite.get_last_messages("s1")) == 10
    assert [m["content"] for m in last] == [f"turn {i}" for i in range(2, 12)]
    rows = postgres.get_history("m1")
    assert postgres.ids_in_use([rows[0]["id"], "nope"]) == {rows[0]["id"]: "m1"}
    assert postgres.replace("m1", rows[:1]) == 1
    assert postgres.get_history("m1") == rows[:1]
    postgres.reset()
    assert postgres.get_history("m2") == [] and postgres.count() == 0
    sqlite.close()


def test_migrations_apply_once_even_when_replicas_start_together(dsn: str):
    databases = [_replica(dsn) for _ in range(4)]
    steps = [*pg_history.MIGRATIONS, *scope_chain.MIGRATIONS, *idempotency.MIGRATIONS]
    applied: list[list[str]] = []
    errors: list[BaseException] = []

    def start(database: postgres.Database) -> None:
        try:
            applied.append(database.migrate(steps))
        except BaseException as exc:  # collected: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(d,)) for d in databases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    done = [step for by_one in applied for step in by_one]  # each step by exactly one replica
    assert sorted(done) == sorted(f"{s.component} {s.version}: {s.name}" for s in steps)
    rows = databases[0].execute(
        "SELECT component, version FROM memorystore_migrations ORDER BY component"
    )
    assert sorted(rows) == sorted((s.component, s.version) for s in steps)
    assert databases[1].migrate(steps) == []  # a restart applies nothing
    for database in databases:
        database.close()


def test_a_failing_migration_step_leaves_nothing_half_applied(dsn: str):
    database = _replica(dsn)
    broken = postgres.Migration(
        "demo", 1, "two statements, the second fails", "CREATE TABLE demo_a (x int); SELECT 1/0;"
    )
    with pytest.raises(psycopg.errors.DivisionByZero):
        database.migrate([broken])
    assert database.execute("SELECT to_regclass('demo_a')") == [(None,)]
    fixed = postgres.Migration("demo", 1, "fixed", "CREATE TABLE demo_a (x int);")
    assert database.migrate([fixed]) == ["demo 1: fixed"]
    database.close()


def test_replica_locks_serialise_a_read_modify_write_across_replicas(
    replicas: list[postgres.Database],
):
    replicas[0].execute("CREATE TABLE counter (n int)")
    replicas[0].execute("INSERT INTO counter VALUES (0)")
    scope = EntityIds(user_id="alice")

    async def bump(database: postgres.Database, locks: postgres.ReplicaLocks) -> None:
        async with locks.hold(scope):
            (n,) = (await asyncio.to_thread(database.execute, "SELECT n FROM counter"))[0]
            await asyncio.sleep(0.005)  # widen the window a lost update needs
            await asyncio.to_thread(database.execute, "UPDATE counter SET n = %s", (n + 1,))

    async def main() -> None:
        locks = [postgres.ReplicaLocks(d, "scope") for d in replicas]
        await asyncio.gather(
            *(bump(d, lk) for _ in range(15) for d, lk in zip(replicas, locks, strict=True))
        )
        for database in replicas:
            await database.lock_pool.close()

    asyncio.run(main())
    assert replicas[0].execute("SELECT n FROM counter") == [(45,)]


def test_a_lock_held_by_a_replica_that_dies_is_released(replicas: list[postgres.Database]):
    """A replica killed mid-write loses its connections; PostgreSQL then drops its locks."""

    async def main() -> float:
        holder, waiter = (
            postgres.ReplicaLocks(replicas[0], "scope"),
            postgres.ReplicaLocks(replicas[1], "scope"),
        )
        scope = EntityIds(user_id="bob")
        held = asyncio.Event()

        async def hold_forever() -> None:
            async with holder.hold(scope):
                held.set()
                await asyncio.sleep(3600)

        task = asyncio.create_task(hold_forever())
        await held.wait()
        name = postgres.lock_id("scope:" + postgres.lock_name(scope))
        loop = asyncio.get_running_loop()
        start = loop.time()
        # the "crash": the holder's backend goes away as when its process is SIGKILLed
        await asyncio.to_thread(
            replicas[2].execute,
            "SELECT pg_terminate_backend(pid) FROM pg_locks "
            "WHERE locktype = 'advisory' AND granted AND "
            "((classid::bigint << 32) | objid::bigint) = %s",
            (name,),
        )
        async with waiter.hold(scope):
            waited = loop.time() - start
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for database in replicas:
            await database.lock_pool.close()
        return waited

    assert asyncio.run(main()) < 10


def test_concurrent_claims_through_three_replicas_form_one_chain(replicas: list[postgres.Database]):
    chains = [scope_chain.PgChain(d) for d in replicas]
    scope = EntityIds(user_id="carol", agent_id="tutor")
    ids = [str(uuid.uuid4()) for _ in range(60)]

    async def main() -> list[tuple[str, tuple[str, str] | None]]:
        async def claim(i: int) -> tuple[str, tuple[str, str] | None]:
            return ids[i], await chains[i % 3].claim(scope, ids[i], f"turn {i}")

        return await asyncio.gather(*(claim(i) for i in range(len(ids))))

    claimed = asyncio.run(main())
    previous = {memory_id: prev[0] if prev else None for memory_id, prev in claimed}
    firsts = [m for m, p in previous.items() if p is None]
    assert len(firsts) == 1  # exactly one memory started the chain
    # every memory but the last is the previous of exactly one other: one unbroken chain
    links = [p for p in previous.values() if p is not None]
    assert len(set(links)) == len(links) == len(ids) - 1
    following = {p: m for m, p in previous.items() if p is not None}
    walked, at = [firsts[0]], firsts[0]
    while at in following:
        at = following[at]
        walked.append(at)
    assert sorted(walked) == sorted(ids)
    lines = dict(claimed)
    assert all(prev is None or prev[1] == f"turn {ids.index(prev[0])}" for prev in lines.values())
    asyncio.run(chains[0].forget(scope))
    assert asyncio.run(chains[1].claim(scope, "new", "x")) is None  # a deleted scope restarts


def test_one_idempotency_key_through_three_replicas_runs_once(replicas: list[postgres.Database]):
    runs: list[int] = []

    async def main() -> list[tuple[int, object, bool]]:
        stores = [
            idempotency.IdempotencyStore(
                idempotency.PgRecords(d), postgres.ReplicaLocks(d, "idempotency")
            )
            for d in replicas
        ]

        async def action() -> tuple[int, object]:
            runs.append(1)
            await asyncio.sleep(0.05)  # the retries arrive while the first still runs
            return 200, {"results": [{"id": "m1", "event": "ADD"}]}

        answers = await asyncio.gather(*(s.run("key-1", "fp", action) for s in stores * 3))
        with pytest.raises(idempotency.KeyReused):
            await stores[1].run("key-1", "another body", action)
        for database in replicas:
            await database.lock_pool.close()
        return answers

    answers = asyncio.run(main())
    assert len(runs) == 1
    assert {(status, str(body)) for status, body, _ in answers} == {
        (200, str({"results": [{"id": "m1", "event": "ADD"}]}))
    }
    assert sum(replayed for _, _, replayed in answers) == 8


def test_database_errors_never_show_the_password(pg_server: PostgresServer):
    wrong = pg_server.dsn.replace(pg_server.password, "not-the-password-s3cr3t")
    database = postgres.Database(wrong, field="history.postgres", connect_timeout_seconds=2)
    with pytest.raises(postgres.DatabaseUnavailable) as caught:
        database.check()
    message = str(caught.value)
    assert "history.postgres" in message and "password authentication failed" in message
    assert "not-the-password-s3cr3t" not in message and pg_server.password not in message
    database.close()
    with pytest.raises(ConfigError) as bad:  # invalid config: the start stops (exit 2)
        postgres.Database("postgresql://u:hunter2@[::1:5432/x", field="history.postgres")
    assert "hunter2" not in str(bad.value) and "history.postgres.dsn" in str(bad.value)
    assert "hunter2" not in postgres.describe(ValueError("password=hunter2 host=x"))


def test_a_statement_past_the_timeout_fails_naming_the_timeout(dsn: str):
    database = postgres.Database(dsn, field="history.postgres", statement_timeout_seconds=0.2)
    with pytest.raises(postgres.DatabaseUnavailable) as caught:
        database.execute("SELECT pg_sleep(3)")
    assert "statement timeout (200 ms)" in str(caught.value)
    assert database.execute("SELECT 1") == [(1,)]  # the pool goes on serving
    database.close()
