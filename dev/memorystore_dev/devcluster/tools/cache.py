"""The per-user cache of built tools: its layout, atomic installs, the build lock, leftovers.

Why: a build takes many minutes, so each binary is kept under
`${XDG_CACHE_HOME:-~/.cache}/memorystore/k8s-tools/<tool>-<version>/<tool>`. A folder exists
there only once complete (one rename from a staging folder), builders of one group wait for
each other on a lock, and a killed build's temp folders are removed by the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from memorystore_dev.cache import cache_home
from memorystore_dev.devcluster.tools.groups import Group

__all__ = [
    "cache_root",
    "file_lock",
    "install_atomically",
    "is_cached",
    "remove_leftovers",
    "tool_dir",
    "tool_path",
]


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/memorystore/k8s-tools` (memorystore_dev.cache)."""
    return cache_home(env) / "k8s-tools"


def tool_dir(tool: str, version: str, root: Path) -> Path:
    """The finished folder of one tool at one version; it exists only once complete."""
    return root / f"{tool}-{version}"


def tool_path(tool: str, version: str, root: Path) -> Path:
    """The cached binary of one tool at one version."""
    return tool_dir(tool, version, root) / tool


def is_cached(path: Path) -> bool:
    """A cached binary is a non-empty executable file in its finished folder."""
    return path.is_file() and path.stat().st_size > 0 and os.access(path, os.X_OK)


def install_atomically(binary: Path, tool: str, final_dir: Path) -> Path:
    """Move a checked binary into `final_dir` with one rename, so readers never see half a tool.

    The binary is first put alone in a staging folder beside `final_dir` (same file system),
    then that folder is renamed to `final_dir`. An existing incomplete `final_dir` is removed.
    """
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".stage-{final_dir.name}-", dir=final_dir.parent))
    try:
        staged = stage / tool
        shutil.move(str(binary), staged)
        staged.chmod(0o755)
        stage.chmod(0o755)  # mkdtemp makes 0700
        if final_dir.exists():
            shutil.rmtree(final_dir)
        os.rename(stage, final_dir)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return final_dir / tool


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Serialize builders of one group and version (a second test run waits, not rebuilds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_leftovers(group: Group, root: Path) -> list[Path]:
    """Delete temp folders of a killed build of this group (call only while holding its lock)."""
    patterns = [f".work-{group.name}-{group.version}-*"]
    patterns += [f".stage-{tool_dir(t, group.key, root).name}-*" for t in group.packages]
    leftovers = [p for pattern in patterns for p in root.glob(pattern) if p.is_dir()]
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
    return leftovers
