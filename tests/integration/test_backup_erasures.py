"""Restoring an old backup never brings an erased user back.

Back up, erase a user and one memory of another through the API, and restore the old
backup into a fresh store: the erased user's memories, journalled exchanges and history are
not restored, the erased memory is not either (its history answers 404), the turn written
after it is restored without the erased text as its context, and no file under the
restored data directory holds any erased text (searched byte by byte, in every encoding,
with a text that was not erased as the control). Each place the erasures are found is
checked on its own: the backup's own ledger, the target's beside it, the store's.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from memorystore.service.engine.core import MemoryEngine
from memorystore.service.ops.runner import ServiceThread
from memorystore.service.portability import backup
from memorystore.service.retrieval.indexing import PREV_KEY, stored_index_texts
from memorystore.service.state.erasure_ledger import target_ledger_path
from support.backups import client, read_lines, signing_key_file, store_config
from support.erasure_probe import marker, on_disk

pytestmark = pytest.mark.timeout(900)


@dataclass
class Erased:
    """A store backed up (b0), then erased, written to and backed up again (b1)."""

    tmp: Path
    target: Path
    source_dir: Path
    bob: list[str]  # bob's texts' markers (bob is erased)
    vault: str  # the marker of alice's memory erased by id
    vault_id: str
    reply_id: str  # the turn written just after it
    kept: str  # alice's marker nobody erased
    later: str  # bob's marker written after his erasure


def _add(http: httpx.Client, user: str, *messages: tuple[str, str]) -> list[str]:
    body = {
        "messages": [{"role": role, "content": text} for role, text in messages],
        "user_id": user,
        "infer": False,
    }
    answer = http.post("/v1/memories/", json=body)
    assert answer.status_code == 200, answer.text
    return [r["id"] for r in answer.json()["results"]]


@pytest.fixture(scope="module")
def erased(tmp_path_factory: pytest.TempPathFactory) -> Erased:
    rng = random.Random(20261202)
    tmp = tmp_path_factory.mktemp("erased")
    target = tmp / "backups"
    target.mkdir()
    bob = [marker(rng), marker(rng, accented=True), marker(rng)]
    vault, kept, later = marker(rng, accented=True), marker(rng), marker(rng)
    cfg = store_config(tmp, "source", target)
    with ServiceThread(cfg) as svc, client(svc) as http:
        _add(http, "bob", ("user", f"My locker code is {bob[0]}."))
        _add(http, "bob", ("user", f"I named my boat {bob[1]}."))
        exchange = {"messages": [{"role": "user", "content": f"Call me {bob[2]}."}]}
        journalled = http.post("/v1/sessions/s1/exchanges/", json={**exchange, "user_id": "bob"})
        assert journalled.status_code == 200, journalled.text
        _add(http, "alice", ("user", f"My cat is called {kept}."))
        vault_id, reply_id = _add(
            http,
            "alice",
            ("user", f"The vault word is {vault}."),
            ("assistant", "Noted, I will keep it to myself."),
        )
        assert http.post("/v1/backups/", json={"name": "b0"}).status_code == 200
        # the erasures, after the backup: a whole user, and one memory of another
        assert http.delete("/v1/memories/", params={"user_id": "bob"}).status_code == 200
        assert http.delete(f"/v1/memories/{vault_id}/").status_code == 200
        _add(http, "bob", ("user", f"Starting over, my new hobby is {later}."))
        assert http.post("/v1/backups/", json={"name": "b1"}).status_code == 200
    return Erased(tmp, target, Path(cfg.data_dir), bob, vault, vault_id, reply_id, kept, later)


def _restore(e: Erased, source: Path, name: str) -> Path:
    cfg = store_config(e.tmp, name)
    result = backup.restore(source, cfg, key_file=signing_key_file(e.tmp))
    assert result["restored"] is True
    return Path(cfg.data_dir)


@pytest.fixture
def served(erased: Erased) -> Iterator[tuple[Erased, Path, httpx.Client]]:
    data = _restore(erased, erased.target / "b0", "restored-b0")
    with ServiceThread(store_config(erased.tmp, "restored-b0")) as svc, client(svc) as http:
        yield erased, data, http


def _tenant(backup_dir: Path) -> str:
    return str(json.loads((backup_dir / "manifest.json").read_text())["tenant"])


def beside(erased: Erased) -> Path:
    """The target's ledger file of the store that took the backups."""
    return target_ledger_path(erased.target, _tenant(erased.target / "b0"))


def test_another_store_sharing_the_target_never_erases_this_ones_users(
    erased: Erased, tmp_path: Path
) -> None:
    """Two stores backing up into one target: the other store erases a user of the same
    name (alice); restoring this store's backup keeps this store's alice."""
    other = store_config(erased.tmp, "other-store", erased.target)
    other.tenant = "other-tenant"
    with ServiceThread(other) as svc, client(svc) as http:
        _add(http, "alice", ("user", "Another store's alice likes tea."))
        assert http.delete("/v1/memories/", params={"user_id": "alice"}).status_code == 200
    assert target_ledger_path(erased.target, "other-tenant").read_text().strip()
    data = _restore(erased, erased.target / "b0", "shared-target")
    found = on_disk(data, [erased.kept])
    assert found.pop(erased.kept), "this store's alice is restored"


def test_the_backups_carry_the_ledger_and_the_target_keeps_it(erased: Erased) -> None:
    assert (erased.target / "b0" / backup.ERASURES).read_text() == ""
    lines = (erased.target / "b1" / backup.ERASURES).read_text().splitlines()
    assert len(lines) == 2, lines
    kept = beside(erased).read_text().splitlines()
    assert kept == lines
    for text in (*erased.bob, erased.vault):  # a ledger holds no text
        assert text not in "".join(lines)
    # b0's reply turn follows the erased one: its vector was embedded with the erased line
    # as its context, so a restore must embed it again without it
    records = [json.loads(line) for line in read_lines(erased.target / "b0")]
    (reply,) = [r["payload"] for r in records if r["id"] == erased.reply_id]
    assert reply["prev_id"] == erased.vault_id


def test_the_turn_after_an_erased_one_is_embedded_again_without_it(erased: Erased) -> None:
    cfg = store_config(erased.tmp, "unchained")
    backup.restore(erased.target / "b0", cfg, key_file=signing_key_file(erased.tmp))
    engine = MemoryEngine(cfg)
    try:
        points = {point: (vector, payload) for point, vector, payload in engine.store.points(100)}
        vector, payload = points[erased.reply_id]
        assert PREV_KEY not in payload
        alone = stored_index_texts(payload, cfg.retrieval, lambda _: None)
        fresh = np.asarray(engine.memory.embedding_model.embed(alone.dense, "add"))
    finally:
        engine.close()
    dims = cfg.embedder.vector_size()
    with open(erased.target / "b0" / backup.VECTORS, "rb") as vectors:
        rows = np.frombuffer(vectors.read(), dtype="<f4").reshape(-1, dims)
    old = rows[[r["id"] for r in records_of(erased)].index(erased.reply_id)]
    restored = np.asarray(vector)
    assert np.allclose(restored, fresh, atol=1e-4), "embedded again, from its own line"
    assert not np.allclose(restored, old, atol=1e-3), "not the vector made with the erased line"


def records_of(erased: Erased) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_lines(erased.target / "b0")]


def test_an_old_backup_restored_does_not_bring_the_erased_back(
    served: tuple[Erased, Path, httpx.Client],
) -> None:
    e, data, http = served
    assert http.post("/v3/memories/", json={"user_id": "bob"}).json()["count"] == 0
    listed = http.post("/v3/memories/", json={"user_id": "alice"}).json()["results"]
    texts = {m["id"]: m["memory"] for m in listed}
    assert e.vault_id not in texts and e.reply_id in texts
    assert any(e.kept in t for t in texts.values())
    assert http.get(f"/v1/memories/{e.vault_id}/history/").status_code == 404
    # bob's journalled exchange is gone too: ending his session writes nothing
    ended = http.post("/v1/sessions/s1/end/", json={"user_id": "bob", "wait": True})
    assert ended.status_code == 200 and ended.json()["exchanges"] == 0, ended.text
    for query in (*e.bob, e.vault):
        hits = http.post(
            "/v3/memories/search/", json={"query": query, "user_id": "alice", "top_k": 10}
        ).json()["results"]
        assert all(query not in h["memory"] for h in hits)
    found = on_disk(data, [*e.bob, e.vault, e.kept])
    assert found.pop(e.kept), "the control: a text not erased is found where it is kept"
    assert found == {}, f"erased text found on disk: {found}"


def test_a_later_backup_keeps_what_was_written_after_the_erasure(erased: Erased) -> None:
    data = _restore(erased, erased.target / "b1", "restored-b1")
    with ServiceThread(store_config(erased.tmp, "restored-b1")) as svc, client(svc) as http:
        bob = http.post("/v3/memories/", json={"user_id": "bob"}).json()["results"]
        assert [m["memory"] for m in bob] == [f"Starting over, my new hobby is {erased.later}."]
    found = on_disk(data, [*erased.bob, erased.vault, erased.later])
    assert set(found) == {erased.later}, found


@pytest.mark.parametrize("where", ["the backup's own", "beside the backup", "the store's own"])
def test_each_ledger_alone_is_enough(erased: Erased, tmp_path: Path, where: str) -> None:
    """b0 holds no erasure itself; copied away from its target it is restored with only one
    of the places a restore looks in holding the erasures."""
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    source = Path(shutil.copytree(erased.target / "b0", alone / "b0"))
    cfg = store_config(erased.tmp, f"alone-{where.replace(' ', '-')}")
    data = Path(cfg.data_dir)
    if where == "the backup's own":  # b1's ledger, as b0 would carry it had it been later
        source = Path(shutil.copytree(erased.target / "b1", alone / "b1"))
    elif where == "beside the backup":
        shutil.copy(beside(erased), target_ledger_path(alone, _tenant(source)))
    else:  # a store that erased bob before: its ledger, and nothing else in it
        data.mkdir(parents=True)
        shutil.copy(erased.source_dir / "erasures.db", data / "erasures.db")
    backup.restore(source, cfg, key_file=signing_key_file(erased.tmp))
    found = on_disk(data, [*erased.bob, erased.vault, erased.kept])
    assert found.pop(erased.kept)
    assert found == {}, f"{where}: erased text found on disk: {found}"


def test_without_any_ledger_an_old_backup_is_restored_whole(erased: Erased, tmp_path: Path) -> None:
    """The limit, shown: a backup copied away from its target and restored into a store that
    never erased anything has no way to know. (Keep backups with their target's
    erasures.jsonl; docs/operations/backups.md says so.)"""
    source = Path(shutil.copytree(erased.target / "b0", tmp_path / "isolated" / "b0"))
    cfg = store_config(erased.tmp, "no-ledger")
    result = backup.restore(source, cfg, key_file=signing_key_file(erased.tmp))
    assert result["erased"] == {"memories": 0, "history_events": 0, "exchanges": 0}
    assert erased.bob[0] in on_disk(Path(cfg.data_dir), [erased.bob[0]])
