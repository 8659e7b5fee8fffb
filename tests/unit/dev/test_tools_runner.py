"""The build runner (tools/runner.py) without Go: cached tools are found, unknown ones refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore_dev.devcluster import versions
from memorystore_dev.devcluster.tools import runner, toolchain
from memorystore_dev.devcluster.tools.cache import tool_path
from memorystore_dev.devcluster.tools.groups import TOOLS, group_of


def _fake_cache(root: Path) -> None:
    for tool in TOOLS:
        path = tool_path(tool, group_of(tool).key, root)
        path.parent.mkdir(parents=True)
        path.write_bytes(b"#!/bin/sh\n")
        path.chmod(0o755)


def test_cached_tools_are_returned_without_running_go(tmp_path, monkeypatch):
    _fake_cache(tmp_path)
    monkeypatch.setenv("MEMORYSTORE_GO", "/nonexistent/go")
    monkeypatch.setattr(toolchain, "DEFAULT_GO", "/nonexistent/go")
    monkeypatch.setenv("PATH", "")
    lines: list[str] = []
    results = runner.build_tools(None, log=lines.append, root=tmp_path)
    assert [r.tool for r in results] == list(TOOLS)
    assert all(r.status == "cached" for r in results)
    assert len(lines) == len(TOOLS)
    assert "kubectl v1.37.2: cached" in "\n".join(lines)


def test_ensure_tools_returns_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    root = tmp_path / "memorystore" / "k8s-tools"
    _fake_cache(root)
    paths = runner.ensure_tools(["kubectl", "etcd"], log=lambda _: None)
    assert paths == {
        "kubectl": root / f"kubectl-{versions.KUBERNETES}" / "kubectl",
        "etcd": root / f"etcd-{versions.ETCD}" / "etcd",
    }


def test_unknown_tool_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="known tools: kube-apiserver"):
        runner.build_tools(["kubectl", "kube-router"], root=tmp_path)
    assert list(tmp_path.iterdir()) == []
