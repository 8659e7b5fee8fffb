"""One cache folder for all the developer tooling (memorystore_dev/cache.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore_dev import cache, previous_release
from memorystore_dev.devcluster.images import dockerd
from memorystore_dev.devcluster.tools import cache_root


def test_cache_home_follows_xdg_cache_home(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "HOME": "/nonexistent"}
    assert cache.cache_home(env) == tmp_path / "memorystore"
    # Unset or relative XDG_CACHE_HOME falls back to ~/.cache, as the XDG spec says.
    for env in ({"HOME": str(tmp_path)}, {"HOME": str(tmp_path), "XDG_CACHE_HOME": "rel"}):
        assert cache.cache_home(env) == tmp_path / ".cache" / "memorystore"


def test_every_cache_of_the_tooling_is_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = tmp_path / "memorystore"
    assert cache_root() == home / "k8s-tools"
    assert dockerd.cache_dir() == home / "docker"
    assert previous_release._cache() == home / "releases"
