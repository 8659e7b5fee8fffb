"""Build the project's two images on this machine: a private dockerd, a local Debian base.

Why: no container registry is reachable here (so `FROM python:…` cannot be pulled) and no
Docker engine runs by default. This harness starts its own containerd and dockerd (own
data-root in the user cache, own exec-root and sockets in a temp dir, no bridge, no
iptables changes), makes a Debian base with debootstrap once and `docker import`s it, and
builds the repo's Dockerfile targets on it through `--build-arg BASE_IMAGE`. It installs
nothing: the Debian packages come from `make node-deps` (run as root).

Layer caching across runs comes from the persistent data-root; nothing depends on it
existing. Each step is logged with its time; a failed step raises `ImageBuildError`
naming the step and its log file. The daemons are stopped by PID at the end, also on
failure, and any mount left under the temp dir is removed.

    python -m memorystore_dev.devcluster.images [--target operator] [--save DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

Log = Callable[[str], None]

# The checkout this module runs from (dev/memorystore_dev/devcluster/): Dockerfile, sources.
REPO_ROOT = Path(__file__).resolve().parents[3]
TARGETS = ("memory-service", "operator")
# What the chart and the operator name by default, so an imported image needs no pull.
IMAGE_REPOSITORY = "ghcr.io/memorystore"
# The host's CA bundle reaches the build's install steps as a BuildKit secret (never a layer).
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HOST_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_REPO = "memorystore-base/debian"
DEFAULT_VARIANT = "minbase"
# Bump when the way the base is made changes, so the cache key changes with it.
BASE_RECIPE = "2"
# Slim like Debian's own container images: no docs, man pages or translations, no .deb cache.
SLIM_DPKG = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
"""
SLIM_APT = """\
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Install-Recommends "false";
"""
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
DEBOOTSTRAP_TIMEOUT = 1200.0
BUILD_TIMEOUT = 2400.0
STEP_TIMEOUT = 600.0
KEEP_LOG_RUNS = 5
BUILD_CACHE_KEEP = "4GB"


class ImageBuildError(RuntimeError):
    """A step failed; the message names the step and the log file that says why."""


class MissingPackageError(ImageBuildError):
    """A Debian package the harness needs is not installed."""


@dataclasses.dataclass(frozen=True)
class BuiltImage:
    target: str
    tag: str
    image_id: str
    size_bytes: int
    seconds: float
    log: Path  # BuildKit's plain progress: which steps ran and which came from the cache

    @property
    def size_mb(self) -> float:
        return self.size_bytes / 1e6


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when we die, so a killed test still stops dockerd
    cleanly (a later run reaps whatever is left, from the state file)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memorystore" / "docker"


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


def project_version(root: Path = REPO_ROOT) -> str:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]


def default_tag(target: str, root: Path = REPO_ROOT) -> str:
    return f"{IMAGE_REPOSITORY}/{target}:{project_version(root)}"


def host_suite() -> str:
    """The host's Debian codename: the base matches the machine the tests run on."""
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"') or "bookworm"
    return "bookworm"


def host_mirror(sources: Path = HOST_SOURCES) -> str:
    """The apt mirror the host is configured with (the only one reachable here)."""
    with contextlib.suppress(OSError):
        for stanza in sources.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1) for line in stanza.splitlines() if re.match(r"^\w[\w-]*:", line)
            )
            uris, suites = fields.get("URIs", "").split(), fields.get("Suites", "").split()
            if uris and any(not s.endswith(("-security", "-updates")) for s in suites):
                return uris[0]
    return DEFAULT_MIRROR


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


class ImageBuilder:
    """A private Docker engine for building and trying the project's images.

    with ImageBuilder() as builder:
        images = builder.build_all()
        archive = builder.save(images["operator"].tag)   # for `ctr -n k8s.io images import`
    """

    def __init__(
        self,
        root: Path = REPO_ROOT,
        cache: Path | None = None,
        *,
        suite: str | None = None,
        mirror: str | None = None,
        variant: str = DEFAULT_VARIANT,
        log: Log = _stderr,
    ) -> None:
        self.root = root
        self.cache = cache or cache_dir()
        self.suite = suite or host_suite()
        self.mirror = mirror or host_mirror()
        self.variant = variant
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
        self._builds = itertools.count(1)

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> ImageBuilder:
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

    def base_key(self) -> str:
        """Suite + mirror + variant (+ the apt sources put in it and the recipe version)."""
        parts = [BASE_RECIPE, self.suite, self.mirror, self.variant, self._sources_for_base()]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]

    def base_tag(self) -> str:
        return f"{BASE_REPO}:{self.suite}-{self.variant}-{self.base_key()}"

    def _sources_for_base(self) -> str:
        """The host's deb822 sources (updates and security too) when the suites match."""
        with contextlib.suppress(OSError):
            text = HOST_SOURCES.read_text()
            if self.suite == host_suite() and self.mirror in text:
                return text
        return ""

    def ensure_base(self) -> str:
        """The Debian base image, made once per key and rebuilt whenever it is missing."""
        tag = self.base_tag()
        if self.image_exists(tag):
            self.log(f"images: base {tag} cached")
            return tag
        rootfs = self.cache / f"rootfs-{self.base_key()}"
        _remove_tree(rootfs)  # a half-made tree from a killed run
        try:
            with self._step(f"debootstrap {self.suite} ({self.variant}) from {self.mirror}"):
                self._run_step(
                    "debootstrap",
                    [
                        "/usr/sbin/debootstrap",
                        f"--variant={self.variant}",
                        self.suite,
                        str(rootfs),
                        self.mirror,
                    ],
                    timeout=DEBOOTSTRAP_TIMEOUT,
                )
                unmount_under(rootfs)  # debootstrap mounts /proc and /sys inside; be sure
                sources = self._sources_for_base()
                if sources:
                    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(sources)
                    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
                _slim(rootfs)
            with self._step(f"docker import {tag}"):
                self._import(rootfs, tag)
        finally:
            _remove_tree(rootfs)
        listed = self.docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", BASE_REPO)
        for stale in set(listed.stdout.split()) - {tag}:  # bases of an older key
            self.docker("image", "rm", stale)
        return tag

    def _import(self, rootfs: Path, tag: str) -> None:
        log_file = self._log_file("docker-import")
        tar_argv = ["tar", "-C", str(rootfs), "--numeric-owner"]
        tar_argv += [f"--exclude=./{d}/*" for d in ("dev", "proc", "sys", "run", "tmp")]
        tar_argv += ["-c", "."]
        import_argv = [DOCKER, *self._host(), "import"]
        import_argv += ["--change", f"ENV PATH={SYSTEM_PATH}", "--change", "ENV LANG=C.UTF-8"]
        import_argv += ["--change", 'CMD ["/bin/bash"]', "-", tag]
        with open(log_file, "ab") as out:
            tar = subprocess.Popen(tar_argv, stdout=subprocess.PIPE, stderr=out)
            assert tar.stdout is not None
            try:
                done = subprocess.run(
                    import_argv,
                    stdin=tar.stdout,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self._client_env(),
                    timeout=STEP_TIMEOUT,
                )
            finally:
                tar.stdout.close()
                tar_rc = tar.wait(timeout=STEP_TIMEOUT)
        if tar_rc != 0 or done.returncode != 0:
            raise ImageBuildError(
                f"docker import failed: tar exit {tar_rc}, import exit {done.returncode}; "
                f"log: {log_file}\n{_tail(log_file)}"
            )

    def build(self, target: str, tag: str | None = None) -> BuiltImage:
        """One Dockerfile target on the local base; the build's RUN steps use the host network."""
        if target not in TARGETS:
            raise ValueError(f"target {target!r} is not one of {', '.join(TARGETS)}")
        tag = tag or default_tag(target, self.root)
        base = self.ensure_base()
        argv = [DOCKER, *self._host(), "build", "--progress", "plain", "--network", "host"]
        argv += ["--target", target, "--tag", tag, "--build-arg", f"BASE_IMAGE={base}"]
        if CA_BUNDLE.is_file():
            argv += ["--secret", f"id=ca-bundle,src={CA_BUNDLE}"]
        argv.append(str(self.root))
        began = time.monotonic()
        step = f"build-{target}-{next(self._builds)}"
        with self._step(f"docker build --target {target} ({tag})"):
            self._run_step(step, argv, timeout=BUILD_TIMEOUT)
        seconds = time.monotonic() - began
        size, log = self.image_size(tag), self._log_file(step)
        built = BuiltImage(target, tag, self.image_id(tag), size, seconds, log)
        self.docker("image", "prune", "--force")  # what the new tag replaced: the cache stays small
        self.log(f"images: {tag}: {built.size_mb:.0f} MB")
        return built

    def build_all(self) -> dict[str, BuiltImage]:
        return {target: self.build(target) for target in TARGETS}

    def save(self, tag: str, dest: Path | None = None) -> Path:
        """A docker-archive tar of one image, for `ctr -n k8s.io images import PATH`."""
        folder = dest or self.cache / "archives"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (re.sub(r"[^A-Za-z0-9.-]+", "_", tag) + ".tar")
        partial = path.with_suffix(".tar.partial")
        with self._step(f"docker save {tag}"):
            self._run_step(f"save-{tag}", [DOCKER, *self._host(), "save", "-o", str(partial), tag])
        partial.replace(path)  # a killed save never looks finished
        return path


def _slim(rootfs: Path) -> None:
    """What Debian's own container images leave out, now and for later apt installs."""
    (rootfs / "etc/dpkg/dpkg.cfg.d/memorystore-slim").write_text(SLIM_DPKG)
    (rootfs / "etc/apt/apt.conf.d/memorystore-slim").write_text(SLIM_APT)
    doomed = [
        *rootfs.glob("var/cache/apt/archives/*.deb"),
        *rootfs.glob("var/cache/apt/*.bin"),
        *rootfs.glob("var/lib/apt/lists/*"),
        *rootfs.glob("usr/share/man/*"),
        *rootfs.glob("usr/share/info/*"),
        *rootfs.glob("usr/share/groff/*"),
        *rootfs.glob("usr/share/lintian/*"),
        *rootfs.glob("usr/share/locale/*"),
    ]
    for doc in rootfs.glob("usr/share/doc/*"):
        if doc.is_dir() and not doc.is_symlink():  # a symlinked doc dir is another's
            doomed += [item for item in doc.iterdir() if item.name != "copyright"]
    for path in doomed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.name != "lock":  # apt's lock files stay
            path.unlink(missing_ok=True)


def _tail(path: Path, lines: int = 25) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memorystore_dev.devcluster.images",
        description="Build the memory-service and operator images with a private dockerd "
        "on a local Debian base (root; packages from `make node-deps`).",
    )
    parser.add_argument("--target", choices=TARGETS, action="append", help="default: both")
    parser.add_argument("--save", type=Path, metavar="DIR", help="also write docker-archive tars")
    args = parser.parse_args(argv)
    try:
        with ImageBuilder() as builder:
            for target in args.target or TARGETS:
                built = builder.build(target)
                print(f"{built.tag}\t{built.size_mb:.0f} MB\t{built.seconds:.1f}s")
                if args.save:
                    print(f"  saved: {builder.save(built.tag, args.save)}")
    except ImageBuildError as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
