"""Secrets rotated while the real service runs: no restart, nothing shown (issue 28, point 6).

Each secret is a file of a volume laid out and swapped as kubelet's atomic writer does it
(support/kubelet_volume.py), and the service re-reads it (ops/secret_files.py) with its own
polling thread; how long that took is printed. What each holder does with a new value is
observed where it matters:

- the PostgreSQL DSNs: on the harness's real PostgreSQL, with a login role whose password
  is changed (ALTER ROLE) and whose sessions are ended (pg_terminate_backend);
- the embedder's and the extraction model's keys: on the scripted OpenAI-compatible
  stand-in (support/scripted_models.py), which refuses any key it was not told to accept;
- the Qdrant server's key: on a real Qdrant server, through a proxy that records the
  `api-key` header of each call (support/qdrant_recorder.py: the server does not report it).

Every log record of the run and every /readyz answer is searched for every password or key
used, old and new.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from memorystore.config import (
    ConfigError,
    PostgresConnection,
    PostgresVectors,
    SecretSource,
    ServerQdrant,
    ServiceEmbedder,
    ServiceHistory,
    ServiceLLM,
    ServiceVectorStore,
)
from memorystore.service.ops.runner import ServiceThread, UvicornThread, embedded_config
from memorystore.service.ops.secret_files import POLL_SECONDS
from memorystore.service.state.postgres import Database, DatabaseUnavailable
from memorystore_dev.postgres import PostgresServer
from memorystore_dev.qdrant import QdrantServer
from support.kubelet_volume import KubeletVolume
from support.qdrant_recorder import KeyRecorder
from support.scripted_models import build_app
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)


def waited(check: Callable[[], object], timeout: float) -> float:
    """The seconds `check` took to come true (support/waiting.py's wait_for)."""
    start = time.monotonic()
    wait_for(check, timeout=timeout, every=0.1)
    return time.monotonic() - start


def reloads(svc: ServiceThread) -> int:
    return int(svc.app.state.services.secret_files.reloads)


def shown(caplog: pytest.LogCaptureFixture, answers: list[str]) -> str:
    """Everything the run showed: every log record (message and exception) and answer."""
    lines = [record.getMessage() for record in caplog.records]
    lines += [record.exc_text or "" for record in caplog.records]
    return "\n".join([*lines, *answers])


def add(svc: ServiceThread, text: str, user: str = "alice", infer: bool = False) -> httpx.Response:
    return httpx.post(
        f"{svc.url}/v3/memories/add/",
        json={"messages": [{"role": "user", "content": text}], "user_id": user, "infer": infer},
        headers={"Authorization": f"Token {svc.api_key}"},
        timeout=60,
    )


# --- the PostgreSQL DSNs -------------------------------------------------------------------


class Role:
    """A login role owning two fresh databases (state, vectors), and its password."""

    def __init__(self, pg: PostgresServer) -> None:
        self.pg = pg
        self.name = f"rot_{uuid.uuid4().hex[:10]}"
        self.password = self.new_password()
        pg.psql(f"CREATE ROLE {self.name} LOGIN PASSWORD '{self.password}'")
        self.databases = {kind: f"{self.name}_{kind}" for kind in ("state", "vectors")}
        for database in self.databases.values():
            pg.psql(f"CREATE DATABASE {database} OWNER {self.name}")
            pg.psql("CREATE EXTENSION IF NOT EXISTS vector", database=database)
            pg.psql("CREATE EXTENSION IF NOT EXISTS pg_trgm", database=database)

    @staticmethod
    def new_password() -> str:
        return f"pw-{secrets.token_hex(12)}"

    def dsn(self, kind: str, password: str | None = None) -> str:
        return (
            f"postgresql://{self.name}:{password or self.password}@127.0.0.1:{self.pg.port}/"
            f"{self.databases[kind]}"
        )

    def change_password(self) -> str:
        """ALTER ROLE: new logins need the new password; open sessions carry on."""
        self.password = self.new_password()
        self.pg.psql(f"ALTER ROLE {self.name} PASSWORD '{self.password}'")
        return self.password

    def end_sessions(self) -> int:
        """pg_terminate_backend on every session of the role; how many there were."""
        with psycopg.connect(self.pg.dsn, autocommit=True) as db:
            rows = db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (self.name,),
            ).fetchall()
        return len(rows)

    def sessions(self) -> int:
        with psycopg.connect(self.pg.dsn) as db:
            row = db.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (self.name,)
            ).fetchone()
        return int(row[0]) if row else 0

    def memories(self) -> list[str]:
        with psycopg.connect(self.dsn("vectors")) as db:
            rows = db.execute(
                "SELECT payload->>'data' FROM memorystore_vectors_memories"
            ).fetchall()
        return sorted(str(text) for (text,) in rows)


@pytest.fixture
def role(pg_server: PostgresServer) -> Role:
    return Role(pg_server)


def test_a_rotated_database_password_reaches_new_connections_without_a_restart(
    role: Role, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    passwords = [role.password]
    volumes = {kind: KubeletVolume(tmp_path / f"{kind}-dsn") for kind in ("state", "vectors")}

    def mount(password: str) -> None:
        for kind, volume in volumes.items():
            volume.update({"dsn": role.dsn(kind, password)})

    def connection(kind: str) -> PostgresConnection:
        source = SecretSource(file=str(volumes[kind].path("dsn")))
        return PostgresConnection(dsn=source, connect_timeout_seconds=1)

    mount(role.password)
    cfg = embedded_config(
        tmp_path / "data",
        history=ServiceHistory(postgres=connection("state")),
        vector_store=ServiceVectorStore(postgres=PostgresVectors(database=connection("vectors"))),
    )
    answers: list[str] = []

    def ready() -> bool:
        answer = httpx.get(f"{svc.url}/readyz", timeout=30)
        answers.append(answer.text)
        return answer.status_code == 200

    with ServiceThread(cfg) as svc:
        assert svc.app.state.services.secret_files.fields == [
            "history.postgres.dsn",
            "vectorStore.postgres.database.dsn",
        ]
        assert add(svc, "written with the first password").status_code == 200

        # 1. the password changes in the database first: the open connections carry on
        passwords.append(role.change_password())
        assert add(svc, "written on the connections already open").status_code == 200
        # then in the Secret; the service takes it without dropping a connection
        done = reloads(svc) + 2
        mount(role.password)
        took = waited(lambda: reloads(svc) >= done, 4 * POLL_SECONDS)
        print(f"\nDSN files re-read {took:.1f} s after kubelet's swap (poll {POLL_SECONDS} s)")
        assert role.end_sessions() > 0, "the service had sessions open"
        assert add(svc, "written on new connections, new password").status_code == 200

        # 2. the database refuses the password the service holds until the Secret catches up
        passwords.append(role.change_password())
        role.end_sessions()
        waited(lambda: not ready(), 30)
        refused = add(svc, "not written: the login is refused")
        answers.append(refused.text)
        assert refused.status_code == 503, refused.text
        assert "password authentication failed" in refused.text, refused.text
        mount(role.password)
        took = waited(ready, 30)
        print(f"service ready again {took:.1f} s after the DSN files were swapped")
        assert add(svc, "written after the Secret caught up").status_code == 200
        assert role.sessions() > 0
    assert role.memories() == [
        "written after the Secret caught up",
        "written on new connections, new password",
        "written on the connections already open",
        "written with the first password",
    ]
    everything = shown(caplog, answers)
    assert "history.postgres.dsn: the secret in" in everything, "the re-read is logged"
    for password in passwords:
        assert password not in everything, "a password was shown"


def test_a_new_dsn_naming_another_database_is_refused_and_the_old_one_kept(
    role: Role, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    database = Database(role.dsn("state"), field="history.postgres")
    try:
        assert database.execute("SELECT current_database()") == [(role.databases["state"],)]
        with pytest.raises(ConfigError, match="names another server or database") as refused:
            database.use_dsn(role.dsn("vectors"))
        assert role.password not in str(refused.value)
        with pytest.raises(ConfigError, match="not a PostgreSQL connection string") as refused:
            database.use_dsn(f"host=x password={role.password} port='")
        assert role.password not in str(refused.value)
        database.use_dsn(role.dsn("state"))  # the same database: taken
        assert database.execute("SELECT current_database()") == [(role.databases["state"],)]
    finally:
        database.close()


def test_readyz_names_a_refused_login_without_the_old_or_new_password(role: Role):
    """A Database whose DSN was rotated still hides the password it was started with."""
    old = role.password
    database = Database(role.dsn("state"), field="history.postgres", connect_timeout_seconds=1)
    try:
        database.check()
        new = role.change_password()
        database.use_dsn(role.dsn("state", old + "-stale"))  # what a stale Secret would give
        role.end_sessions()
        with pytest.raises(DatabaseUnavailable, match="password authentication failed") as failed:
            database.check()
        reason = str(failed.value)
        for password in (old, new, old + "-stale"):
            assert password not in reason
        database.use_dsn(role.dsn("state", new))
        took = waited(lambda: answers(database), 30)
        print(f"\na pool that was failing to log in connected {took:.1f} s after use_dsn")
    finally:
        database.close()


def answers(database: Database) -> bool:
    try:
        database.check()
    except DatabaseUnavailable:
        return False
    return True


# --- the embedder's and the extraction model's API keys ------------------------------------


def test_rotated_model_keys_are_sent_with_the_next_embedding_and_extraction(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    keys = {"embedder": "sk-emb-" + secrets.token_hex(8), "llm": "sk-llm-" + secrets.token_hex(8)}
    used = set(keys.values())
    accepted = set(keys.values())  # what the provider accepts; changed by a rotation
    calls: list[dict] = []
    volumes = {name: KubeletVolume(tmp_path / f"{name}-api-key") for name in keys}
    for name, volume in volumes.items():
        volume.update({"api-key": keys[name]})

    def key_file(name: str) -> SecretSource:
        return SecretSource(file=str(volumes[name].path("api-key")))

    with UvicornThread(build_app(calls, keys=accepted)) as models:
        base = f"{models.url}/v1"
        embedder = ServiceEmbedder(
            provider="openai",
            model="use",
            dimensions=512,
            base_url=base,
            api_key=key_file("embedder"),
        )
        llm = ServiceLLM(
            provider="dashscope", model="scripted-1", base_url=base, api_key=key_file("llm")
        )
        cfg = embedded_config(tmp_path / "data", embedder=embedder, llm=llm)
        with ServiceThread(cfg) as svc:
            assert svc.app.state.services.secret_files.fields == ["embedder.apiKey", "llm.apiKey"]
            first = add(svc, "I live in Hangzhou", infer=True)
            assert first.status_code == 200, first.text
            assert {r["memory"] for r in first.json()["results"]} >= {"Lives in Hangzhou"}

            # the provider issues new keys and revokes the old ones; the Secrets follow
            rotated = {name: f"{key}-rotated" for name, key in keys.items()}
            used |= set(rotated.values())
            accepted.clear()
            accepted.update(rotated.values())
            done = reloads(svc) + 2
            for name, volume in volumes.items():
                volume.update({"api-key": rotated[name]})
            took = waited(lambda: reloads(svc) >= done, 4 * POLL_SECONDS)
            print(f"\nmodel key files re-read {took:.1f} s after kubelet's swap")
            since = len(calls)
            second = add(svc, "I prefer dark mode for charts", user="bob", infer=True)
            assert second.status_code == 200, second.text
            assert [r["memory"] for r in second.json()["results"]] == [
                "Prefers dark mode for charts"
            ]
    sent = {(call["path"], call["auth"]) for call in calls[since:]}
    assert sent == {
        ("/v1/embeddings", f"Bearer {rotated['embedder']}"),
        ("/v1/chat/completions", f"Bearer {rotated['llm']}"),
    }
    everything = shown(caplog, [first.text, second.text])
    assert "embedder.apiKey: the secret in" in everything
    for key in used:
        assert key not in everything


# --- the Qdrant server's API key -----------------------------------------------------------


@pytest.fixture
def qdrant(qdrant_server: QdrantServer) -> Iterator[KeyRecorder]:
    with KeyRecorder(qdrant_server) as recorder:
        yield recorder


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_a_rotated_qdrant_key_is_sent_with_the_next_call(
    qdrant: KeyRecorder, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    old, new = "qk-" + secrets.token_hex(8), "qk-" + secrets.token_hex(8)
    volume = KubeletVolume(tmp_path / "qdrant-api-key")
    volume.update({"api-key": old})
    server = ServerQdrant(url=qdrant.url, api_key=SecretSource(file=str(volume.path("api-key"))))
    cfg = embedded_config(tmp_path / "data", vector_store=ServiceVectorStore(server=server))
    answers = []
    with ServiceThread(cfg) as svc:
        assert svc.app.state.services.secret_files.fields == ["vectorStore.server.apiKey"]
        answers.append(httpx.get(f"{svc.url}/readyz").text)
        assert set(qdrant.keys()) == {old}, "every call so far with the key it started with"
        done = reloads(svc) + 1
        volume.update({"api-key": new})
        took = waited(lambda: reloads(svc) >= done, 4 * POLL_SECONDS)
        print(f"\nQdrant key file re-read {took:.1f} s after kubelet's swap")
        since = len(qdrant.calls)
        ready = httpx.get(f"{svc.url}/readyz")
        answers.append(ready.text)
        assert ready.status_code == 200, ready.text
    counts = [c.api_key for c in qdrant.calls[since:] if c.path.endswith("/points/count")]
    assert counts and set(counts) == {new}, counts
    everything = shown(caplog, answers)
    assert "vectorStore.server.apiKey: the secret in" in everything
    assert old not in everything and new not in everything
