"""The real node's lifecycle: prepare the host, start the components in order, stop, restore.

Why one driver: LocalCluster calls `prepare` before the API server starts (the bridge address
it advertises must exist), `start` once the control plane is up, and `stop` at the end. Each
step is timed, a failure names the step and its log, and `stop` restores the host from the
journal whatever the start reached.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import yaml

from memorystore_dev.devcluster.node import containerd, host, network, oci
from memorystore_dev.devcluster.node.addons import NodeAddon, NodeInfo
from memorystore_dev.devcluster.node.cgroups import make_cgroups
from memorystore_dev.devcluster.node.cni import write_cni_config
from memorystore_dev.devcluster.node.coredns import _coredns_rbac, coredns_corefile
from memorystore_dev.devcluster.node.journal import Journal, new_journal
from memorystore_dev.devcluster.node.kubelet import kube_proxy_config, kubelet_config
from memorystore_dev.devcluster.node.processes import pid_alive
from memorystore_dev.devcluster.node.provisioner import HostPathProvisioner, storage_class
from memorystore_dev.devcluster.node.requirements import missing_requirements
from memorystore_dev.devcluster.node.settings import (
    BRIDGE,
    CGROUP_ROOT,
    CLUSTER_DOMAIN,
    GATEWAY,
    NODE_LABEL,
    NODE_NAME,
    POD_CIDR,
    SERVICE_CIDR,
)
from memorystore_dev.devcluster.node.teardown import remove_workdir, teardown

if TYPE_CHECKING:
    from memorystore_dev.devcluster.cluster import Component, LocalCluster
    from memorystore_dev.devcluster.pki import PKI

__all__ = ["READY_TIMEOUT", "NodeStartError", "RealNode", "node_ready", "undo_leftovers"]

READY_TIMEOUT = 120.0


def undo_leftovers(log: Callable[[str], None]) -> bool:
    """Undo what a real node killed before its teardown left on the host (its journal says
    what); True when there was something to undo. Call it under the host lock: a harness that
    snapshots the host first calls this, so an earlier run killed by a timeout or a lost
    session is cleaned up instead of counted as this run's change."""
    leftover = Journal.load()
    if leftover is None:
        return False
    if pid_alive(leftover.pid):
        # only under an inherited or re-entered lock: never tear down a live node
        raise RuntimeError(f"a real node of pid {leftover.pid} runs on this machine")
    log(f"undoing what the real node of pid {leftover.pid} left behind")
    problems = teardown(leftover, log)
    if problems:
        raise RuntimeError(
            "the host still holds leftovers of an earlier real node: " + "; ".join(problems)
        )
    Journal.remove()
    remove_workdir(leftover.workdir)  # its keys and etcd data, too
    return True


class NodeStartError(RuntimeError):
    """The real node could not start: names the step and the log file to read."""

    def __init__(self, step: str, detail: str, log: Path | None = None) -> None:
        self.step, self.detail, self.log = step, detail, log
        where = f"; log: {log}" if log else ""
        super().__init__(f"real node: step '{step}' failed: {detail}{where}")


class RealNode:
    """The real node's lifecycle; driven by LocalCluster (prepare → start → stop)."""

    def __init__(
        self,
        tools: dict[str, Path],
        addons: Sequence[NodeAddon] = (),
        lock_timeout: float = 900,
        ready_timeout: float = READY_TIMEOUT,
        network_policies: bool = True,
        on_stopped: Callable[[], None] | None = None,
    ) -> None:
        self.tools = tools
        self.addons = list(addons)
        # Called once the host is restored, still under the host lock (a test's "after").
        self.on_stopped = on_stopped
        if network_policies:  # a real cluster enforces NetworkPolicies; so does this node
            from memorystore_dev.devcluster.netpol import ENFORCER, NetworkPolicyEnforcer

            binary = tools.get(ENFORCER, Path(ENFORCER))  # preflight names a missing tool
            self.addons.insert(0, NetworkPolicyEnforcer(binary))
        self.lock_timeout = lock_timeout
        self.ready_timeout = ready_timeout
        self.components: list[Component] = []
        self.journal: Journal | None = None
        self.provisioner: HostPathProvisioner | None = None
        self.teardown_problems: list[str] = []
        self.timings: dict[str, float] = {}
        self._lock: contextlib.ExitStack | None = None
        self._cluster: LocalCluster | None = None
        self._started_addons: list[NodeAddon] = []
        self.info: NodeInfo | None = None

    # --- paths ----------------------------------------------------------------------------

    @property
    def _wd(self) -> Path:
        assert self._cluster is not None and self._cluster.workdir is not None
        return self._cluster.workdir / "node"

    @property
    def socket(self) -> Path:
        """containerd's CRI socket."""
        return self._wd / "containerd" / "containerd.sock"

    def _log_of(self, name: str) -> Path:
        assert self._cluster is not None and self._cluster.workdir is not None
        return self._cluster.workdir / "logs" / f"{name}.log"

    # --- the steps ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _step(self, name: str, log_name: str | None = None) -> Iterator[None]:
        """Time a step; any failure becomes a NodeStartError naming it and its log."""
        assert self._cluster is not None
        t0 = time.monotonic()
        try:
            yield
        except NodeStartError:
            raise
        except Exception as exc:
            log = self._log_of(log_name) if log_name else None
            raise NodeStartError(name, str(exc), log) from exc
        self.timings[name] = time.monotonic() - t0
        self._cluster.log(f"real node: {name} ({self.timings[name]:.1f} s)")

    def prepare(self, cluster: LocalCluster) -> None:
        """Before the API server starts: preflight, the host lock, the bridge and safety rules."""
        self._cluster = cluster
        with self._step("preflight"):
            problems = missing_requirements(self.tools)
            if problems:
                raise RuntimeError("; ".join(problems))
        with self._step("host lock"):
            stack = contextlib.ExitStack()
            stack.enter_context(host.host_lock(self.lock_timeout, log=cluster.log))
            self._lock = stack
            undo_leftovers(cluster.log)
        with self._step("host network"):
            conflicts = network.network_conflicts()
            if conflicts:
                raise RuntimeError(
                    f"the pod or Service CIDR ({POD_CIDR}, {SERVICE_CIDR}) is in use here: "
                    + "; ".join(conflicts)
                )
            assert cluster.workdir is not None
            self._wd.mkdir(parents=True, exist_ok=True)
            journal = new_journal(
                cluster.workdir, self.socket, self.tools["kube-proxy"], self._wd / "kube-proxy.yaml"
            )
            self.journal = journal
            network.make_network(journal)  # journaled before each change
            make_cgroups(CGROUP_ROOT)  # the kubelet's cgroupRoot must exist

    def ensure_safety_first(self) -> None:
        """Put the jumps to the safety chains back at position 1 of mangle FORWARD/POSTROUTING."""
        network.ensure_safety_first()

    def apiserver_flags(self, pki: PKI) -> list[str]:
        """Flags that let the API server advertise the bridge address and reach the kubelet."""
        kubelet_client = pki.issue(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"
        )
        return [
            f"--advertise-address={GATEWAY}",
            "--endpoint-reconciler-type=lease",
            f"--kubelet-client-certificate={kubelet_client.cert}",
            f"--kubelet-client-key={kubelet_client.key}",
            f"--kubelet-certificate-authority={pki.ca.cert}",
            "--kubelet-preferred-address-types=InternalIP",
            "--enable-admission-plugins=NodeRestriction",
        ]

    def start(self, cluster: LocalCluster, pki: PKI) -> None:
        """After the control plane is up: containerd, kubelet, kube-proxy, DNS, storage, addons."""
        from memorystore_dev.devcluster.cluster import free_port

        self._cluster = cluster
        wd = self._wd
        with self._step("pause image"):
            pause_tar, pause_ref = oci.pause_image()
        with self._step("containerd", "containerd"):
            config = wd / "containerd" / "config.toml"
            config.parent.mkdir(parents=True, exist_ok=True)
            write_cni_config(wd / "cni")
            config.write_text(
                containerd.containerd_config(wd / "containerd", wd / "cni", self.socket, pause_ref)
            )
            self._spawn("containerd", ["containerd", f"--config={config}", "--log-level=warn"])
            self._wait(
                "containerd", lambda: containerd.ctr(self.socket, "version").returncode == 0, 30
            )
        with self._step("pause image import", "containerd"):
            self.import_image(pause_tar)
        with self._step("kubelet", "kubelet"):
            node_kubeconfig = self._kubelet(pki, free_port)
        with self._step("kube-proxy", "kube-proxy"):
            proxy_health = free_port()
            self._kube_proxy(pki, proxy_health, free_port())
            self._wait(
                "kube-proxy",
                lambda: httpx.get(f"http://127.0.0.1:{proxy_health}/healthz").status_code == 200,
                60,
            )
            self._wait("kube-proxy rules", self._service_rule_present, 60)
            self.ensure_safety_first()
        with self._step("api relay", "api-relay"):
            port = int(cluster.server.rsplit(":", 1)[1])
            self._spawn(
                "api-relay",
                [
                    sys.executable,
                    "-m",
                    "memorystore_dev.devcluster.node.relay",
                    f"{GATEWAY}:{port}",
                    f"127.0.0.1:{port}",
                ],
                env={**os.environ, "PYTHONSAFEPATH": "1"},
            )
            self._wait("api relay", lambda: _tcp_open(GATEWAY, port), 30)
        with self._step("coredns", "coredns"):
            ready = self._coredns(pki, free_port)
            self._wait(
                "coredns",
                lambda: httpx.get(f"http://127.0.0.1:{ready}/ready").status_code == 200,
                60,
            )
        with self._step("storage", "provisioner"):
            with cluster.client() as api:
                made = api.post("/apis/storage.k8s.io/v1/storageclasses", json=storage_class())
                if made.status_code not in (201, 409):
                    made.raise_for_status()
            self.provisioner = HostPathProvisioner(
                cluster.client, wd / "volumes", self._log_of("provisioner"), NODE_NAME
            )
            self.provisioner.start()
        self.info = NodeInfo(
            name=NODE_NAME,
            bridge=BRIDGE,
            pod_cidr=POD_CIDR,
            gateway=GATEWAY,
            service_cidr=SERVICE_CIDR,
            cluster_domain=CLUSTER_DOMAIN,
            dns_ip=GATEWAY,
            workdir=wd,
            logs=self._log_of("x").parent,
            api_server=cluster.server,
            admin_kubeconfig=cluster.kubeconfig,
            node_kubeconfig=node_kubeconfig,
            kubeconfig_for=lambda stem, user, group: self._kubeconfig(pki, stem, user, group),
            spawn=lambda name, argv: self._spawn(name, argv),
        )
        for addon in self.addons:
            with self._step(f"addon {addon.name}", addon.name):
                self._started_addons.append(addon)
                addon.start(self.info)
                self.ensure_safety_first()
        with self._step("node ready", "kubelet"), cluster.client() as api:
            self._wait("node Ready", lambda: node_ready(api), 30)

    # --- components -----------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Component:
        from memorystore_dev.devcluster.cluster import spawn_process

        assert self._cluster is not None
        component = spawn_process(
            name, argv, self._log_of(name), env=env, cwd=self._wd, log=self._cluster.log
        )
        self.components.append(component)
        return component

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        """Poll `ready`; fail early when any node or control-plane component exits."""
        assert self._cluster is not None
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                if ready():
                    return
            except Exception as exc:  # not up yet
                last = exc
            time.sleep(0.2)
        raise TimeoutError(f"{what} not ready after {timeout:.0f} s (last error: {last!r})")

    def check_alive(self) -> None:
        """Raise naming the first node component (or addon) that is no longer running."""
        for component in self.components:
            if component.process.poll() is not None:
                tail = component.log.read_text(errors="replace")[-1500:]
                raise NodeStartError(
                    component.name,
                    f"{component.name} exited with {component.process.returncode}:\n{tail}",
                    component.log,
                )
        if self.provisioner is not None and not self.provisioner.alive():
            raise NodeStartError(
                "storage", "the provisioner thread died", self._log_of("provisioner")
            )
        for addon in self._started_addons:
            if not addon.alive():
                raise NodeStartError(
                    f"addon {addon.name}", f"{addon.name} stopped", self._log_of(addon.name)
                )

    def import_image(self, tar: Path) -> None:
        """Import a docker-archive or OCI tar into the node's containerd (namespace k8s.io)."""
        containerd.import_image(self.socket, tar)

    def kill_container(self, container_id: str) -> None:
        """SIGKILL a container's process through the node's containerd, as the kernel's OOM
        killer would (`containerd://ID`, as a pod's status names it): the kubelet restarts it."""
        found = containerd.ctr(
            self.socket, "tasks", "kill", "--signal", "SIGKILL",
            container_id.removeprefix("containerd://"),
        )  # fmt: skip
        if found.returncode != 0:
            raise RuntimeError(f"ctr tasks kill {container_id} failed: {found.stderr.strip()}")

    def _kubeconfig(self, pki: PKI, stem: str, user: str, group: str | None) -> Path:
        """A client certificate from the cluster CA and a kubeconfig (API on loopback)."""
        assert self._cluster is not None
        pair = pki.issue(stem, user, group)
        path = self._wd / f"{stem}.kubeconfig"
        self._cluster.write_kubeconfig(path, pki.ca.cert, pair)
        return path

    def _kubelet(self, pki: PKI, free_port: Callable[[], int]) -> Path:
        wd = self._wd
        kubeconfig = self._kubeconfig(pki, "kubelet", f"system:node:{NODE_NAME}", "system:nodes")
        serving = pki.issue(
            "kubelet-serving",
            f"system:node:{NODE_NAME}",
            "system:nodes",
            server_names=[GATEWAY, NODE_NAME],
        )
        config = kubelet_config(wd, self.socket, pki.ca.cert, serving, free_port(), free_port())
        path = wd / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        self._spawn(
            "kubelet",
            [
                str(self.tools["kubelet"]),
                f"--config={path}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={wd / 'kubelet'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={GATEWAY}",
                f"--node-labels={NODE_LABEL[0]}={NODE_LABEL[1]}",
                "--v=1",
            ],
        )
        assert self._cluster is not None
        with self._cluster.client() as api:
            self._wait(f"node {NODE_NAME} Ready", lambda: node_ready(api), self.ready_timeout)
        return kubeconfig

    def _kube_proxy(self, pki: PKI, health: int, metrics: int) -> None:
        kubeconfig = self._kubeconfig(pki, "kube-proxy", "system:kube-proxy", None)
        config = kube_proxy_config(kubeconfig, health, metrics)
        path = self._wd / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        self._spawn("kube-proxy", [str(self.tools["kube-proxy"]), f"--config={path}", "--v=1"])

    def _service_rule_present(self) -> bool:
        """kube-proxy has programmed the `kubernetes` Service (so it saw the API's endpoints)."""
        rules = host.run(["iptables-save", "-t", "nat"], check=False)
        return "default/kubernetes:https" in rules and "KUBE-SEP-" in rules

    def _coredns(self, pki: PKI, free_port: Callable[[], int]) -> int:
        assert self._cluster is not None
        user = "memorystore:coredns"
        with self._cluster.client() as api:
            for url, body in _coredns_rbac(user):
                made = api.post(url, json=body)
                if made.status_code not in (201, 409):
                    made.raise_for_status()
        kubeconfig = self._kubeconfig(pki, "coredns", user, None)
        health, ready = free_port(), free_port()
        corefile = self._wd / "Corefile"
        corefile.write_text(coredns_corefile(kubeconfig, health, ready))
        self._spawn("coredns", [str(self.tools["coredns"]), "-conf", str(corefile)])
        return ready

    # --- stopping -------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Stop everything of the node and restore the host; returns problems (also logged)."""
        from memorystore_dev.devcluster.cluster import terminate

        cluster = self._cluster
        log = cluster.log if cluster is not None else print
        problems: list[str] = []
        if not (self.components or self._started_addons or self.journal or self._lock):
            return problems  # never started, or already stopped
        t0 = time.monotonic()
        for addon in reversed(self._started_addons):
            try:
                addon.stop()
            except Exception as exc:  # the rest must still stop
                problems.append(f"addon {addon.name}: {exc}")
        self._started_addons.clear()
        if self.provisioner is not None:
            self.provisioner.stop()
            self.provisioner = None
        if cluster is not None and any(c.name == "kubelet" for c in self.components):
            with contextlib.suppress(Exception):
                self._drain(cluster)
        for component in reversed(self.components):
            terminate(component.process)
        self.components.clear()
        if self.journal is not None:
            problems += teardown(self.journal, log)
            if not problems:
                Journal.remove()
            self.journal = None
        if self.on_stopped is not None:
            try:
                self.on_stopped()
            except Exception as exc:
                problems.append(f"on_stopped: {exc}")
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        self.teardown_problems = problems
        for problem in problems:
            log(f"real node teardown problem: {problem}")
        log(f"real node stopped and the host restored in {time.monotonic() - t0:.1f} s")
        return problems

    def _drain(self, cluster: LocalCluster) -> None:
        """Delete the node's pods so the kubelet tears their sandboxes down the normal way."""
        with cluster.client() as api:
            pods = api.get(
                "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={NODE_NAME}"}
            ).json()["items"]
            for pod in pods:
                meta = pod["metadata"]
                api.delete(
                    f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                    params={"gracePeriodSeconds": 0},
                )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            sandboxes = containerd.ctr(self.socket, "tasks", "ls", "-q")
            if sandboxes.returncode != 0 or not sandboxes.stdout.strip():
                return
            time.sleep(0.5)


def node_ready(api: httpx.Client, name: str = NODE_NAME) -> bool:
    """Whether the node reports Ready=True."""
    node = api.get(f"/api/v1/nodes/{name}")
    if node.status_code != 200:
        return False
    conditions = node.json().get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _tcp_open(address: str, port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((address, port)) == 0
