"""The backup target as a confined directory (service/portability/backup/files.py): names
taken under a lock before anything else, stale partials cleaned only when nobody holds
them, and no symbolic link followed, planted wherever an attacker likes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.service.portability.backup import BackupError
from memorystore.service.portability.backup.files import MANIFEST, Target, partial_name


@pytest.fixture
def target(tmp_path: Path) -> Target:
    root = tmp_path / "target"
    root.mkdir()
    return Target.open(root)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / MANIFEST).write_text('{"secret": 1}')
    (path / "keep").write_text("keep")
    return path


def test_a_held_name_is_refused_at_once_and_free_again_after(target: Target):
    with target.lock("b1"):
        with pytest.raises(BackupError) as caught, target.lock("b1"):
            pass
        assert caught.value.status == 409 and "being taken" in str(caught.value)
        with target.lock("b2"):  # another name is not held up
            pass
    with target.lock("b1"):
        pass
    assert os.listdir(target.fd) == [], "lock files go with their lock"


def test_locks_from_many_threads_let_exactly_one_in(target: Target):
    inside, refused = [], []
    start = threading.Barrier(8)
    hold = threading.Event()

    def race() -> None:
        start.wait()
        try:
            with target.lock("same"):
                inside.append(1)
                hold.wait(2)
        except BackupError:
            refused.append(1)
            if len(refused) == 7:
                hold.set()

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(inside), len(refused)) == (1, 7)


def test_stale_partials_go_held_ones_stay(target: Target):
    for name in ("old", "busy"):
        os.mkdir(partial_name(name), dir_fd=target.fd)
        open(Path(target.root, partial_name(name), "file"), "w").close()
    with target.lock("busy"):
        assert target.remove_stale_partials() == ["old"]
    assert sorted(os.listdir(target.fd)) == [partial_name("busy")]
    assert target.remove_stale_partials() == ["busy"]
    assert os.listdir(target.fd) == []


PLACES = ["backup", "partial", "lock", "manifest"]
POINTS = ["directory", "file", "dangling", "root"]


@settings(max_examples=40, deadline=None)
@given(place=st.sampled_from(PLACES), points=st.sampled_from(POINTS))
def test_a_planted_link_is_never_followed(tmp_path_factory, place: str, points: str):
    tmp = tmp_path_factory.mktemp("links")
    root = tmp / "target"
    root.mkdir()
    outside = tmp / "outside"
    outside.mkdir()
    (outside / MANIFEST).write_text('{"secret": 1}')
    (outside / "keep").write_text("keep")
    destination = {
        "directory": outside,
        "file": outside / "keep",
        "dangling": outside / "gone",
        "root": Path("/"),
    }[points]
    if place == "backup":
        (root / "b").symlink_to(destination)
    elif place == "partial":
        (root / partial_name("b")).symlink_to(destination)
    elif place == "lock":
        (root / ".b.lock").symlink_to(destination)
    else:
        (root / "b").mkdir()
        (root / "b" / MANIFEST).symlink_to(destination)
    with Target.open(root) as target:
        for operation in (
            lambda: target.manifest("b"),
            lambda: target.remove("b"),
            target.remove_stale_partials,
        ):
            try:
                operation()
            except BackupError as exc:
                assert exc.status in (400, 404, 409), exc
    assert (outside / "keep").read_text() == "keep"
    assert (outside / MANIFEST).read_text() == '{"secret": 1}'
    assert Path("/").exists() and Path("/etc").is_dir()


def test_a_root_that_is_a_link_or_missing_is_refused(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(BackupError, match="is a symbolic link") as caught:
        Target.open(tmp_path / "link")
    assert caught.value.status == 503
    with pytest.raises(BackupError, match="does not exist"):
        Target.open(tmp_path / "nowhere")


def test_a_finished_backup_is_removed_with_its_partial_and_lock(target: Target):
    os.mkdir("b", dir_fd=target.fd)
    Path(target.root, "b", MANIFEST).write_text("{}")
    os.mkdir(partial_name("b"), dir_fd=target.fd)
    assert target.remove("b") is True
    assert os.listdir(target.fd) == []
    assert target.remove("b") is False
