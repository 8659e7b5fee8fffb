"""The previous release, built from its git tag: its source tree and its Python package, for
the upgrade test (tests/e2e/test_upgrade.py) to install it and upgrade from it.

`PREVIOUS` names the tag and the commit it points at (a clone without tags still has the
commit; a shallow one is deepened from its origin). The tree is `git archive` of that commit
and the package a `pip install --no-deps --target` of the tree (its own pinned build
backend, from PyPI), both cached under `${XDG_CACHE_HOME:-~/.cache}/memorystore/releases/`
by commit: built once per machine, never assumed to be there. The package runs on this
checkout's installed dependencies; its own are the same pins or older compatible ones.

Bump `PREVIOUS` when a release is tagged (the release workflow's tag).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memorystore_dev.cache import cache_home
from memorystore_dev.version import ROOT

__all__ = ["PREVIOUS", "Release", "previous_release"]


@dataclass(frozen=True)
class Release:
    """One released version: its tag, the commit the tag points at, and once built, where
    its source tree and its installed package are."""

    tag: str
    commit: str
    root: Path = Path()

    @property
    def source(self) -> Path:
        return self.root / "src"

    @property
    def site(self) -> Path:
        """A directory to put first on PYTHONPATH to run this release's `memorystore`."""
        return self.root / "site"

    @property
    def chart(self) -> Path:
        return self.source / "charts" / "memorystore"

    def env(self) -> dict[str, str]:
        """This process's environment, in which `python -m memorystore` is this release."""
        return {**os.environ, "PYTHONPATH": str(self.site), "PYTHONSAFEPATH": "1"}


PREVIOUS = Release("v0.1.0", "9182b91adcd7c337d954e33997e996c67c2906e0")


def _cache() -> Path:
    return cache_home() / "releases"


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    # safe.directory: a checkout owned by another user (CI runs as root on any clone) is
    # still ours to read
    argv = ["git", "-c", f"safe.directory={ROOT}", "-C", str(ROOT), *args]
    return subprocess.run(argv, capture_output=True, check=False)


def _have(commit: str) -> bool:
    return _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


def _fetch(release: Release) -> None:
    """Make the release's commit present: a shallow clone asks its origin for it."""
    if _have(release.commit):
        return
    _git("fetch", "--quiet", "origin", release.commit)
    if not _have(release.commit):
        raise RuntimeError(
            f"{release.tag} ({release.commit}) is not in this clone and its origin did not "
            "give it: clone with history (git clone without --depth)"
        )


def previous_release(release: Release = PREVIOUS, log: Callable[[str], None] = print) -> Release:
    """The release's tree and package, built into the cache unless already there."""
    built = Release(release.tag, release.commit, _cache() / release.commit)
    done = built.root / ".complete"
    if done.exists():
        return built
    _fetch(release)
    shutil.rmtree(built.root, ignore_errors=True)
    built.root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=built.root.parent) as tmp:
        staging = Path(tmp) / "release"
        src, site = staging / "src", staging / "site"
        src.mkdir(parents=True)
        log(f"{release.tag}: git archive {release.commit[:12]}")
        archive = _git("archive", "--format=tar", release.commit)
        if archive.returncode != 0:
            raise RuntimeError(f"git archive {release.commit}: {archive.stderr.decode()}")
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
        log(f"{release.tag}: pip install --no-deps --target (its pinned build backend)")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
             "--target", str(site), str(src)],
            check=True,
            capture_output=True,
        )  # fmt: skip
        (staging / ".complete").write_text(release.tag + "\n")
        staging.rename(built.root)
    return built
