"""The tool cache (tools/cache.py): its layout, atomic installs, and a killed build's leftovers."""

from __future__ import annotations

from memorystore_dev.devcluster.tools import cache
from memorystore_dev.devcluster.tools.groups import group_of


def test_cache_root_follows_xdg_cache_home(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path), "HOME": "/nonexistent"}
    assert cache.cache_root(env) == tmp_path / "memorystore" / "k8s-tools"
    # Unset or relative XDG_CACHE_HOME falls back to ~/.cache, as the XDG spec says.
    for env in ({"HOME": str(tmp_path)}, {"HOME": str(tmp_path), "XDG_CACHE_HOME": "rel"}):
        assert cache.cache_root(env) == tmp_path / ".cache" / "memorystore" / "k8s-tools"


def test_cache_layout_is_tool_dash_version(tmp_path):
    path = cache.tool_path("kubectl", "v1.37.2", tmp_path)
    assert path == tmp_path / "kubectl-v1.37.2" / "kubectl"
    assert not cache.is_cached(path)


def test_install_is_atomic_and_leaves_no_staging(tmp_path):
    binary = tmp_path / "work" / "etcd"
    binary.parent.mkdir()
    binary.write_bytes(b"#!/bin/sh\n")
    root = tmp_path / "cache"
    final = cache.tool_dir("etcd", "v3.7.3", root)
    final.mkdir(parents=True)  # an incomplete leftover is replaced
    path = cache.install_atomically(binary, "etcd", final)
    assert path == final / "etcd"
    assert cache.is_cached(path)
    assert sorted(p.name for p in root.iterdir()) == ["etcd-v3.7.3"]


def test_leftovers_of_a_killed_build_are_removed_and_never_cached(tmp_path):
    group = group_of("etcd")
    work = tmp_path / f".work-etcd-{group.version}-abc123"
    stage = tmp_path / f".stage-etcd-{group.version}-def456"
    other = tmp_path / ".work-helm-v3.22.0-xyz"
    for folder in (work, stage, other):
        folder.mkdir()
        (folder / "etcd").write_bytes(b"half")
    assert not cache.is_cached(cache.tool_path("etcd", group.version, tmp_path))
    assert sorted(cache.remove_leftovers(group, tmp_path)) == sorted([work, stage])
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name]
