"""Backups and restores under races, crashes and planted links: the real service in its own
process, killed with SIGKILL, and a real `memorystore restore`, killed the same way.

- Several backups of one name at once: exactly one is taken, every other one is told 409,
  and no partial or lock file is left.
- A service killed while writing a backup leaves a partial directory; the next start
  removes it, the name answers 404, and the backup can be taken again.
- A restore killed at any point: the service refuses to start on what it left, and running
  the restore again gives exactly the store a restore that was never interrupted gives.
- A symbolic link planted anywhere in the target (as a backup, a partial, a lock, a file in
  a backup, the target itself) is never followed: what it points to is neither read nor
  changed, and every answer is a clear 4xx (or 503 for the target itself).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memorystore.config import ServiceConfig
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.engine.mem0_seam import history_connection
from memorystore.service.ops.runner import ServiceThread
from memorystore.service.portability import backup
from support.backups import (
    client,
    command,
    fill,
    fill_raw,
    serve,
    signing_key_file,
    store_config,
    write_config,
)

pytestmark = pytest.mark.timeout(1200)

# the module, not the function the package exports under the same name
restore_module = importlib.import_module("memorystore.service.portability.backup.restore")

MEMORIES = 10_000


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ServiceConfig]:
    """A store of MEMORIES memories (written straight into it) with a backup target."""
    tmp = tmp_path_factory.mktemp("big")
    target = tmp / "backups"
    target.mkdir()
    cfg = store_config(tmp, "store", target)
    fill_raw(cfg, MEMORIES)
    return tmp, cfg


@pytest.fixture(scope="module")
def big_backup(big: tuple[Path, ServiceConfig]) -> Path:
    _, cfg = big
    assert cfg.backup is not None
    backup.take_stopped(cfg, Path(cfg.backup.path), "big")
    return Path(cfg.backup.path) / "big"


def leftovers(target: Path) -> list[str]:
    return sorted(p.name for p in target.iterdir() if p.name.startswith("."))


# --- the same name at once ----------------------------------------------------------------------


@pytest.mark.parametrize("racers", [2, 5])
def test_backups_of_one_name_at_once_one_is_taken_the_others_get_409(
    big: tuple[Path, ServiceConfig], racers: int
) -> None:
    _, cfg = big
    target = Path(cfg.backup.path)  # type: ignore[union-attr]
    with ServiceThread(cfg) as svc:
        for round_ in range(3):
            name = f"race-{racers}-{round_}"
            start = threading.Barrier(racers)
            answers: list[httpx.Response] = []

            def post(
                name: str = name,
                start: threading.Barrier = start,
                answers: list[httpx.Response] = answers,
            ) -> None:
                with client(svc) as http:
                    start.wait()
                    answers.append(http.post("/v1/backups/", json={"name": name}))

            threads = [threading.Thread(target=post) for _ in range(racers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            codes = sorted(a.status_code for a in answers)
            assert codes == [200] + [409] * (racers - 1), [a.text for a in answers]
            for refused in (a for a in answers if a.status_code == 409):
                detail = refused.json()["detail"]
                assert "being taken" in detail or "already exists" in detail, detail
            with client(svc) as http:
                manifest = http.get(f"/v1/backups/{name}/").json()
            assert manifest["memories"] == MEMORIES
            assert leftovers(target) == [], "no partial directory or lock file is left"


# --- a service killed during a backup -----------------------------------------------------------


def test_a_service_killed_mid_backup_leaves_nothing_after_its_restart(
    big: tuple[Path, ServiceConfig], tmp_path: Path
) -> None:
    _, cfg = big
    target = Path(cfg.backup.path)  # type: ignore[union-attr]
    caught = None
    for attempt in range(5):  # until the kill lands while the partial directory exists
        name = f"killed-{attempt}"
        served = serve(cfg, tmp_path, f"serve-{attempt}")
        try:
            served.wait_ready()
            http = served.http()
            asked = threading.Thread(
                target=lambda http=http, name=name: _ignore_drop(http, name), daemon=True
            )
            asked.start()
            partial = target / f".{name}.partial"
            deadline = time.monotonic() + 60
            while not partial.exists() and time.monotonic() < deadline:
                time.sleep(0.002)
            served.kill()
            asked.join(30)
        finally:
            served.kill()
        if partial.exists() and not (target / name).exists():
            caught = name
            break
    assert caught is not None, "the kill never landed during a backup"
    assert any(p.name == f".{caught}.partial" for p in target.iterdir())

    served = serve(cfg, tmp_path, "restarted")
    try:
        served.wait_ready()
        assert leftovers(target) == [], "the start removed the partial files"
        with served.http() as http:
            assert http.get(f"/v1/backups/{caught}/").status_code == 404
            again = http.post("/v1/backups/", json={"name": caught})
            assert again.status_code == 200, again.text
            assert again.json()["memories"] == MEMORIES
            # retention deletes a failed backup's files the same way: finished or partial
            assert http.delete(f"/v1/backups/{caught}/").status_code == 200
            assert http.delete(f"/v1/backups/{caught}/").status_code == 404
    finally:
        served.kill()


def _ignore_drop(http: httpx.Client, name: str) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the service is killed under it
        http.post("/v1/backups/", json={"name": name})


# --- a restore killed at any point --------------------------------------------------------------


def _state(cfg: ServiceConfig) -> tuple[int, int, str]:
    """What a restored store holds: memories, history rows, a digest of every id+payload."""
    engine = MemoryEngine(cfg)
    try:
        digest = hashlib.sha256()
        for point_id, _, payload in sorted(engine.store.points(1000), key=lambda p: p[0]):
            digest.update(f"{point_id}{sorted(payload.items())}".encode())
        with history_connection(engine.memory) as connection:
            (events,) = connection.execute("SELECT count(*) FROM history").fetchone()
        return engine.count(), int(events), digest.hexdigest()
    finally:
        engine.close()


@pytest.fixture(scope="module")
def clean_restore(
    big: tuple[Path, ServiceConfig], big_backup: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[float, tuple[int, int, str]]:
    """A restore never interrupted: how long it takes, and what it gives."""
    tmp = tmp_path_factory.mktemp("clean")
    cfg = store_config(tmp, "restored")
    started = time.monotonic()
    done = subprocess.run(
        command(
            "restore",
            "--config",
            str(write_config(cfg, tmp / "restored.yaml")),
            "--from",
            str(big_backup),
            "--key",
            str(signing_key_file(big[0])),
        ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started, _state(cfg)


@pytest.mark.parametrize("at", [0.15, 0.35, 0.55, 0.7, 0.8, 0.9, 0.97])
def test_a_restore_killed_at_any_point_is_never_served_half_done_and_finishes(
    big: tuple[Path, ServiceConfig],
    big_backup: Path,
    clean_restore: tuple[float, tuple[int, int, str]],
    tmp_path: Path,
    at: float,
    capsys: pytest.CaptureFixture[str],
) -> None:
    duration, expected = clean_restore
    cfg = store_config(tmp_path, "restored")
    config = write_config(cfg, tmp_path / "restored.yaml")
    args = command(
        "restore", "--config", str(config), "--from", str(big_backup),
        "--key", str(signing_key_file(big[0])),
    )  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(duration * at)
    process.kill()
    process.wait(30)
    pending = backup.pending_restore(cfg)
    committed = (Path(cfg.data_dir) / ".restore" / "commit.json").exists()
    done = (Path(cfg.data_dir) / backup.MARKER).exists()
    state = "moving in" if committed else "written aside" if pending else "done" if done else "none"
    with capsys.disabled():
        print(f"\nrestore killed at {at:.0%} of a clean run: {state}")
    if pending is not None:  # the service will not serve what the kill left
        refused = serve(cfg, tmp_path, "refused")
        try:
            assert refused.process.wait(180) != 0
        finally:
            refused.kill()
        assert "interrupted restore is pending" in refused.log.read_text()
    else:  # killed before anything was written, or after it was all done
        marker = Path(cfg.data_dir) / backup.MARKER
        assert marker.exists() or not (Path(cfg.data_dir) / "qdrant").exists()
    again = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert backup.pending_restore(cfg) is None
    assert _state(cfg) == expected


def test_a_restore_killed_while_moving_in_is_finished_by_the_next_run(
    big: tuple[Path, ServiceConfig],
    big_backup: Path,
    clean_restore: tuple[float, tuple[int, int, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one window a timed kill rarely hits: between the first and the last move."""
    cfg = store_config(tmp_path, "restored")
    key = signing_key_file(big[0])
    real_move = shutil.move
    moved: list[str] = []

    def crash_after_one(source: str, dest: str) -> None:
        if moved:
            raise KeyboardInterrupt("killed while moving in")
        moved.append(str(source))
        real_move(source, dest)

    monkeypatch.setattr(restore_module.shutil, "move", crash_after_one)
    with pytest.raises(KeyboardInterrupt):
        backup.restore(big_backup, cfg, key_file=key)
    monkeypatch.setattr(restore_module.shutil, "move", real_move)
    assert "interrupted restore is pending" in (backup.pending_restore(cfg) or "")
    result = backup.restore(big_backup, cfg, key_file=key)
    assert result["restored"] is True
    assert _state(cfg) == clean_restore[1]


# --- planted symbolic links ---------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path) -> Iterator[tuple[ServiceThread, httpx.Client, Path, Path]]:
    """A serving store with a target, one backup `b1` in it, and a directory outside the
    target holding a manifest and a file a link may point to."""
    target = tmp_path / "backups"
    target.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / backup.MANIFEST).write_text('{"secret": "outside-the-target-7c1f"}')
    (outside / "precious").write_text("do not touch")
    with ServiceThread(store_config(tmp_path, "store", target)) as svc, client(svc) as http:
        fill(http)
        assert http.post("/v1/backups/", json={"name": "b1"}).status_code == 200
        yield svc, http, target, outside


def _untouched(outside: Path) -> None:
    assert (outside / "precious").read_text() == "do not touch"
    assert "outside-the-target-7c1f" in (outside / backup.MANIFEST).read_text()


@pytest.mark.parametrize("points_to", ["directory", "file", "dangling"])
def test_a_link_as_a_backup_is_never_followed(
    small: tuple[ServiceThread, httpx.Client, Path, Path], points_to: str
) -> None:
    _, http, target, outside = small
    destination = {
        "directory": outside,
        "file": outside / "precious",
        "dangling": outside / "nowhere",
    }[points_to]
    (target / "evil").symlink_to(destination)
    for method in ("GET", "DELETE"):
        answer = http.request(method, "/v1/backups/evil/")
        assert answer.status_code == 400, answer.text
        assert "symbolic link" in answer.json()["detail"]
        assert "outside-the-target-7c1f" not in answer.text
    _untouched(outside)
    assert (target / "evil").is_symlink()


def test_links_as_partials_and_locks_are_removed_not_followed(
    small: tuple[ServiceThread, httpx.Client, Path, Path],
) -> None:
    _, http, target, outside = small
    (target / ".stale.partial").symlink_to(outside)
    (target / ".b2.lock").symlink_to(outside / "precious")
    answer = http.post("/v1/backups/", json={"name": "b2"})
    assert answer.status_code == 200, answer.text
    _untouched(outside)
    assert sorted(p.name for p in outside.iterdir()) == [backup.MANIFEST, "precious"]
    assert leftovers(target) == []


def test_a_link_inside_a_backup_is_refused_by_reads_and_restores(
    small: tuple[ServiceThread, httpx.Client, Path, Path], tmp_path: Path
) -> None:
    _, http, target, outside = small
    shutil.copytree(target / "b1", target / "b3")
    (target / "b3" / backup.MANIFEST).unlink()
    (target / "b3" / backup.MANIFEST).symlink_to(outside / backup.MANIFEST)
    answer = http.get("/v1/backups/b3/")
    assert answer.status_code == 400 and "not a regular file" in answer.json()["detail"]
    assert "outside-the-target-7c1f" not in answer.text
    shutil.copytree(target / "b1", target / "b4")
    (target / "b4" / backup.HISTORY).unlink()
    (target / "b4" / backup.HISTORY).symlink_to(outside / "precious")
    key = signing_key_file(tmp_path)
    for source, reason in (
        (target / "b3", "manifest.json is not a regular file"),
        (target / "b4", "history.db is not a regular file"),
    ):
        cfg = store_config(tmp_path, f"restore-{source.name}")
        with pytest.raises(backup.BackupError, match=reason):
            backup.restore(source, cfg, key_file=key)
        assert not Path(cfg.data_dir).exists()
    (target / "b5").symlink_to(target / "b1")
    with pytest.raises(backup.BackupError, match="symbolic link"):
        backup.restore(target / "b5", store_config(tmp_path, "restore-b5"), key_file=key)
    _untouched(outside)


def test_a_target_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with ServiceThread(store_config(tmp_path, "store", link)) as svc, client(svc) as http:
        answer = http.post("/v1/backups/", json={"name": "b"})
        assert answer.status_code == 503, answer.text
        assert "is a symbolic link" in answer.json()["detail"]
    assert list(real.iterdir()) == []
