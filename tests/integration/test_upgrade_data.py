"""Memories written by the previous release, served by this one, on every tier.

The previous release is its own code (built from its git tag by
dev/memorystore_dev/previous_release.py) on this checkout's pinned dependencies: between the
two releases the lock only gained packages, so these are the versions its image holds. Each
tier's service writes, changes, deletes and backs up memories; then this checkout's service
takes over the same files and databases as the upgraded pod does (same data directory and
volume, same database, same Qdrant collection) and must serve every memory as it was: the
same records and history, each fact found first by its question, the deleted gone, changes
and deletions of old memories working, and the old backup restoring into a new store.

PostgreSQL's tier rolls its replicas one at a time (RollingUpdate, maxSurge 1), so an old and
a new replica serve together for a while: each must read what the other writes. The other two
tiers are replaced (Recreate): the old process is stopped before the new one starts.

The Kubernetes half of the upgrade (the volumes and keys kept, which pods roll) is
tests/e2e/test_upgrade.py.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Protocol
from unittest import mock

import httpx
import pytest

from memorystore.config import SecretSource, ServiceConfig, load_model
from memorystore.service.ops.runner import ServiceThread
from memorystore.service.portability.backup import restore
from memorystore_dev.postgres import PostgresServer
from memorystore_dev.previous_release import Release, previous_release
from memorystore_dev.qdrant import QdrantServer
from memorystore_dev.replicas import ServiceProcess, Tier, write_config
from support.backups import every

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# Per user: (fact, a question whose best answer among the user's memories is that fact).
Fact = tuple[str, int]  # (user, index in FACTS[user])
FACTS: dict[str, list[tuple[str, str]]] = {
    "ann": [
        ("I keep three beehives on the roof of my house in Lyon", "Where are her bees kept?"),
        ("My daughter plays the cello in a youth orchestra", "What does the child play?"),
        ("I am allergic to penicillin", "Which antibiotics must be avoided?"),
        ("We are flying to Lisbon for our anniversary in May", "Anniversary trip destination"),
    ],
    "bo": [
        ("我每天早上六点去游泳", "他几点去游泳？"),
        ("我的猫叫小白，今年三岁", "猫的名字是什么？"),
        ("我在杭州的一家银行工作", "他在哪里工作？"),
    ],
    "carl": [
        ("Ich fahre jeden Sommer mit dem Fahrrad an die Ostsee", "Wohin fährt er im Sommer Rad?"),
        ("Mein Lieblingsessen ist Käsespätzle", "Was isst er am liebsten?"),
        ("Unsere Wohnung in Leipzig hat einen Balkon zum Park", "Wo liegt die Wohnung?"),
    ],
}
CHANGED = ("ann", 1, "My daughter switched from the cello to the double bass")
ERASED = ("bo", 2)  # deleted by the old release: the new one must not serve it
BACKUP = "before-upgrade"


class Served(Protocol):
    url: str
    api_key: str


class Api:
    """The HTTP calls the test makes, against one service."""

    def __init__(self, service: Served) -> None:
        self.http = httpx.Client(
            base_url=service.url,
            headers={"Authorization": f"Token {service.api_key}"},
            timeout=120,
        )

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        assert response.is_success, f"{method} {path}: {response.status_code} {response.text}"
        return response.json()

    def add(self, user: str, text: str) -> str:
        body = {"messages": [{"role": "user", "content": text}], "user_id": user, "infer": False}
        (result,) = self.call("POST", "/v3/memories/add/", json=body)["results"]
        return str(result["id"])

    def memories(self, user: str) -> dict[str, dict[str, Any]]:
        return every(self.http, user_id=user)

    def history(self, memory_id: str, user: str) -> list[dict[str, Any]]:
        return list(
            self.call("GET", f"/v1/memories/{memory_id}/history/", params={"user_id": user})
        )

    def first(self, question: str, user: str) -> str:
        body = {"query": question, "user_id": user, "top_k": 3}
        results = self.call("POST", "/v3/memories/search/", json=body)["results"]
        assert results, f"{question!r}: nothing found for {user}"
        return str(results[0]["id"])

    def update(self, memory_id: str, user: str, text: str) -> None:
        self.call(
            "PUT", f"/v1/memories/{memory_id}/", params={"user_id": user}, json={"text": text}
        )

    def delete(self, memory_id: str, user: str) -> None:
        self.call("DELETE", f"/v1/memories/{memory_id}/", params={"user_id": user})

    def gone(self, memory_id: str, user: str) -> bool:
        response = self.http.get(f"/v1/memories/{memory_id}/", params={"user_id": user})
        return response.status_code == 404


class Written:
    """What the old release wrote and answered: the ids of the facts and its own reads, and
    which facts are deleted since (by the old release, then by the new one)."""

    def __init__(self) -> None:
        self.ids: dict[Fact, str] = {}
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        self.histories: dict[str, list[dict[str, Any]]] = {}
        self.deleted: set[Fact] = set()

    def write(self, api: Api) -> None:
        for user, facts in FACTS.items():
            for index, (fact, _) in enumerate(facts):
                self.ids[user, index] = api.add(user, fact)
        user, index, text = CHANGED
        api.update(self.ids[user, index], user, text)
        self.delete(api, ERASED)

    def delete(self, api: Api, fact: Fact) -> None:
        api.delete(self.ids[fact], fact[0])
        self.deleted.add(fact)

    def live(self) -> dict[Fact, str]:
        return {fact: memory_id for fact, memory_id in self.ids.items() if fact not in self.deleted}

    def read(self, api: Api) -> None:
        """The old release's own answers, which the new one must give back."""
        for user in FACTS:
            self.records[user] = api.memories(user)
        for (user, _), memory_id in self.live().items():
            self.histories[memory_id] = api.history(memory_id, user)


def assert_serves(api: Api, written: Written, who: str) -> None:
    """`api` serves what the old release wrote and nobody deleted: every record with every
    field it had, the same history, each unchanged fact found first by its question; the
    deleted ones gone."""
    live = written.live()
    live_ids = set(live.values())
    for user, old_records in written.records.items():
        records = api.memories(user)
        expected = {m: old for m, old in old_records.items() if m in live_ids}
        assert records.keys() == expected.keys(), f"{who}: {user}'s memories differ"
        for memory_id, old in expected.items():
            kept = {key: records[memory_id].get(key) for key in old}
            assert kept == old, f"{who}: {memory_id} changed"
    for (user, index), memory_id in live.items():
        assert api.history(memory_id, user) == written.histories[memory_id], f"{who}: {memory_id}"
        if (user, index) != CHANGED[:2]:
            question = FACTS[user][index][1]
            assert api.first(question, user) == memory_id, f"{who}: {question!r}"
    for user, index in written.deleted:
        assert api.gone(written.ids[user, index], user), f"{who}: deleted {user} {index} served"


def assert_writes(api: Api, written: Written) -> None:
    """The new release changes and deletes what the old one wrote, and adds beside it."""
    user = "carl"
    added = api.add(user, "Ich spiele dienstags Schach im Verein")
    assert api.first("Wann spielt er Schach?", user) == added
    old_id = written.ids[user, 1]
    api.update(old_id, user, "Mein Lieblingsessen ist jetzt Sauerbraten")
    events = api.history(old_id, user)
    assert [e["event"] for e in events] == [
        *(e["event"] for e in written.histories[old_id]),
        "UPDATE",
    ]
    assert api.first("Was isst er am liebsten?", user) == old_id
    written.delete(api, (user, 2))
    assert api.gone(written.ids[user, 2], user)
    assert set(api.memories(user)) == {added, old_id, written.ids[user, 0]}


@pytest.fixture(scope="module")
def old() -> Release:
    release = previous_release(log=lambda _: None)
    # the code that runs really is the release's: its package, not this checkout's
    probe = "import memorystore, sys; sys.stdout.write(memorystore.__file__)"
    where = subprocess.run(
        [sys.executable, "-c", probe], env=release.env(), capture_output=True, text=True
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout).is_relative_to(release.site), where.stdout
    return release


def configure(
    tier: Tier, directory: Path, pg: PostgresServer | None, qdrant: QdrantServer | None
) -> Path:
    dsn = pg.database(f"u_{uuid.uuid4().hex[:12]}") if pg is not None else None
    backups = directory / "backups"
    backups.mkdir(parents=True, exist_ok=True)
    extra = {"backup": {"path": str(backups)}}
    return write_config(directory, dsn, tier, qdrant=qdrant, extra=extra)


def this_config(config: Path, data: Path, key: str) -> ServiceConfig:
    """`config` as this checkout reads it, with `data` as its data directory and `key` as
    its service key (a file, as the mounted Secret is)."""
    env = {"MEMORYSTORE_PORT": "0", "MEMORYSTORE_DATA_DIR": str(data), "MEMORYSTORE_API_KEY": key}
    with mock.patch.dict(os.environ, env):
        cfg = load_model(ServiceConfig, config)
    key_file = data.parent / "api-key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    return cfg.model_copy(update={"api_key": SecretSource(file=str(key_file))})


def this_release(config: Path, data: Path, key: str) -> ServiceThread:
    """This checkout's service on what `config` names: the upgraded pod. In this process
    (the app `memorystore serve` runs), so its models load once per test worker."""
    return ServiceThread(this_config(config, data, key))


def assert_side_by_side(old_api: Api, new_api: Api) -> None:
    """An old and a new replica on one database: each reads what the other writes and
    deletes what the other wrote."""
    late = old_api.add("ann", "I started learning Portuguese for the trip")
    assert new_api.first("Which language is she learning?", "ann") == late
    early = new_api.add("bo", "我周末去爬山")
    assert old_api.first("他周末做什么？", "bo") == early
    old_api.delete(early, "bo")
    new_api.delete(late, "ann")
    assert new_api.gone(early, "bo") and old_api.gone(late, "ann")


def upgrade(
    tier: Tier,
    tmp_path: Path,
    old: Release,
    pg: PostgresServer | None = None,
    qdrant: QdrantServer | None = None,
) -> None:
    config = configure(tier, tmp_path / "store", pg, qdrant)
    key = secrets.token_urlsafe(24)
    backs_up = tier != "postgres"  # PostgreSQL's stores are backed up with its own tools
    written = Written()
    before = ServiceProcess(config, config.parent, key, "old", environ=old.env(), data="data")
    try:
        before.start()
        with Api(before) as old_api:
            written.write(old_api)
            written.read(old_api)
            assert_serves(old_api, written, "old")  # the questions find their facts there too
            if backs_up:
                old_api.call("POST", "/v1/backups/", json={"name": BACKUP})
            if tier == "postgres":  # RollingUpdate: a new replica serves beside the old one
                with this_release(config, before.data, key) as new, Api(new) as new_api:
                    assert_serves(new_api, written, "new beside old")
                    assert_side_by_side(old_api, new_api)
    finally:
        before.stop()  # Recreate, or the rollout's last old replica gone
    with this_release(config, before.data, key) as after, Api(after) as new_api:
        assert_serves(new_api, written, "new")
        assert_writes(new_api, written)
    if backs_up:
        restored = configure(tier, tmp_path / "restored", pg, qdrant)
        backup = config.parent / "backups" / BACKUP
        assert_restores(restored, backup, before.data / "backup-signing-key", written)


def assert_restores(config: Path, backup: Path, signing_key: Path, written: Written) -> None:
    """The old release's backup, restored by this one into a new, empty store of the tier;
    what the new release deleted after the backup stays deleted (the erasure ledger beside
    the backups), so the restored store is the backup less that memory."""
    cfg = this_config(config, config.parent / "data", secrets.token_urlsafe(24))
    summary = restore(backup, cfg, key_file=signing_key)  # what `memorystore restore` runs
    assert summary["restored"] is True, summary
    assert summary["memories"] == len(written.live()), summary
    assert summary["erased"]["memories"] == 1, summary
    with ServiceThread(cfg) as service, Api(service) as api:
        assert_serves(api, written, "restored")


def test_embedded(tmp_path: Path, old: Release) -> None:
    upgrade("embedded", tmp_path, old)


def test_managed_qdrant(tmp_path: Path, old: Release, qdrant_server: QdrantServer) -> None:
    upgrade("managed", tmp_path, old, qdrant=qdrant_server)


def test_postgres_replicas_of_both_releases(
    tmp_path: Path, old: Release, pg_server: PostgresServer
) -> None:
    upgrade("postgres", tmp_path, old, pg=pg_server)
