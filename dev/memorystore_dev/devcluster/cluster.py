"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (simulated nodes), started from pinned binaries and stopped by PID.
With `real_node=RealNode(tools)` a real kubelet node joins it too (node/).

The API server runs as in a normal cluster: client-certificate authentication, Node+RBAC
authorization, ServiceAccount token signing and the default admission plugins. Every
process is started in its own session and dies with its parent (PR_SET_PDEATHSIG), so an
interrupted test run leaves nothing behind; `stop()` also removes the working directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx
import yaml

from memorystore_dev.devcluster.pki import PKI, Pair
from memorystore_dev.devcluster.tools import kwok_stages

if TYPE_CHECKING:
    from memorystore_dev.devcluster.node import RealNode

Log = Callable[[str], None]
NODE_NAME = "kwok-node-0"
VOLUMES = 200  # pre-provisioned PersistentVolumes (Retain: each claim uses one up)
SERVICE_CIDR = "10.96.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the parent dies, so no control plane outlives a test."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


def spawn_process(
    name: str,
    argv: list[str],
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    log: Log = print,
) -> Component:
    """Start one component in its own session, logging to `log_path`, dying with its parent."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as out:
        process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only prctl: safe despite threads
        )
    log(f"started {name} (pid {process.pid})")
    return Component(name, process, log_path)


@dataclass
class LocalCluster:
    """`with LocalCluster(tools) as cluster:` → cluster.kubeconfig is a working admin config."""

    tools: dict[str, Path]
    workdir: Path | None = None
    log: Log = print
    components: list[Component] = field(default_factory=list)
    real_node: RealNode | None = None

    def __post_init__(self) -> None:
        self._own_workdir = self.workdir is None
        self.workdir = Path(self.workdir or tempfile.mkdtemp(prefix="memorystore-cluster-"))
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.server = ""
        self.etcd_url = ""  # for tests that check what the API server stored

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> Self:
        started = time.monotonic()
        self.log(f"starting a local cluster in {self.workdir}")
        try:
            self._start()
        except BaseException as exc:
            kept = self._keep_logs() if isinstance(exc, Exception) else None
            self.stop()
            if kept is None:
                raise
            self.log(f"start failed; the logs are kept in {kept}")
            from memorystore_dev.devcluster.node import NodeStartError

            if isinstance(exc, NodeStartError) and exc.log is not None:
                # name the kept copy of the log: the workdir is gone
                raise NodeStartError(exc.step, exc.detail, kept / exc.log.name) from exc
            raise
        self.log(
            f"control plane ready in {time.monotonic() - started:.1f} s; "
            f"KUBECONFIG={self.kubeconfig}"
        )
        return self

    def _keep_logs(self) -> Path | None:
        """Copy the logs of a failed start out of the workdir that `stop` removes."""
        if not self._own_workdir or self.workdir is None or not (self.workdir / "logs").is_dir():
            return None
        kept = Path(tempfile.mkdtemp(prefix="memorystore-cluster-logs-"))
        shutil.copytree(self.workdir / "logs", kept, dirs_exist_ok=True)
        return kept

    def _start(self) -> None:
        assert self.workdir is not None
        pki = PKI(self.workdir / "pki")
        api_port, etcd_port, peer_port = free_port(), free_port(), free_port()
        self.server = f"https://127.0.0.1:{api_port}"
        node = self.real_node
        if node is not None:
            node.prepare(self)  # the bridge address must exist before the API server starts
        serving = pki.issue(
            "apiserver",
            "kube-apiserver",
            server_names=[
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
                "10.96.0.1",
                *([] if node is None else [_node_gateway()]),
            ],
        )
        sa = pki.service_account_keys()
        admin = pki.issue("admin", "kubernetes-admin", "system:masters")
        self._write_kubeconfig(self.kubeconfig, pki.ca.cert, admin)

        etcd_url = self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn(
            "etcd",
            [
                str(self.tools["etcd"]),
                "--name=local",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=local=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",  # a test cluster: speed over durability
                "--log-level=warn",
            ],
        )
        self._wait("etcd", lambda: httpx.get(f"{etcd_url}/health").json()["health"] == "true")

        self._spawn(
            "kube-apiserver",
            [
                str(self.tools["kube-apiserver"]),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={pki.ca.cert}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-issuer={ISSUER}",
                f"--service-account-key-file={sa.cert}",
                f"--service-account-signing-key-file={sa.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--profiling=false",
                "--anonymous-auth=false",
                "--v=1",
                # the default reconciler refuses a loopback address for the kubernetes Service;
                # a real node advertises its bridge address instead and keeps the reconciler
                *(
                    ["--endpoint-reconciler-type=none"]
                    if node is None
                    else node.apiserver_flags(pki)
                ),
            ],
        )
        with self.client() as api:
            self._wait("kube-apiserver", lambda: api.get("/readyz").status_code == 200, 90)

        for name, common in (
            ("kube-controller-manager", "system:kube-controller-manager"),
            ("kube-scheduler", "system:kube-scheduler"),
        ):
            pair = pki.issue(name, common)
            self._write_kubeconfig(self.workdir / f"{name}.kubeconfig", pki.ca.cert, pair)
        kcm = self.workdir / "kube-controller-manager.kubeconfig"
        self._spawn(
            "kube-controller-manager",
            [
                str(self.tools["kube-controller-manager"]),
                f"--kubeconfig={kcm}",
                f"--authentication-kubeconfig={kcm}",
                f"--authorization-kubeconfig={kcm}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--service-account-private-key-file={sa.key}",
                f"--root-ca-file={pki.ca.cert}",
                f"--cluster-signing-cert-file={pki.ca.cert}",
                f"--cluster-signing-key-file={pki.ca.key}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--leader-elect=false",
                "--controllers=*",
                "--v=1",
            ],
        )
        sched = self.workdir / "kube-scheduler.kubeconfig"
        self._spawn(
            "kube-scheduler",
            [
                str(self.tools["kube-scheduler"]),
                f"--kubeconfig={sched}",
                f"--authentication-kubeconfig={sched}",
                f"--authorization-kubeconfig={sched}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        kwok_pair = pki.issue("kwok", "kwok", "system:masters")
        kwok_cfg = self.workdir / "kwok.kubeconfig"
        self._write_kubeconfig(kwok_cfg, pki.ca.cert, kwok_pair)
        self._spawn(
            "kwok",
            [
                str(self.tools["kwok"]),
                f"--kubeconfig={kwok_cfg}",
                f"--config={kwok_stages()}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--manage-nodes-with-label-selector=",
                "--manage-single-node=",
                # simulated pod IPs never overlap the real node's pod CIDR (10.244.0.0/24)
                f"--cidr={'10.244.0.0/16' if node is None else '10.245.0.0/16'}",
                "--node-ip=10.0.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{free_port()}",
            ],
        )
        with self.client() as api:
            api.post("/api/v1/nodes", json=_fake_node()).raise_for_status()
            for i in range(VOLUMES):
                api.post("/api/v1/persistentvolumes", json=static_volume(i)).raise_for_status()
            self._wait("node", lambda: _node_ready(api), 60)
            # the ServiceAccount controller (kube-controller-manager) is working
            self._wait(
                "kube-controller-manager",
                lambda: (
                    api.get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200
                ),
                60,
            )
        if node is not None:
            node.start(self, pki)

    def stop(self) -> None:
        """SIGTERM each process group, newest first; SIGKILL what lingers; remove the dir.

        A real node stops first (it drains its pods through the API) and restores the host.
        """
        if self.real_node is not None:
            self.real_node.stop()
        for component in reversed(self.components):
            terminate(component.process)
        self.components.clear()
        if self._own_workdir and self.workdir and self.workdir.exists():
            held = [m for m in _mount_points() if m.startswith(f"{self.workdir}/")]
            if held:
                # Never delete through a mount (a pod volume could be bound to a host folder).
                self.log(f"kept {self.workdir}: still mounted there: {held[:5]}")
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- helpers -------------------------------------------------------------------------

    @contextlib.contextmanager
    def client(self) -> Iterator[httpx.Client]:
        """An HTTP client authenticated as the cluster admin."""
        assert self.workdir is not None
        pki_dir = self.workdir / "pki"
        tls = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        tls.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))
        with httpx.Client(base_url=self.server, verify=tls, timeout=10) as client:
            yield client

    def pids(self) -> list[int]:
        return [c.process.pid for c in self.components]

    def _spawn(self, name: str, argv: list[str]) -> None:
        assert self.workdir is not None
        log = self.workdir / "logs" / f"{name}.log"
        self.components.append(spawn_process(name, argv, log, log=self.log))

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            for component in self.components:
                if component.process.poll() is not None:
                    tail = component.log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{component.name} exited while waiting for {what}:\n{tail}")
            try:
                if ready():
                    return
            except Exception as exc:  # not up yet
                last = exc
            time.sleep(0.1)
        raise TimeoutError(f"{what} not ready after {timeout:.0f} s (last error: {last!r})")

    def write_kubeconfig(self, path: Path, ca: Path, user: Pair) -> None:
        """A kubeconfig for `user` against this API server (on loopback)."""
        self._write_kubeconfig(path, ca, user)

    def _write_kubeconfig(self, path: Path, ca: Path, user: Pair) -> None:
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.server, "certificate-authority": str(ca)},
                }
            ],
            "users": [
                {
                    "name": "user",
                    "user": {"client-certificate": str(user.cert), "client-key": str(user.key)},
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
            "current-context": "local",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)


def _mount_points() -> list[str]:
    """Mount points of this mount namespace."""
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]


def _node_gateway() -> str:
    """The real node's bridge address, where pods reach the API server."""
    from memorystore_dev.devcluster.node import GATEWAY

    return GATEWAY


def terminate(process: subprocess.Popen[bytes], grace: float = 10) -> None:
    """SIGTERM a component's process group; SIGKILL it after `grace` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace)


def _fake_node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": NODE_NAME,
                "type": "kwok",
            },
        },
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "500"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "500"},
        },
    }


def static_volume(i: int) -> dict[str, Any]:
    """A pre-provisioned volume on the simulated node: no storage provisioner runs here, so
    claims without a StorageClass bind to these (static provisioning), as on bare metal."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"local-pv-{i:03d}", "labels": {"memorystore.dev/local": "true"}},
        "spec": {
            "capacity": {"storage": "20Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": f"/tmp/kwok-volumes/{i:03d}"},
        },
    }


def _node_ready(api: httpx.Client) -> bool:
    node = api.get(f"/api/v1/nodes/{NODE_NAME}").json()
    conditions = node.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
