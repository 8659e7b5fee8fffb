"""The environment every go command runs in (tools/toolchain.py)."""

from __future__ import annotations

import os

from memorystore_dev.devcluster.tools import toolchain


def test_go_env_is_local_static_and_keeps_user_goflags():
    env = toolchain.go_env({"GOFLAGS": "-buildvcs=false", "PATH": os.defpath})
    assert env["GOTOOLCHAIN"] == "local"
    assert env["CGO_ENABLED"] == "0"
    assert env["GOFLAGS"].split() == ["-buildvcs=false", "-mod=mod"]
    assert toolchain.go_env({"GOFLAGS": "-mod=readonly"})["GOFLAGS"] == "-mod=readonly"
