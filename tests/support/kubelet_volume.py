"""A Secret volume laid out and updated exactly as kubelet's atomic writer does it.

kubelet keeps a mounted Secret as `<dir>/..<timestamp>/<key>` files, a symlink `..data` to
the current timestamped directory, and one symlink per key, `<key>` → `..data/<key>`. An
update writes a new timestamped directory, points a temporary symlink at it, renames that
over `..data` (one atomic step: every key changes at once) and removes the old directory
and the symlinks of keys that are gone. A reader that opens `<dir>/<key>` before the swap
gets the old file, after it the new one; `stat` on the path follows the symlinks to it.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

_stamps = itertools.count()


class KubeletVolume:
    """`volume = KubeletVolume(dir); volume.update({"dsn": "..."})`; `volume.path("dsn")`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        return self.directory / key

    def update(self, data: dict[str, str | bytes]) -> None:
        """Make the volume hold exactly `data` (key → file content), as one atomic swap."""
        stamp = self.directory / f"..{next(_stamps):04d}_{os.getpid()}"
        stamp.mkdir()
        for key, value in data.items():
            content = value.encode() if isinstance(value, str) else value
            (stamp / key).write_bytes(content)
            (stamp / key).chmod(0o440)
        link = self.directory / "..data"
        old = os.readlink(link) if link.is_symlink() else None
        tmp = self.directory / "..data_tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(stamp.name)
        os.replace(tmp, link)
        for key in data:
            entry = self.directory / key
            if not entry.is_symlink():
                entry.symlink_to(Path("..data") / key)
        for entry in self.directory.iterdir():
            if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in data:
                entry.unlink()
        if old is not None:
            shutil.rmtree(self.directory / old)
