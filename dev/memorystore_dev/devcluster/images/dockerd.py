"""A private containerd and dockerd, owned by the harness from start to stop.

Why: no Docker engine runs here by default, and a system one must not be touched. This one
has its own data-root in the user cache (layer caching across runs), its own exec-root and
sockets in a temp dir, no bridge and no iptables changes. It starts only once every Debian
package it needs is there (from `make node-deps`), holds a lock so one run uses a cache at a
time, and is stopped by PID at the end, also on failure; a run killed before its cleanup is
reaped by the next one from the state file it leaves.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from memorystore_dev.cache import cache_home
from memorystore_dev.devcluster.images.errors import ImageBuildError, MissingPackageError
from memorystore_dev.devcluster.images.mounts import _remove_tree, unmount_under
from memorystore_dev.devcluster.images.processes import (
    _cmdline,
    _die_with_parent,
    _shims_of,
    _terminate,
)

__all__ = ["DOCKER", "REQUIRED_FILES", "SYSTEM_PATH", "DockerEngine", "check_packages"]

Log = Callable[[str], None]

# (Debian package, a file it installs): checked before anything starts.
REQUIRED_FILES = (
    ("docker.io", "/usr/sbin/dockerd"),
    ("docker.io", "/usr/bin/docker"),
    ("containerd", "/usr/bin/containerd"),
    ("containerd", "/usr/bin/containerd-shim-runc-v2"),
    ("runc", "/usr/sbin/runc"),
    ("debootstrap", "/usr/sbin/debootstrap"),
)
INSTALL_HINT = "run `make node-deps` as root (apt-get installs docker.io and debootstrap)"
# Debian's 20.10 client builds with BuildKit; a newer client elsewhere on PATH may lack buildx.
DOCKER = "/usr/bin/docker"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

DAEMON_START_TIMEOUT = 90.0
DAEMON_STOP_TIMEOUT = 40.0
LOCK_TIMEOUT = 3600.0
STEP_TIMEOUT = 600.0
KEEP_LOG_RUNS = 5
BUILD_CACHE_KEEP = "4GB"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cache_dir() -> Path:
    return cache_home() / "docker"


def check_packages() -> None:
    """Fail with the package's name and the step that installs it, before touching anything."""
    missing: dict[str, list[str]] = {}
    for package, path in REQUIRED_FILES:
        if not os.access(path, os.X_OK):
            missing.setdefault(package, []).append(path)
    if missing:
        parts = [f"{pkg} (no {', '.join(paths)})" for pkg, paths in missing.items()]
        raise MissingPackageError(
            f"the image build needs the Debian package(s) {'; '.join(parts)}: {INSTALL_HINT}"
        )
    if os.geteuid() != 0:
        raise MissingPackageError("the image build needs root (dockerd, debootstrap)")


class DockerEngine:
    """The private engine: `start` (or `with`) brings the daemons up, `stop` takes them down."""

    def __init__(self, cache: Path | None = None, *, log: Log = _stderr) -> None:
        self.cache = cache or cache_dir()
        self.log = log
        self.data_root = self.cache / "data"
        self.containerd_root = self.cache / "containerd"
        self.state_file = self.cache / "daemons.json"
        self.run_dir: Path | None = None
        self.logs: Path | None = None
        self.socket: Path | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._containerd_address = ""
        self._lock_fd: int | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        check_packages()
        self.cache.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            self._reap_previous_run()
            stamp = time.strftime("%Y%m%d-%H%M%S")
            self.logs = self.cache / "logs" / f"{stamp}-{os.getpid()}"
            self.logs.mkdir(parents=True)
            self._prune_logs()
            # short: unix socket paths are limited to 108 bytes
            self.run_dir = Path(tempfile.mkdtemp(prefix="ms-docker-", dir="/tmp"))
            self.socket = self.run_dir / "docker.sock"
            with self._step("start containerd and dockerd"):
                self._start_daemons()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the daemons by PID, remove their mounts and temp dir; safe to call twice."""
        try:
            if self._procs and self.socket is not None:
                self._trim_build_cache()
            for proc in reversed(self._procs):  # dockerd first: it stops its containers
                _terminate(proc.pid, DAEMON_STOP_TIMEOUT)
            self._procs.clear()
            if self._containerd_address:
                for pid in _shims_of(self._containerd_address):
                    _terminate(pid, 5)
            if self.run_dir is not None:
                left = unmount_under(self.run_dir)
                if left:
                    self.log(f"images: unmounted leftovers {left}")
                _remove_tree(self.run_dir)
                self.run_dir = None
            with contextlib.suppress(FileNotFoundError):
                self.state_file.unlink()
        finally:
            self._unlock()

    def _trim_build_cache(self) -> None:
        """Least recently used build cache beyond the bound goes: the data-root stays bounded."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.docker("builder", "prune", "--force", "--keep-storage", BUILD_CACHE_KEEP)

    def _lock(self) -> None:
        """One harness per cache at a time: a data-root cannot serve two dockerds."""
        fd = os.open(self.cache / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + LOCK_TIMEOUT
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise ImageBuildError(f"{self.cache} stays locked by another build") from None
                if not said:
                    self.log(f"images: waiting for another build using {self.cache}")
                    said = True
                time.sleep(2)
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _reap_previous_run(self) -> None:
        """A run killed before its cleanup leaves its daemons and mounts: stop those (ours only)."""
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            state = {}
        marks = [m for m in (str(self.cache), state.get("run_dir")) if m]
        for pid in state.get("pids", []):
            if any(mark in _cmdline(pid) for mark in marks):
                self.log(f"images: stopping daemon pid {pid} left by an earlier run")
                _terminate(pid, DAEMON_STOP_TIMEOUT)
        address = state.get("containerd_address")
        if address:
            for pid in _shims_of(address):
                _terminate(pid, 5)
        run_dir = state.get("run_dir")
        if run_dir and Path(run_dir).name.startswith("ms-docker-"):
            _remove_tree(Path(run_dir))
        unmount_under(self.data_root)
        unmount_under(self.containerd_root)
        with contextlib.suppress(FileNotFoundError):
            self.state_file.unlink()

    def _prune_logs(self) -> None:
        runs = sorted((self.cache / "logs").iterdir())
        for old in runs[:-KEEP_LOG_RUNS]:
            shutil.rmtree(old, ignore_errors=True)

    def _start_daemons(self) -> None:
        assert self.run_dir is not None and self.logs is not None and self.socket is not None
        run = self.run_dir
        self._containerd_address = str(run / "containerd.sock")
        # Our own containerd: dockerd would otherwise attach to a system one (a kubelet's).
        config = run / "containerd.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{self.containerd_root}"\n'
            f'state = "{run / "containerd-state"}"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            f'[grpc]\n  address = "{self._containerd_address}"\n'
            f'[ttrpc]\n  address = "{self._containerd_address}.ttrpc"\n'
            '[debug]\n  address = ""\n'
            '[metrics]\n  address = ""\n'
        )
        env = {"PATH": SYSTEM_PATH, "HOME": str(run), "LANG": "C.UTF-8"}
        argv = ["/usr/bin/containerd", "--config", str(config)]
        containerd = self._spawn("containerd", argv, env)
        self._record_state()
        self._wait(
            "containerd",
            lambda: self._quiet(["/usr/bin/ctr", "--address", self._containerd_address, "version"]),
            containerd,
        )
        (run / "daemon.json").write_text("{}\n")
        dockerd = self._spawn(
            "dockerd",
            [
                "/usr/sbin/dockerd",
                "--data-root", str(self.data_root),
                "--exec-root", str(run / "exec"),
                "--host", f"unix://{self.socket}",
                "--pidfile", str(run / "dockerd.pid"),
                "--containerd", self._containerd_address,
                "--config-file", str(run / "daemon.json"),
                # network safety: no bridge, no NAT, no iptables rules
                "--bridge=none",
                "--iptables=false",
                "--ip-masq=false",
                "--storage-driver=overlay2",
            ],
            env,
        )  # fmt: skip
        self._record_state()
        self._wait("dockerd", lambda: self._quiet([DOCKER, *self._host(), "info"]), dockerd)
        self.docker("container", "prune", "--force")  # containers of a run that was killed

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        assert self.logs is not None
        with open(self.logs / f"{name}.log", "ab") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C reaches us, and we stop them in order
                preexec_fn=_die_with_parent,  # only prctl: safe despite threads
            )
        self._procs.append(proc)
        return proc

    def _record_state(self) -> None:
        self.state_file.write_text(
            json.dumps(
                {
                    "pids": [p.pid for p in self._procs],
                    "run_dir": str(self.run_dir),
                    "containerd_address": self._containerd_address,
                }
            )
        )

    def _wait(self, name: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
        assert self.logs is not None
        deadline = time.monotonic() + DAEMON_START_TIMEOUT
        while not ready():
            if proc.poll() is not None:
                raise ImageBuildError(
                    f"start {name} failed: exited {proc.returncode}; log: {self.logs / name}.log"
                )
            if time.monotonic() > deadline:
                raise ImageBuildError(
                    f"start {name} failed: not ready in {DAEMON_START_TIMEOUT:.0f}s; "
                    f"log: {self.logs / name}.log"
                )
            time.sleep(0.3)

    @staticmethod
    def _quiet(argv: list[str]) -> bool:
        try:
            return subprocess.run(argv, capture_output=True, timeout=20).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    # -- steps ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _step(self, name: str) -> Iterator[None]:
        self.log(f"images: {name} …")
        began = time.monotonic()
        yield
        self.log(f"images: {name}: done in {time.monotonic() - began:.1f}s")

    def _host(self) -> list[str]:
        if self.socket is None:
            raise ImageBuildError("the image builder is not started (use it as a context manager)")
        return ["-H", f"unix://{self.socket}"]

    def _client_env(self) -> dict[str, str]:
        assert self.run_dir is not None
        # Our own client config: no credential helpers or contexts from the user's ~/.docker.
        return {
            "PATH": SYSTEM_PATH,
            "HOME": str(self.run_dir),
            "DOCKER_CONFIG": str(self.run_dir / "client"),
            "DOCKER_BUILDKIT": "1",
        }

    def _log_file(self, step: str) -> Path:
        assert self.logs is not None
        return self.logs / (re.sub(r"[^A-Za-z0-9.-]+", "-", step).strip("-") + ".log")

    def _run_step(
        self, step: str, argv: Sequence[str], timeout: float = STEP_TIMEOUT
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one command with its output in the step's log file; fail naming both."""
        log_file = self._log_file(step)
        with open(log_file, "ab") as out:
            out.write(f"$ {' '.join(argv)}\n".encode())
            out.flush()
            try:
                done = subprocess.run(
                    list(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self._client_env(),
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                raise ImageBuildError(
                    f"{step} failed: timed out after {timeout:.0f}s; log: {log_file}"
                ) from None
        if done.returncode != 0:
            raise ImageBuildError(
                f"{step} failed: exit {done.returncode}; log: {log_file}\n{_tail(log_file)}"
            )
        return done

    def docker(
        self, *args: str, timeout: float = STEP_TIMEOUT, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """The docker client against the private daemon (for tests and tools)."""
        return subprocess.run(
            [DOCKER, *self._host(), *args],
            capture_output=True,
            text=True,
            env=self._client_env(),
            timeout=timeout,
            check=check,
        )

    def image_exists(self, tag: str) -> bool:
        return self.docker("image", "inspect", tag).returncode == 0

    def _inspect(self, tag: str, field: str) -> str:
        out = self.docker("image", "inspect", "--format", f"{{{{.{field}}}}}", tag, check=True)
        return out.stdout.strip()

    def image_size(self, tag: str) -> int:
        return int(self._inspect(tag, "Size"))

    def image_id(self, tag: str) -> str:
        return self._inspect(tag, "Id")


def _tail(path: Path, lines: int = 25) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""
