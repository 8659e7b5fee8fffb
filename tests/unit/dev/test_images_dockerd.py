"""The image harness's own rules, without building anything: what it refuses and how it fails.

The builds themselves run in tests/e2e/test_images.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memorystore_dev.devcluster import images
from memorystore_dev.devcluster.images import ImageBuilder, ImageBuildError, MissingPackageError
from support.paths import REPO

ROOT = REPO
MISSING = ("no-such-package", "/nonexistent/memorystore-test/bin/tool")


def test_a_missing_package_is_named_with_the_step_that_installs_it(monkeypatch):
    monkeypatch.setattr(images, "REQUIRED_FILES", (*images.REQUIRED_FILES, MISSING))
    with pytest.raises(MissingPackageError) as caught:
        images.check_packages()
    assert "no-such-package" in str(caught.value)
    assert MISSING[1] in str(caught.value)
    assert "make node-deps" in str(caught.value)


def test_nothing_starts_when_a_package_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(images, "REQUIRED_FILES", (*images.REQUIRED_FILES, MISSING))
    with pytest.raises(MissingPackageError), ImageBuilder(cache=tmp_path / "cache"):
        pass
    assert not (tmp_path / "cache").exists()


def test_the_mirror_is_the_hosts_main_suite_not_security(tmp_path):
    sources = tmp_path / "debian.sources"
    sources.write_text(
        textwrap.dedent(
            """\
            Types: deb
            URIs: http://security.example/debian-security
            Suites: bookworm-security
            Components: main

            Types: deb
            # a comment line
            URIs: http://mirror.example/debian
            Suites: bookworm bookworm-updates
            Components: main
            """
        )
    )
    assert images.host_mirror(sources) == "http://mirror.example/debian"
    assert images.host_mirror(tmp_path / "absent") == images.DEFAULT_MIRROR


def test_the_base_key_follows_suite_mirror_and_variant(tmp_path):
    def key(**kw: str) -> str:
        return ImageBuilder(cache=tmp_path, **kw).base_key()

    first = key(suite="bookworm", mirror="http://a/debian", variant="minbase")
    assert first == key(suite="bookworm", mirror="http://a/debian", variant="minbase")
    assert first != key(suite="trixie", mirror="http://a/debian", variant="minbase")
    assert first != key(suite="bookworm", mirror="http://b/debian", variant="minbase")
    assert first != key(suite="bookworm", mirror="http://a/debian", variant="buildd")
    tag = ImageBuilder(cache=tmp_path, suite="bookworm", mirror="http://a/debian").base_tag()
    assert tag == f"memorystore-base/debian:bookworm-minbase-{first}"


def test_a_failed_step_names_the_step_and_its_log(tmp_path):
    builder = ImageBuilder(cache=tmp_path)
    builder.logs = builder.run_dir = tmp_path
    with pytest.raises(ImageBuildError) as caught:
        builder._run_step("debootstrap", ["sh", "-c", "echo no route to mirror; exit 3"])
    message = str(caught.value)
    assert message.startswith("debootstrap failed: exit 3; log: ")
    assert str(tmp_path / "debootstrap.log") in message
    assert "no route to mirror" in message  # the log's tail, to act on without opening it
    assert "no route to mirror" in (tmp_path / "debootstrap.log").read_text()


def test_the_client_refuses_to_run_before_the_engine_starts(tmp_path):
    with pytest.raises(ImageBuildError, match="not started"):
        ImageBuilder(cache=tmp_path).docker("info")


def test_an_unknown_target_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="'debug' is not one of memory-service, operator"):
        ImageBuilder(cache=tmp_path).build("debug")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_leftover_mounts_are_unmounted_before_a_tree_is_removed(tmp_path):
    inner = tmp_path / "run" / "exec" / "rootfs"
    inner.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(inner)], check=True)
    try:
        (inner / "kept").write_text("x")
        assert images.unmount_under(tmp_path / "run") == [str(inner)]
        assert str(inner) not in Path("/proc/mounts").read_text()
    finally:
        subprocess.run(["umount", str(inner)], capture_output=True)
    assert not (inner / "kept").exists()  # the file lived on the tmpfs, not on disk
    assert images.unmount_under(tmp_path / "run") == []


@pytest.mark.parametrize("ci", ["true", ""])
def test_the_image_tests_skip_without_packages_but_fail_in_ci(tmp_path, ci):
    """The e2e module under a harness that lacks a package: a skip that says why, or with
    CI=true a failure (a CI run must never pass by building nothing)."""
    (tmp_path / "lacks_package.py").write_text(
        "from memorystore_dev.devcluster import images\n"
        f"images.REQUIRED_FILES = (*images.REQUIRED_FILES, {MISSING!r})\n"
    )
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/e2e/test_images.py", "-p", "lacks_package",
         "-p", "no:cacheprovider", "-q", "-rs"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert "no-such-package" in out and "make node-deps" in out, out
    if ci:
        assert done.returncode == 1, out
        assert "CI=true and the images cannot be built here" in out, out
    else:
        assert done.returncode == 0, out
        assert re.search(r"\b\d+ skipped in ", out) and " passed" not in out, out
