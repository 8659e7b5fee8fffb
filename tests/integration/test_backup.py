"""Backups of a serving store and restores into new stores: real service, engine and SQLite.

A backup taken while writes keep arriving is consistent (every memory's history is in it,
and nothing in it lacks its memory); restored into a new store by the real
`memorystore restore` command (verifying the manifest's signature with the backup key), the
store answers the same searches with the same memories, scores, history and retired state.
Damaged or mismatched backups and non-empty targets are refused before anything is written;
a missing or full target fails the backup and leaves the store serving as it was. Tampered
backups: test_backup_tampering.py; races, crashes and links: test_backup_races.py; the
erasure ledger: test_backup_erasures.py.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.config import ServiceConfig, ServiceEmbedder
from memorystore.service.ops.runner import ServiceThread
from memorystore.service.portability import backup
from memorystore.service.portability.backup import signing
from support.backups import answers as _answers
from support.backups import backed_up, reseal, restore_cli, signing_key_file
from support.backups import client as _client
from support.backups import fill as _fill
from support.backups import store_config as _config
from support.backups import write_config as _write_config

pytestmark = pytest.mark.timeout(600)


def _restore_cli(
    config: Path, source: Path, *extra: str, key: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return restore_cli(config, source, key or signing_key_file(config.parent), *extra)


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "backups"
    path.mkdir()
    return path


@pytest.fixture
def source(tmp_path: Path, target: Path) -> Iterator[tuple[ServiceThread, httpx.Client]]:
    with ServiceThread(_config(tmp_path, "source", target)) as svc, _client(svc) as http:
        _fill(http)
        yield svc, http


def test_backup_while_writing_is_consistent_and_restores_the_same_answers(
    tmp_path: Path, target: Path, source: tuple[ServiceThread, httpx.Client]
) -> None:
    svc, http = source
    before = _answers(http)
    # writes keep arriving during the backup, through their own connection
    stop, acknowledged = threading.Event(), []

    def writer() -> None:
        with _client(svc) as own:
            n = 0
            while not stop.is_set():
                body = {
                    "messages": [{"role": "user", "content": f"Note number {n} for the log."}],
                    "user_id": "dave",
                    "infer": False,
                }
                response = own.post("/v1/memories/", json=body)
                assert response.status_code == 200, response.text
                acknowledged.append(response.json()["results"][0]["id"])
                n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(acknowledged) < 5:
            threading.Event().wait(0.05)
        response = http.post("/v1/backups/", json={"name": "nightly-1"})
    finally:
        stop.set()
        thread.join()
    assert response.status_code == 200, response.text
    manifest = response.json()
    assert manifest["name"] == "nightly-1" and manifest["format"] == backup.FORMAT
    assert http.get("/v1/backups/nightly-1/").json()["memories"] == manifest["memories"]
    assert not list(target.glob(".*")), "no partial directory is left"

    # consistent: the memories and the history in the backup describe the same writes
    with gzip.open(target / "nightly-1" / backup.MEMORIES, "rt") as lines:
        ids = {json.loads(line)["id"] for line in lines}
    history = sqlite3.connect(target / "nightly-1" / backup.HISTORY)
    added = {row[0] for row in history.execute("SELECT memory_id FROM history")}
    assert ids == added, "every memory has its history and every history row its memory"
    assert manifest["memories"] == len(ids)
    assert (
        manifest["history_events"] == history.execute("SELECT count(*) FROM history").fetchone()[0]
    )
    history.close()
    in_backup = [i for i in acknowledged if i in ids]
    assert in_backup == acknowledged[: len(in_backup)], "the backup holds a prefix of the writes"
    total = http.post("/v3/memories/", json={"user_id": "dave"}).json()["count"]
    assert total == len(acknowledged), "no write was lost while the backup ran"

    # restore into a new store with the real command, then serve it
    restored_cfg = _config(tmp_path, "restored")
    config_file = _write_config(restored_cfg, tmp_path / "restored.yaml")
    done = _restore_cli(config_file, target / "nightly-1")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    key_id = signing.key_id(signing_key_file(tmp_path).read_text().strip().encode())
    assert summary == {
        "name": "nightly-1",
        "memories": manifest["memories"],
        "history_events": manifest["history_events"],
        "restored": True,
        "signature": f"signed, verified with key id {key_id}",
        "erased": {"memories": 0, "history_events": 0, "exchanges": 0},
    }
    again = _restore_cli(config_file, target / "nightly-1")  # an init container re-run
    assert again.returncode == 0 and json.loads(again.stdout.strip())["restored"] is False

    with ServiceThread(restored_cfg) as svc2, _client(svc2) as http2:
        after = _answers(http2)
        assert after["search"] == before["search"]
        assert after["list"] == before["list"]
        assert after["history"] == before["history"]
        dave = http2.post("/v3/memories/", json={"user_id": "dave"}).json()["count"]
        assert dave == len(in_backup)
        # the pending session exchange came along and still consolidates
        ended = http2.post("/v1/sessions/walk/end/", json={"user_id": "carol", "wait": True})
        assert ended.status_code == 200 and ended.json()["exchanges"] == 1, ended.text
        recalled = http2.post("/v1/recall/", json={"query": "dog", "user_id": "carol"}).json()
        assert "Biscuit" in recalled["context"]


def test_a_restore_into_a_store_that_holds_memories_is_refused(
    tmp_path: Path, target: Path, source: tuple[ServiceThread, httpx.Client]
) -> None:
    _, http = source
    assert http.post("/v1/backups/", json={"name": "b1"}).status_code == 200
    busy_cfg = _config(tmp_path, "busy")
    with ServiceThread(busy_cfg) as svc, _client(svc) as other:
        body = {"messages": [{"role": "user", "content": "Keep me."}], "user_id": "x"}
        other.post("/v1/memories/", json={**body, "infer": False})
    done = _restore_cli(_write_config(busy_cfg, tmp_path / "busy.yaml"), target / "b1")
    assert done.returncode == 2 and "not empty" in done.stderr, done.stderr
    with ServiceThread(busy_cfg) as svc, _client(svc) as other:
        rows = other.post("/v3/memories/", json={"user_id": "x"}).json()
        assert [r["memory"] for r in rows["results"]] == ["Keep me."]
        assert other.post("/v3/memories/", json={"user_id": "alice"}).json()["count"] == 0


@pytest.fixture
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished backup (made once per test; the damage tests copy it)."""
    return backed_up(tmp_path_factory.mktemp("made"))


def _refused(tmp: Path, backup_dir: Path, cfg: ServiceConfig | None = None, **options: Any) -> str:
    """Why `backup_dir` is refused (options: restore's key_file, trust_unsigned); nothing
    may have been written to the target store."""
    cfg = cfg or _config(tmp, "fresh")
    with pytest.raises(backup.BackupError) as caught:
        backup.restore(backup_dir, cfg, **options)
    assert not Path(cfg.data_dir).exists(), "nothing was written before the refusal"
    return str(caught.value)


def test_damaged_or_mismatched_backups_are_refused_before_writing(
    tmp_path: Path, made: Path
) -> None:
    key = signing_key_file(made.parent.parent)

    def copy(name: str) -> Path:
        return Path(shutil.copytree(made, tmp_path / name))

    cut = copy("cut")
    data = (cut / backup.VECTORS).read_bytes()
    (cut / backup.VECTORS).write_bytes(data[:-100])
    assert "checksum" in _refused(tmp_path, cut, key_file=key)

    missing = copy("missing")
    (missing / backup.HISTORY).unlink()
    assert "history.db is missing" in _refused(tmp_path, missing, key_file=key)

    lying = copy("lying")  # signed by the right key, but the manifest's count is wrong
    manifest = json.loads((lying / backup.MANIFEST).read_text())
    manifest["memories"] += 1
    (lying / backup.MANIFEST).write_text(json.dumps(manifest))
    reseal(lying, key)
    assert "vectors.f32 holds" in _refused(tmp_path, lying, key_file=key)

    edited = copy("edited")  # still valid JSON, a harmless-looking field changed
    manifest = json.loads((edited / backup.MANIFEST).read_text())
    manifest["tenant"] = "someone-else"
    (edited / backup.MANIFEST).write_text(json.dumps(manifest))
    assert "manifest.json does not match its signature" in _refused(tmp_path, edited, key_file=key)

    partial = copy("partial")
    (partial / backup.MANIFEST).unlink()
    assert "no manifest.json" in _refused(tmp_path, partial, key_file=key)

    other = _config(tmp_path, "other-embedder", embedder=ServiceEmbedder(provider="use"))
    message = _refused(tmp_path, made, other, key_file=key)
    assert "embedder" in message and "'dimensions': 384" in message


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    file=st.sampled_from([*backup.FILES, backup.MANIFEST, backup.SIGNATURE]),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    flip=st.integers(min_value=1, max_value=255),
)
def test_any_flipped_byte_is_refused(
    tmp_path: Path, made: Path, file: str, where: float, flip: int
) -> None:
    work = tmp_path / "flipped"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(made, work)
    raw = bytearray((work / file).read_bytes())
    if raw:
        at = int(where * len(raw))
        raw[at] ^= flip
    else:  # an empty file (no erasure yet): one byte added
        raw.append(flip)
    (work / file).write_bytes(bytes(raw))
    cfg = _config(tmp_path, "never-written")
    with pytest.raises(backup.BackupError):
        backup.restore(work, cfg, key_file=signing_key_file(made.parent.parent))
    assert not Path(cfg.data_dir).exists()


def test_a_missing_target_fails_the_backup_and_the_store_keeps_serving(tmp_path: Path) -> None:
    gone = tmp_path / "not-mounted"
    with ServiceThread(_config(tmp_path, "store", gone)) as svc, _client(svc) as http:
        _fill(http)
        count = http.post("/v3/memories/", json={"user_id": "alice"}).json()["count"]
        response = http.post("/v1/backups/", json={"name": "b"})
        assert response.status_code == 503 and str(gone) in response.json()["detail"]
        assert not gone.exists()
        assert http.post("/v3/memories/", json={"user_id": "alice"}).json()["count"] == count
        body = {"messages": [{"role": "user", "content": "Still writable."}], "user_id": "z"}
        assert http.post("/v1/memories/", json={**body, "infer": False}).status_code == 200
        metrics = http.get("/metrics").text
        assert 'memorystore_backups_total{outcome="failed"} 1.0' in metrics
        assert "memorystore_backup_last_success_timestamp_seconds 0.0" in metrics  # never
    with ServiceThread(_config(tmp_path, "no-target")) as svc, _client(svc) as http:
        response = http.post("/v1/backups/", json={"name": "b"})
        assert response.status_code == 409 and "backup.path" in response.json()["detail"]
        metrics = http.get("/metrics").text
        assert 'memorystore_backups_total{outcome="refused"} 1.0' in metrics
        assert 'outcome="failed"' not in metrics


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_a_full_target_fails_the_backup_cleanly(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], check=True)
    try:
        with ServiceThread(_config(tmp_path, "store", small)) as svc, _client(svc) as http:
            _fill(http)
            count = http.post("/v3/memories/", json={"user_id": "alice"}).json()["count"]
            response = http.post("/v1/backups/", json={"name": "too-big"})
            assert response.status_code == 507, response.text
            assert "is full" in response.json()["detail"]
            assert list(small.iterdir()) == [], "the partial backup was removed"
            assert http.post("/v3/memories/", json={"user_id": "alice"}).json()["count"] == count
            body = {"messages": [{"role": "user", "content": "Still writable."}], "user_id": "z"}
            assert http.post("/v1/memories/", json={**body, "infer": False}).status_code == 200
    finally:
        subprocess.run(["umount", str(small)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root (CI runs as root)")
def test_a_backup_on_a_read_only_mount_restores(tmp_path: Path, made: Path) -> None:
    """A restore mounts the backup volume read-only: nothing may need writing beside it
    (a WAL database would: its -shm file)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(made), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], check=True)
        with pytest.raises(OSError):
            (ro / "probe").write_text("x")
        cfg = _config(tmp_path, "restored")
        result = backup.restore(ro, cfg, key_file=signing_key_file(made.parent.parent))
        assert result["restored"] is True and result["memories"] > 0
        files = [*backup.FILES, backup.MANIFEST, backup.SIGNATURE]
        assert sorted(p.name for p in ro.iterdir()) == sorted(files)
    finally:
        subprocess.run(["umount", str(ro)], check=True)


hostile_names = st.one_of(
    st.sampled_from(
        ["..", "../x", "a/b", ".hidden", "UPPER", "-a", "a-", "a..b", "a b", "x" * 254]
    ),
    st.text(min_size=1, max_size=40).filter(lambda s: backup.name_problem(s) is not None),
)


def test_backup_names_and_lifecycle(tmp_path: Path, target: Path) -> None:
    with ServiceThread(_config(tmp_path, "store", target)) as svc, _client(svc) as http:
        _fill(http)

        @settings(max_examples=40, deadline=None)
        @given(name=hostile_names)
        def refused(name: str) -> None:
            response = http.post("/v1/backups/", json={"name": name})
            assert response.status_code == 422, (name, response.text)
            assert "name" in response.json()["detail"]

        refused()
        assert list(target.iterdir()) == []
        before = time.time()
        assert http.post("/v1/backups/", json={"name": "ok.1"}).status_code == 200
        metrics = {
            line.rpartition(" ")[0]: float(line.rpartition(" ")[2])
            for line in http.get("/metrics").text.splitlines()
            if line.startswith("memorystore_backup")
        }
        assert metrics['memorystore_backups_total{outcome="ok"}'] == 1.0
        assert before <= metrics["memorystore_backup_last_success_timestamp_seconds"] <= time.time()
        again = http.post("/v1/backups/", json={"name": "ok.1"})
        assert again.status_code == 409 and "already exists" in again.json()["detail"]
        assert http.get("/v1/backups/missing/").status_code == 404
        assert http.delete("/v1/backups/ok.1/").status_code == 200
        assert not (target / "ok.1").exists()
        unauthorised = httpx.post(f"{svc.url}/v1/backups/", json={"name": "x"})
        assert unauthorised.status_code == 401


def test_the_offline_backup_command_round_trips(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "store")
    with ServiceThread(cfg) as svc, _client(svc) as http:
        _fill(http)
        before = _answers(http)
    config_file = _write_config(cfg, tmp_path / "store.yaml")
    out = tmp_path / "out"
    out.mkdir()
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "memorystore",
            "backup",
            "--config",
            str(config_file),
            "--to",
            str(out),
            "--name",
            "offline",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout.strip().splitlines()[-1])["name"] == "offline"
    restored = _config(tmp_path, "restored")
    # signed with the key `memorystore backup` generated in the store's data directory
    generated = Path(cfg.data_dir) / backup.DEFAULT_KEY_FILE
    assert generated.stat().st_mode & 0o777 == 0o600
    config = _write_config(restored, tmp_path / "restored.yaml")
    done = _restore_cli(config, out / "offline", key=generated)
    assert done.returncode == 0, done.stderr
    with ServiceThread(restored) as svc, _client(svc) as http:
        assert _answers(http) == before
