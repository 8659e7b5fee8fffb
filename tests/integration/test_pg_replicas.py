"""Several real `memorystore serve` processes on one real PostgreSQL (issue 17): concurrent
writers through every replica, a retry through another replica, a replica SIGKILLed under
load, the database restarted under load, and a database that is down or refuses the login.

What is checked is read back from the database itself, not from the service's answers.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from memorystore_dev.postgres import PostgresServer
from memorystore_dev.replicas import Replicas, ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ADD = "/v3/memories/add/"
VECTORS = "memorystore_vectors_memories"


@pytest.fixture
def dsn(pg_server: PostgresServer) -> str:
    return pg_server.database(f"r_{uuid.uuid4().hex[:12]}")


def _turn(text: str, user: str) -> dict:
    """A conversation turn (it has a speaker), so it joins the scope's chain."""
    return {"messages": [{"role": "user", "content": text, "name": user}], "user_id": user}


def _stored(dsn: str, user: str) -> list[tuple[str, str, str | None]]:
    """(id, text, prev_id) of every memory of `user`, read from PostgreSQL."""
    with psycopg.connect(dsn) as db:
        rows = db.execute(
            f"SELECT id::text, payload->>'data', payload->>'prev_id' FROM {VECTORS} "
            "WHERE payload->>'user_id' = %s",
            (user,),
        ).fetchall()
    return [(str(i), str(t), p) for i, t, p in rows]


def _adds_in_history(dsn: str, ids: list[str]) -> Counter[str]:
    with psycopg.connect(dsn) as db:
        rows = db.execute(
            "SELECT memory_id FROM memorystore_history WHERE event = 'ADD' AND memory_id = ANY(%s)",
            (ids,),
        ).fetchall()
    return Counter(str(r[0]) for r in rows)


def _one_chain(memories: list[tuple[str, str, str | None]]) -> list[str]:
    """The scope's memories in chain order; fails unless they form one unbroken chain."""
    by_prev = {}
    starts = []
    for memory_id, _, prev in memories:
        if prev is None:
            starts.append(memory_id)
        else:
            assert prev not in by_prev, f"two memories follow {prev}"
            by_prev[prev] = memory_id
    assert len(starts) == 1, f"{len(starts)} chain starts"
    order = [starts[0]]
    while order[-1] in by_prev:
        order.append(by_prev[order[-1]])
    assert sorted(order) == sorted(m for m, _, _ in memories), "memories outside the chain"
    return order


def test_writers_through_three_replicas_lose_duplicate_and_reorder_nothing(
    dsn: str, tmp_path: Path
):
    users = [f"user-{i}" for i in range(4)]
    texts = {u: [f"{u} said thing number {n}" for n in range(24)] for u in users}
    with Replicas(tmp_path, dsn, 3) as replicas:
        clients = [
            httpx.Client(base_url=s.url, headers=replicas.headers, timeout=120)
            for s in replicas.services
        ]
        # every text is sent twice, through two different replicas, all at once
        jobs = [
            (clients[(n + copy) % 3], u, text)
            for u in users
            for n, text in enumerate(texts[u])
            for copy in (0, 1)
        ]

        def send(job: tuple[httpx.Client, str, str]) -> dict:
            client, user, text = job
            response = client.post(ADD, json=_turn(text, user))
            assert response.status_code == 200, response.text
            return response.json()["results"][0]

        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(send, jobs))
        for client in clients:
            client.close()
    events = Counter(a["event"] for a in answers)
    assert events == {"ADD": 96, "NONE": 96}  # each text stored by one replica only
    for user in users:
        stored = _stored(dsn, user)
        assert sorted(t for _, t, _ in stored) == sorted(texts[user])  # none lost, none twice
        _one_chain(stored)  # one order for the scope, whichever replica wrote each turn
        adds = _adds_in_history(dsn, [m for m, _, _ in stored])
        assert set(adds.values()) == {1} and len(adds) == len(stored)


def test_requests_of_many_turns_through_two_replicas_hold_their_locks_on_one_connection(
    dsn: str, tmp_path: Path
):
    """A request's turns are kept once each under one advisory lock per text, all on one
    connection: 60 texts per request, four requests at once sharing them in opposite orders
    through two replicas (pool of 10), none lost, none twice, no pool exhausted."""
    texts = [f"a turn of the long talk, number {n}" for n in range(60)]
    with Replicas(tmp_path, dsn, 2) as replicas:
        clients = [
            httpx.Client(base_url=s.url, headers=replicas.headers, timeout=120)
            for s in replicas.services
        ]

        def send(n: int) -> list[dict]:
            ordered = texts if n % 2 == 0 else texts[::-1]
            body = {
                "messages": [{"role": "user", "content": t, "name": "Gus"} for t in ordered],
                "user_id": "gus",
            }
            response = clients[n % 2].post(ADD, json=body)
            assert response.status_code == 200, response.text
            return response.json()["results"]

        with ThreadPoolExecutor(4) as pool:
            answers = [r for results in pool.map(send, range(4)) for r in results]
        for client in clients:
            client.close()
    assert Counter(a["event"] for a in answers) == {"ADD": 60, "NONE": 180}
    stored = _stored(dsn, "gus")
    assert sorted(t for _, t, _ in stored) == sorted(texts)


def test_a_retry_through_another_replica_replays_and_stores_once(dsn: str, tmp_path: Path):
    with Replicas(tmp_path, dsn, 3) as replicas:
        body = _turn("remember the milk", "ida")
        first = httpx.post(
            replicas.services[0].url + ADD,
            json=body,
            headers={**replicas.headers, "Idempotency-Key": "k-1"},
            timeout=60,
        )
        retry = httpx.post(
            replicas.services[2].url + ADD,
            json=body,
            headers={**replicas.headers, "Idempotency-Key": "k-1"},
            timeout=60,
        )
        assert first.status_code == retry.status_code == 200
        assert retry.headers.get("Idempotent-Replayed") == "true"
        assert retry.json() == first.json()
        # six copies of a new request at once, two through each replica
        other = _turn("buy bread", "ida")

        def send(service: ServiceProcess) -> httpx.Response:
            headers = {**replicas.headers, "Idempotency-Key": "k-2"}
            return httpx.post(service.url + ADD, json=other, headers=headers, timeout=60)

        with ThreadPoolExecutor(6) as pool:
            responses = list(pool.map(send, replicas.services * 2))
        assert {r.status_code for r in responses} == {200}
        assert len({r.json()["results"][0]["id"] for r in responses}) == 1
        assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in responses) == 5
        # a backup of a PostgreSQL store is the database's own: refused, saying so
        refused = httpx.post(
            replicas.services[1].url + "/v1/backups/",
            json={"name": "nightly"},
            headers=replicas.headers,
            timeout=60,
        )
        assert refused.status_code == 409 and "pg_dump" in refused.json()["detail"]
    assert sorted(t for _, t, _ in _stored(dsn, "ida")) == ["buy bread", "remember the milk"]


def test_a_session_ended_through_two_replicas_at_once_is_consolidated_once(
    dsn: str, tmp_path: Path
):
    with Replicas(tmp_path, dsn, 2) as replicas:
        first, second = replicas.services
        statements = ["I live in Hangzhou.", "I prefer green tea.", "My sister is a nurse."]
        for n, text in enumerate(statements):  # journalled through alternating replicas
            service = replicas.services[n % 2]
            journalled = httpx.post(
                f"{service.url}/v1/sessions/s-1/exchanges/",
                json={
                    "user_id": "eve",
                    "messages": [
                        {"role": "user", "content": text},
                        {"role": "assistant", "content": "Noted."},
                    ],
                },
                headers=replicas.headers,
                timeout=60,
            )
            assert journalled.status_code == 200, journalled.text

        def end(service: ServiceProcess) -> dict:
            response = httpx.post(
                f"{service.url}/v1/sessions/s-1/end/",
                json={"user_id": "eve", "wait": True},
                headers=replicas.headers,
                timeout=120,
            )
            assert response.status_code == 200, response.text
            return response.json()

        with ThreadPoolExecutor(2) as pool:
            ended = list(pool.map(end, [first, second]))
    assert sorted(e["exchanges"] for e in ended) == [0, 3]  # one replica did it, the other waited
    assert sorted(t for _, t, _ in _stored(dsn, "eve")) == sorted(statements)


class Load:
    """Writers sending distinct turns round-robin through the replicas; what was
    acknowledged (200 with an id) is recorded, everything else is a failed attempt."""

    def __init__(self, services: list[ServiceProcess], headers: dict[str, str], users: int = 3):
        self.services = services
        self.headers = headers
        self.users = [f"load-{i}" for i in range(users)]
        self.acked: dict[str, tuple[str, str]] = {}  # id -> (user, text)
        self.failed: Counter[str] = Counter()
        self.stop = threading.Event()
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(6)]

    def _run(self, worker: int) -> None:
        with httpx.Client(headers=self.headers, timeout=30) as client:
            while not self.stop.is_set():
                n = next(self._counter)
                user = self.users[n % len(self.users)]
                service = self.services[(n + worker) % len(self.services)]
                text = f"{user} load message {n}"
                try:
                    response = client.post(service.url + ADD, json=_turn(text, user))
                except httpx.TransportError as exc:
                    self.failed[type(exc).__name__] += 1
                    time.sleep(0.05)
                    continue
                if response.status_code != 200:
                    self.failed[str(response.status_code)] += 1
                    time.sleep(0.05)
                    continue
                result = response.json()["results"][0]
                with self._lock:
                    self.acked[result["id"]] = (user, text)

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def wait_for(self, acked: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < acked:
            assert time.monotonic() < deadline, f"only {len(self.acked)} writes acknowledged"
            time.sleep(0.1)

    def check_kept(self, dsn: str) -> None:
        """Every acknowledged write is in the vectors, with its ADD history row."""
        for user in self.users:
            stored = {m: t for m, t, _ in _stored(dsn, user)}
            mine = {m: t for m, (u, t) in self.acked.items() if u == user}
            missing = set(mine) - set(stored)
            assert not missing, f"{len(missing)} acknowledged writes lost"
            assert all(stored[m] == t for m, t in mine.items())
            assert len(set(stored.values())) == len(stored)  # nothing stored twice
        adds = _adds_in_history(dsn, list(self.acked))
        assert set(adds) == set(self.acked) and set(adds.values()) == {1}


def test_a_replica_killed_under_write_load_loses_no_acknowledged_write(dsn: str, tmp_path: Path):
    with Replicas(tmp_path, dsn, 2) as replicas:
        victim = replicas.services[1]
        with Load(replicas.services, replicas.headers) as load:
            load.wait_for(40)
            victim.kill()  # mid-request: some of its writes were in flight
            at_kill = len(load.acked)
            load.wait_for(at_kill + 40)  # the survivor goes on serving
        assert load.failed, "the kill interrupted nothing: the test did not test"
        load.check_kept(dsn)
        victim.start()  # a restarted replica rejoins and serves at once
        response = httpx.post(
            victim.url + ADD, json=_turn("after the kill", "load-0"), headers=replicas.headers
        )
        assert response.status_code == 200, response.text


def test_the_database_restarted_under_load_loses_nothing_and_the_replicas_recover(
    pg_server: PostgresServer, dsn: str, tmp_path: Path
):
    with Replicas(tmp_path, dsn, 2) as replicas:
        with Load(replicas.services, replicas.headers) as load:
            load.wait_for(30)
            pg_server.restart()  # fast shutdown: every connection of every replica is cut
            restarted = len(load.acked)
            load.wait_for(restarted + 30, timeout=180)  # the pools reconnect by themselves
        load.check_kept(dsn)
        for service in replicas.services:
            assert httpx.get(service.url + "/readyz").status_code == 200
            assert service.alive


def _readyz(service: ServiceProcess) -> httpx.Response:
    return httpx.get(service.url + "/readyz", timeout=30)


def _wait_for(predicate, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.5)


def test_a_database_that_is_down_or_refuses_makes_readyz_false_then_recovers(tmp_path: Path):
    with PostgresServer() as pg_server:
        dsn = pg_server.database("down_then_up")
        pg_server.kill()  # down before the service starts: the port refuses
        replicas = Replicas(tmp_path / "down", dsn, 1)
        service = replicas.services[0]
        try:
            service.start(wait=False)
            _wait_for(lambda: _healthz_ok(service))
            # first "not checked yet", then the reason of the first failed attempt
            _wait_for(lambda: "history.postgres" in _readyz(service).json().get("reason", ""))
            not_ready = _readyz(service)
            assert not_ready.status_code == 503
            reason = not_ready.json()["reason"]
            assert "history.postgres" in reason and "refused" in reason, reason
            assert pg_server.password not in reason
            added = httpx.post(service.url + ADD, json=_turn("x", "u"), headers=replicas.headers)
            assert added.status_code == 503  # refused plainly, not a 500
            pg_server.start()  # the database returns; the service needs no restart
            _wait_for(lambda: _readyz(service).status_code == 200)
            added = httpx.post(service.url + ADD, json=_turn("x", "u"), headers=replicas.headers)
            assert added.status_code == 200, added.text
        finally:
            replicas.stop()
        assert pg_server.password not in service.output()

        wrong = dsn.replace(pg_server.password, "Wr0ng-Passw0rd")
        refused = Replicas(tmp_path / "wrong", wrong, 1)
        service = refused.services[0]
        try:
            service.start(wait=False)
            _wait_for(lambda: _healthz_ok(service))
            _wait_for(lambda: "password" in _readyz(service).json().get("reason", ""))
            reason = _readyz(service).json()["reason"]
            assert "password authentication failed" in reason
            assert "Wr0ng-Passw0rd" not in reason and pg_server.password not in reason
        finally:
            refused.stop()
        assert "Wr0ng-Passw0rd" not in service.output()


def _healthz_ok(service: ServiceProcess) -> bool:
    try:
        return httpx.get(service.url + "/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False
