"""What the real node needs (node/requirements.py): a missing package is named with its step."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore_dev.devcluster.node import requirements


def test_missing_packages_are_named_with_the_make_step(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(requirements.shutil, "which", lambda cmd, path=None: None)
    monkeypatch.setattr(requirements, "CNI_BIN", Path("/nonexistent"))
    problems = " ".join(requirements.missing_requirements({}))
    for package in ("containerd", "runc", "iptables", "conntrack", "ipset"):
        assert f"Debian package {package} is missing" in problems
    assert "containernetworking-plugins" in problems
    assert "make node-deps" in problems
    assert "tool kubelet was not built" in problems
