"""The machine's Go, and running it: short commands, and a long `go build` with progress lines.

Why: the machine reaches package registries only, so the tools are compiled with its own Go
(GOTOOLCHAIN=local: never a downloaded one). A cold Kubernetes build is quiet for minutes on
two cores, so it says how far it got every HEARTBEAT_SECONDS, and an abort ends the compilers.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from memorystore_dev.devcluster.tools.errors import BuildError

__all__ = ["DEFAULT_GO", "Log", "find_go", "go_env"]

Log = Callable[[str], None]

# The machine's Go; MEMORYSTORE_GO overrides it. GOTOOLCHAIN=local keeps it from fetching another.
DEFAULT_GO = "/usr/local/go/bin/go"
# Seconds between "still building" lines while `go build` is quiet.
HEARTBEAT_SECONDS = 30.0
# Upper bound for one go command (the cold Kubernetes build on 2 cores is the long one).
GO_BUILD_TIMEOUT = 3 * 3600


def find_go(env: Mapping[str, str] | None = None) -> str:
    """MEMORYSTORE_GO, else the machine's /usr/local/go, else `go` on PATH."""
    env = os.environ if env is None else env
    for candidate in (env.get("MEMORYSTORE_GO"), DEFAULT_GO, shutil.which("go")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise BuildError("no Go toolchain: install Go or set MEMORYSTORE_GO to the go binary")


def go_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for every go command: local toolchain, static binaries, go.mod may update."""
    env = dict(os.environ if base is None else base)
    env["GOTOOLCHAIN"] = "local"  # never download another Go
    env["CGO_ENABLED"] = "0"  # static, like the upstream release builds
    env["GOWORK"] = "off"  # an outer go.work must not pull the wrapper in
    flags = env.get("GOFLAGS", "").split()
    if not any(f.startswith("-mod=") for f in flags):
        flags.append("-mod=mod")
    env["GOFLAGS"] = " ".join(flags)
    return env


def _run(cmd: Sequence[str], cwd: Path | None, what: str, timeout: float = 600) -> str:
    """Run a short go command; its stderr is the error message when it fails."""
    proc = subprocess.run(
        list(cmd),
        cwd=cwd,
        env=go_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise BuildError(f"{what} failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
    return proc.stdout


def _run_streaming(cmd: Sequence[str], cwd: Path, what: str, total: int, log: Log) -> None:
    """Run `go build -v`, printing a progress line every HEARTBEAT_SECONDS; kill it if aborted."""
    start = time.monotonic()
    tail: collections.deque[str] = collections.deque(maxlen=60)
    count = [0]

    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=go_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so an abort can end the compilers too
    )

    def pump() -> None:
        """Count compiled packages (go build -v prints one per line) and keep the tail."""
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip())
            count[0] += 1

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        while True:
            try:
                proc.wait(timeout=HEARTBEAT_SECONDS)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - start
                if elapsed > GO_BUILD_TIMEOUT:
                    raise BuildError(f"{what} took over {GO_BUILD_TIMEOUT} s") from None
                log(
                    f"  … {what}: {count[0]} of ≤{total} packages compiled, "
                    f"{elapsed:.0f} s so far (last: {tail[-1] if tail else '-'})"
                )
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        reader.join(timeout=5)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))
