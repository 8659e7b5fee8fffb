"""Processes on the host: which are alive, which the node left, and ending them by PID.

Why: after a SIGKILL the node's pods, shims and helpers outlive the harness; they are found by
what is unique to this node (its cgroups, its socket and folder on their command line), never
by a broad name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["kill_pids", "pid_alive", "pids_with_arg", "wait_gone"]


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a live (non-zombie) process."""
    return Path(f"/proc/{pid}").exists() and not _zombie(pid)


def pids_with_arg(needle: str) -> list[int]:
    """PIDs whose command line contains `needle` (a path unique to this node), not ours."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle.encode() in cmdline:
            found.append(int(entry.name))
    return found


def kill_pids(pids: Sequence[int]) -> None:
    """SIGKILL each PID; gone ones are fine."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def wait_gone(pids: Sequence[int], timeout: float = 10) -> list[int]:
    """The PIDs still alive after `timeout` s."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and not _zombie(p)]
        if alive:
            time.sleep(0.1)
    return alive


def _zombie(pid: int) -> bool:
    """A zombie holds no resources; its parent reaps it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
