"""The private engine's own rules (images/dockerd.py), without starting it: the packages it
needs, how a failed step fails, and the e2e image tests' gate on those packages.

The builds themselves run in tests/e2e/test_images.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from memorystore_dev.devcluster.images import (
    ImageBuilder,
    ImageBuildError,
    MissingPackageError,
    dockerd,
)
from support.paths import REPO

ROOT = REPO
MISSING = ("no-such-package", "/nonexistent/memorystore-test/bin/tool")


def test_a_missing_package_is_named_with_the_step_that_installs_it(monkeypatch):
    monkeypatch.setattr(dockerd, "REQUIRED_FILES", (*dockerd.REQUIRED_FILES, MISSING))
    with pytest.raises(MissingPackageError) as caught:
        dockerd.check_packages()
    assert "no-such-package" in str(caught.value)
    assert MISSING[1] in str(caught.value)
    assert "make node-deps" in str(caught.value)


def test_nothing_starts_when_a_package_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(dockerd, "REQUIRED_FILES", (*dockerd.REQUIRED_FILES, MISSING))
    with pytest.raises(MissingPackageError), ImageBuilder(cache=tmp_path / "cache"):
        pass
    assert not (tmp_path / "cache").exists()


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


@pytest.mark.parametrize("ci", ["true", ""])
def test_the_image_tests_skip_without_packages_but_fail_in_ci(tmp_path, ci):
    """The e2e module under a harness that lacks a package: a skip that says why, or with
    CI=true a failure (a CI run must never pass by building nothing)."""
    (tmp_path / "lacks_package.py").write_text(
        "from memorystore_dev.devcluster.images import dockerd\n"
        f"dockerd.REQUIRED_FILES = (*dockerd.REQUIRED_FILES, {MISSING!r})\n"
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
