"""Where an embedded shard's files live, and how a rewritten copy takes their place.

A purge (`EdgeVectorStore.purge`) and an index build (`build_index`) each make a whole new
shard beside the live one (`.<name>.purge`, `.<name>.index`) and swap it in by two renames;
the replaced shard waits as `.<name>.old` until it is deleted. A crash at any step leaves one
whole shard, which `recover()` restores at the next open (embedded.py, "Erasure").
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ShardFiles"]


@dataclass(frozen=True)
class ShardFiles:
    """The paths of one collection's shard under `root`, and the swap between them."""

    root: Path
    name: str

    @property
    def live(self) -> Path:
        return self.root / self.name

    @property
    def purge_copy(self) -> Path:
        """Where a purge builds the new shard."""
        return self.root / f".{self.name}.purge"

    @property
    def index_copy(self) -> Path:
        """Where an index build optimizes its copy of the shard."""
        return self.root / f".{self.name}.index"

    @property
    def old(self) -> Path:
        """Where a replaced shard waits to be deleted."""
        return self.root / f".{self.name}.old"

    def swap_in(self, copy: Path) -> None:
        """Put the finished, closed `copy` in the closed live shard's place, durably."""
        os.rename(self.live, self.old)
        os.rename(copy, self.live)
        _sync_dir(self.root)
        shutil.rmtree(self.old)

    def recover(self) -> None:
        """Finish or drop what a purge or an index build killed half-way left; at most one
        of their copies can be whole at a swap."""
        copies = (self.purge_copy, self.index_copy)
        if self.old.exists():
            if not self.live.exists():  # killed between the two renames
                for copy in copies:
                    if copy.exists():
                        os.rename(copy, self.live)
                        break
            shutil.rmtree(self.old)
        for copy in copies:  # a copy never finished, or finished but not swapped in
            if copy.exists():
                shutil.rmtree(copy)


def _sync_dir(path: Path) -> None:
    """Make the renames in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
