"""What the daemons leave mounted (images/mounts.py) is unmounted before its tree is removed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from memorystore_dev.devcluster.images import mounts


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_leftover_mounts_are_unmounted_before_a_tree_is_removed(tmp_path):
    inner = tmp_path / "run" / "exec" / "rootfs"
    inner.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(inner)], check=True)
    try:
        (inner / "kept").write_text("x")
        assert mounts.unmount_under(tmp_path / "run") == [str(inner)]
        assert str(inner) not in Path("/proc/mounts").read_text()
    finally:
        subprocess.run(["umount", str(inner)], capture_output=True)
    assert not (inner / "kept").exists()  # the file lived on the tmpfs, not on disk
    assert mounts.unmount_under(tmp_path / "run") == []
