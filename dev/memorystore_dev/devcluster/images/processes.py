"""The daemons' processes: started to die with us, stopped by PID, their shims found.

Why: the harness stops only what it started (never by a broad name), and a run killed
before its cleanup must still be reapable by the next one from the PIDs it recorded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

__all__: list[str] = []  # package-internal: the helpers of dockerd.py


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when we die, so a killed test still stops dockerd
    cleanly (a later run reaps whatever is left, from the state file)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM one process we started, wait, then SIGKILL it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid_alive(pid):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        time.sleep(0.2)
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _shims_of(address: str) -> list[int]:
    """containerd shims started for our containerd (they outlive it by design)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            line = _cmdline(int(entry.name))
            if "containerd-shim" in line and f"-address {address} " in line + " ":
                pids.append(int(entry.name))
    return pids
