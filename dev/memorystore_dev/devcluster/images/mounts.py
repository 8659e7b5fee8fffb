"""Mounts the daemons and debootstrap leave under a folder, and removing such a folder safely.

Why: a killed dockerd or debootstrap leaves overlay, proc and sys mounts behind; deleting
through one would reach into what it mounts, so every tree is unmounted before it is removed.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

from memorystore_dev.devcluster.images.errors import ImageBuildError

__all__ = ["unmount_under"]


def _mounts_under(prefix: Path) -> list[str]:
    """Mount points at or below prefix, deepest first (the order to unmount them in)."""
    root = str(prefix).rstrip("/")
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            point = line.split()[1].encode().decode("unicode_escape")
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def unmount_under(prefix: Path) -> list[str]:
    """Unmount whatever is left below prefix (lazily if busy); returns what was unmounted."""
    done = []
    for point in _mounts_under(prefix):
        if subprocess.run(["umount", point], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True)
        done.append(point)
    left = _mounts_under(prefix)
    if left:
        raise ImageBuildError(f"cannot unmount {left} (under {prefix})")
    return done


def _remove_tree(path: Path) -> None:
    """Remove a directory only once nothing is mounted below it (never delete through a mount)."""
    if path.exists():
        unmount_under(path)
        shutil.rmtree(path, ignore_errors=True)
