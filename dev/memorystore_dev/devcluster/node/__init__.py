"""A real kubelet node beside kwok's simulated one, for tests that need pods to really run.

`LocalCluster(tools, real_node=RealNode(tools))` starts, next to the control plane on loopback:
containerd (Debian's, its own config, root, state and socket in the cluster's workdir), the
kubelet and kube-proxy (iptables mode) from the pinned k8s.io/kubernetes module, CoreDNS as a
host process, a relay that lets pods reach the API server, a hostPath provisioner behind a
default StorageClass, and a NetworkPolicy enforcer (kube-network-policies, the first addon:
../netpol.py; `network_policies=False` leaves it out). Needs root and the Debian packages of
`make node-deps`.

Interfaces (for extra host processes such as a NetworkPolicy enforcer)
- Node name `real-node-1` (NODE_NAME), labels `memorystore.dev/node=real` and
  `kubernetes.io/hostname=real-node-1`, taint `memorystore.dev/real-node=true:NoSchedule`
  (REAL_NODE_TAINT): only pods that tolerate it run here, so kwok-based tests are unaffected.
- Linux bridge `msnode0` (BRIDGE) with gateway `10.244.0.1/24` (GATEWAY); pod CIDR
  `10.244.0.0/24` (POD_CIDR) handed out by the CNI bridge + host-local plugins
  (`ipMasq: false`, no default gateway on the host side: the harness owns the address).
  br_netfilter is on, so bridged pod-to-pod frames traverse iptables FORWARD with
  `-i msnode0 -o msnode0`.
- Service CIDR `10.96.0.0/16` (SERVICE_CIDR), DNAT'ed by kube-proxy; a blackhole route drops
  any Service address kube-proxy did not translate. `kubernetes` Service → 10.244.0.1:<API
  port> (a relay to the API server on loopback). Cluster DNS: CoreDNS on 10.244.0.1:53,
  domain `cluster.local`, no upstream resolvers.
- Network safety: the chains MEMORYSTORE-NODE-FWD (first rule of mangle FORWARD) and
  MEMORYSTORE-NODE-OUT (first rule of mangle POSTROUTING) drop anything to or from the pods
  that is not pod-to-pod or pod-to-host, and any Service connection DNAT'ed off the pod
  network. They sit in the mangle table, which the kernel runs before filter, so no filter
  rule (kube-proxy's ACCEPTs, an enforcer's NFQUEUE verdicts) can let a packet past them.
  Addons keep out of mangle FORWARD/POSTROUTING or call `RealNode.ensure_safety_first()`
  after inserting there (the harness calls it after each addon starts anyway).
- Addons: `RealNode(..., addons=[...])` takes objects with `name`, `start(info: NodeInfo)`,
  `alive() -> bool` and `stop()`; they start after the kubelet, kube-proxy and CoreDNS are up
  and stop first. `HostProcess` is the ready-made one: a host process started with argv built
  from the NodeInfo, logged to `<workdir>/logs/<name>.log`, dying with the harness, stopped by
  PID. `NodeInfo.kubeconfig_for(stem, user, group)` issues a client certificate from the
  cluster's CA and writes a kubeconfig for it (bind RBAC to that user yourself), and
  `NodeInfo.admin_kubeconfig` is the cluster admin's.
- Host state is journaled (host.py) and restored at stop, after a failed start and at the
  next start after a SIGKILL. Tests that change host networking should hold `host.host_lock()`
  so they never run beside a node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import yaml

from memorystore_dev.devcluster.node import host, oci
from memorystore_dev.devcluster.node.provisioner import (
    PROVISIONER,
    STORAGE_CLASS,
    HostPathProvisioner,
    storage_class,
)

if TYPE_CHECKING:
    from memorystore_dev.devcluster.cluster import Component, LocalCluster
    from memorystore_dev.devcluster.pki import PKI

Log = Callable[[str], None]

NODE_NAME = "real-node-1"
NODE_LABEL = ("memorystore.dev/node", "real")
REAL_NODE_TAINT = {"key": "memorystore.dev/real-node", "value": "true", "effect": "NoSchedule"}
BRIDGE = "msnode0"
POD_CIDR = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_DOMAIN = "cluster.local"
CGROUP_ROOT = "/memorystore-real-node"
CNI_NETWORK = "memorystore-real-node"
FWD_CHAIN, OUT_CHAIN = host.GUARD_CHAINS
NODE_TOOLS = ("kubelet", "kube-proxy", "coredns", "kube-network-policies")
READY_TIMEOUT = 120.0

# Host commands the node runs, and the Debian package of each (for the error message).
REQUIRED_COMMANDS: dict[str, str] = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "iptables-restore": "iptables",
    "ip6tables-save": "iptables",
    "conntrack": "conntrack",
    "ipset": "ipset",
    "nft": "nftables",
    "ip": "iproute2",
    "gcc": "gcc",
}
CNI_BIN = Path("/usr/lib/cni")
REQUIRED_CNI = ("bridge", "host-local", "portmap", "loopback")


class NodeStartError(RuntimeError):
    """The real node could not start: names the step and the log file to read."""

    def __init__(self, step: str, detail: str, log: Path | None = None) -> None:
        self.step, self.detail, self.log = step, detail, log
        where = f"; log: {log}" if log else ""
        super().__init__(f"real node: step '{step}' failed: {detail}{where}")


def missing_requirements(tools: dict[str, Path] | None = None) -> list[str]:
    """Why a real node cannot start on this machine (empty when it can)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the real node needs root (bridges, iptables, mounts, cgroups)")
    packages: dict[str, list[str]] = {}
    for command, package in REQUIRED_COMMANDS.items():
        if not shutil.which(command, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            packages.setdefault(package, []).append(command)
    for plugin in REQUIRED_CNI:
        if not (CNI_BIN / plugin).is_file():
            packages.setdefault("containernetworking-plugins", []).append(str(CNI_BIN / plugin))
    for package, what in packages.items():
        problems.append(
            f"Debian package {package} is missing (no {', '.join(what)}): run `make node-deps` "
            "as root"
        )
    if (
        not (host.CGROUP_ROOT / "memory").is_dir()
        and not (host.CGROUP_ROOT / "cgroup.controllers").exists()
    ):
        problems.append(f"no cgroup memory controller under {host.CGROUP_ROOT}")
    for tool in NODE_TOOLS if tools is not None else ():
        if tool not in tools:
            problems.append(f"tool {tool} was not built (memorystore dev tools --tools {tool})")
    return problems


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """What an addon needs to know about the running node (see the module docstring)."""

    name: str
    bridge: str
    pod_cidr: str
    gateway: str
    service_cidr: str
    cluster_domain: str
    dns_ip: str
    workdir: Path
    logs: Path
    api_server: str  # the API server URL on loopback
    admin_kubeconfig: Path
    node_kubeconfig: Path  # the kubelet's own (system:node:<name>)
    kubeconfig_for: Callable[[str, str, str | None], Path]
    spawn: Callable[[str, list[str]], Component]


class NodeAddon(Protocol):
    """An extra component of the node, started after it is up and stopped before it."""

    name: str

    def start(self, info: NodeInfo) -> None: ...

    def alive(self) -> bool: ...

    def stop(self) -> None: ...


@dataclasses.dataclass
class HostProcess:
    """An addon that is one host process: `argv(info)` → the command; `ready(info)` polled."""

    name: str
    argv: Callable[[NodeInfo], list[str]]
    ready: Callable[[NodeInfo], bool] | None = None
    ready_timeout: float = 60.0
    component: Component | None = None

    def start(self, info: NodeInfo) -> None:
        """Spawn the process and wait until `ready` says so (or it exits)."""
        self.component = info.spawn(self.name, self.argv(info))
        if self.ready is None:
            return
        deadline = time.monotonic() + self.ready_timeout
        while not self.ready(info):
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.component.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not ready after {self.ready_timeout:.0f} s")
            time.sleep(0.2)

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.component is not None and self.component.process.poll() is None

    def stop(self) -> None:
        """SIGTERM its process group, SIGKILL if it lingers."""
        from memorystore_dev.devcluster.cluster import terminate

        if self.component is not None:
            terminate(self.component.process)


def coredns_corefile(kubeconfig: Path, health: int, ready: int) -> str:
    """The node's Corefile. No `forward`: a name outside the cluster gets an error, and no
    query leaves the machine. Its plugins are the ones build.COREDNS_PLUGINS compiles in."""
    return f""".:53 {{
    bind {GATEWAY}
    errors
    health 127.0.0.1:{health}
    ready 127.0.0.1:{ready}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
}}
"""


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
        self.journal: host.Journal | None = None
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
            leftover = host.Journal.load()
            if leftover is not None and host.pid_alive(leftover.pid):
                # only under an inherited or re-entered lock: never tear down a live node
                raise RuntimeError(f"a real node of pid {leftover.pid} runs on this machine")
            if leftover is not None:
                cluster.log(f"undoing what the real node of pid {leftover.pid} left behind")
                problems = host.teardown(leftover, cluster.log)
                if problems:
                    raise RuntimeError(
                        "the host still holds leftovers of an earlier real node: "
                        + "; ".join(problems)
                    )
                host.Journal.remove()
                host.remove_workdir(leftover.workdir)  # its keys and etcd data, too
        with self._step("host network"):
            conflicts = host.cidr_conflicts([POD_CIDR, SERVICE_CIDR])
            if BRIDGE in host.link_names():
                conflicts.append(f"link {BRIDGE} exists")
            if conflicts:
                raise RuntimeError(
                    f"the pod or Service CIDR ({POD_CIDR}, {SERVICE_CIDR}) is in use here: "
                    + "; ".join(conflicts)
                )
            assert cluster.workdir is not None
            self._wd.mkdir(parents=True, exist_ok=True)
            journal = host.Journal(
                pid=os.getpid(),
                workdir=str(cluster.workdir),
                bridge=BRIDGE,
                pod_cidr=POD_CIDR,
                service_cidr=SERVICE_CIDR,
                cgroup_root=CGROUP_ROOT,
                containerd_socket=str(self.socket),
                kube_proxy=str(self.tools["kube-proxy"]),
                kube_proxy_config=str(self._wd / "kube-proxy.yaml"),
                sysctls={n: v for n in host.SYSCTLS if (v := host.read_sysctl(n)) is not None},
                chains={
                    f"{fam}:{table}": names
                    for fam in (4, 6)
                    for table, names in host.iptables_chains(fam).items()
                },
                netns_before=host.netns_names(),
                nft_tables_before=host.nft_tables(),
                paths_before=host.existing_paths(),
                shim_sockets_before=host.shim_sockets(),
                cni_network=CNI_NETWORK,
            )
            self.journal = journal
            journal.created_bridge = True
            journal.routes = [f"blackhole {SERVICE_CIDR}"]
            journal.save()  # before the first change
            host.run(["ip", "link", "add", BRIDGE, "type", "bridge"])
            host.write_sysctl(f"net.ipv6.conf.{BRIDGE}.disable_ipv6", "1")
            host.run(["ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE])
            host.run(["ip", "link", "set", BRIDGE, "up"])
            # Forwarding for packets that arrive on the bridge only (pod → Service → pod);
            # the machine's own interfaces keep net.ipv4.ip_forward as it was.
            host.write_sysctl(f"net.ipv4.conf.{BRIDGE}.forwarding", "1")
            host.run(["ip", "route", "add", "blackhole", SERVICE_CIDR])
            self._install_safety_chains()
            host.make_cgroups(CGROUP_ROOT)  # the kubelet's cgroupRoot must exist

    def _install_safety_chains(self) -> None:
        """The harness's guards (see the module docstring), each jumped to first in mangle."""
        fwd = [
            f"-A {FWD_CHAIN} -i {BRIDGE} -o {BRIDGE} -j RETURN",
            f"-A {FWD_CHAIN} -i {BRIDGE} -j DROP",
            f"-A {FWD_CHAIN} -o {BRIDGE} -j DROP",
            f"-A {FWD_CHAIN} -s {POD_CIDR} -j DROP",
            f"-A {FWD_CHAIN} -d {POD_CIDR} -j DROP",
            f"-A {FWD_CHAIN} -d {SERVICE_CIDR} -j DROP",
        ]
        out = [
            f"-A {OUT_CHAIN} -m conntrack --ctstate DNAT --ctorigdst {SERVICE_CIDR} "
            f"! -d {POD_CIDR} -j DROP",
            f"-A {OUT_CHAIN} -s {POD_CIDR} ! -d {POD_CIDR} ! -o lo -j DROP",
            f"-A {OUT_CHAIN} -d {SERVICE_CIDR} -j DROP",
        ]
        script = ["*mangle", f":{FWD_CHAIN} - [0:0]", f":{OUT_CHAIN} - [0:0]", *fwd, *out]
        script += [f"-I FORWARD 1 -j {FWD_CHAIN}", f"-I POSTROUTING 1 -j {OUT_CHAIN}"]
        script += ["COMMIT", ""]
        proc = subprocess.run(
            ["iptables-restore", "--noflush"],
            input="\n".join(script),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            raise host.HostError(f"iptables-restore of the safety chains failed: {proc.stderr}")

    def ensure_safety_first(self) -> None:
        """Put the jumps to the safety chains back at position 1 of mangle FORWARD/POSTROUTING."""
        for chain, target in (("FORWARD", FWD_CHAIN), ("POSTROUTING", OUT_CHAIN)):
            mangle = ["iptables", "-t", "mangle"]
            rules = host.run([*mangle, "-S", chain]).splitlines()
            first = next((r for r in rules if r.startswith("-A ")), "")
            if first == f"-A {chain} -j {target}":
                continue
            while f"-A {chain} -j {target}" in rules:
                host.run([*mangle, "-D", chain, "-j", target])
                rules = host.run([*mangle, "-S", chain]).splitlines()
            host.run([*mangle, "-I", chain, "1", "-j", target])

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
            config.write_text(self._containerd_config(pause_ref))
            self._spawn("containerd", ["containerd", f"--config={config}", "--log-level=warn"])
            self._wait("containerd", lambda: self._ctr("version").returncode == 0, 30)
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

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", f"--address={self.socket}", "--namespace=k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def import_image(self, tar: Path) -> None:
        """Import a docker-archive or OCI tar into the node's containerd (namespace k8s.io)."""
        proc = self._ctr("images", "import", "--no-unpack=false", str(tar))
        if proc.returncode != 0:
            proc = self._ctr("images", "import", str(tar))
        if proc.returncode != 0:
            raise RuntimeError(f"ctr images import {tar} failed: {proc.stderr.strip()}")

    def _containerd_config(self, pause_ref: str) -> str:
        wd = self._wd / "containerd"
        cni = self._wd / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        (cni / "net.d" / "10-memorystore.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "0.4.0",
                    "name": CNI_NETWORK,
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": False,  # the harness owns the gateway address
                            "ipMasq": False,  # nothing is NATed out of the machine
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(cni / "ipam"),
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                },
                indent=1,
            )
        )
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return f"""version = 2
root = "{wd / "root"}"
state = "{wd / "state"}"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{wd / "opt"}"

[{cri}]
  sandbox_image = "{pause_ref}"
  # CAP_SYS_RESOURCE is not in this machine's bounding set: a negative oom_score_adj fails.
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  discard_unpacked_layers = false

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
  Root = "{wd / "runc"}"

[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{cni / "net.d"}"
  max_conf_num = 1
"""

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
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": GATEWAY,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "tlsCertFile": str(serving.cert),
            "tlsPrivateKeyFile": str(serving.key),
            "authentication": {
                "x509": {"clientCAFile": str(pki.ca.cert)},
                "webhook": {"enabled": True},
                "anonymous": {"enabled": False},
            },
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": CGROUP_ROOT,
            "cgroupsPerQOS": True,
            "failCgroupV1": False,  # this machine has cgroup v1 only
            "failSwapOn": False,
            "oomScoreAdj": 0,  # no CAP_SYS_RESOURCE for a negative one
            "makeIPTablesUtilChains": False,  # kube-proxy owns iptables
            "protectKernelDefaults": False,  # it sets kernel.panic & co: the journal restores
            "clusterDNS": [GATEWAY],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": "",  # no host resolvers in pods: DNS never leaves the machine
            "podLogsDir": str(wd / "pod-logs"),
            "volumePluginDir": str(wd / "volume-plugins"),
            "registerWithTaints": [REAL_NODE_TAINT],
            "maxPods": 60,
            "serializeImagePulls": False,
            "syncFrequency": "10s",
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "50Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "staticPodPath": "",
        }
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
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "hostnameOverride": NODE_NAME,
            "mode": "iptables",
            "clusterCIDR": POD_CIDR,
            "detectLocalMode": "ClusterCIDR",
            "healthzBindAddress": f"127.0.0.1:{health}",
            "metricsBindAddress": f"127.0.0.1:{metrics}",
            # NodePorts only on the bridge address: never on the machine's own network.
            "nodePortAddresses": [f"{GATEWAY}/32"],
            "iptables": {
                "localhostNodePorts": False,
                "masqueradeAll": False,
                "minSyncPeriod": "0s",
            },
            # 0: leave the machine's conntrack sysctls alone.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "oomScoreAdj": 0,
        }
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
            problems += host.teardown(self.journal, log)
            if not problems:
                host.Journal.remove()
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
            sandboxes = self._ctr("tasks", "ls", "-q")
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


def _coredns_rbac(user: str) -> list[tuple[str, dict[str, Any]]]:
    """What CoreDNS's kubernetes plugin reads, bound to its certificate's user."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "memorystore:coredns"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["endpoints", "services", "pods", "namespaces"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "memorystore:coredns"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "memorystore:coredns",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return [(f"{rbac}/clusterroles", role), (f"{rbac}/clusterrolebindings", binding)]


__all__ = [
    "BRIDGE",
    "CLUSTER_DOMAIN",
    "FWD_CHAIN",
    "GATEWAY",
    "NODE_NAME",
    "OUT_CHAIN",
    "POD_CIDR",
    "PROVISIONER",
    "REAL_NODE_TAINT",
    "SERVICE_CIDR",
    "STORAGE_CLASS",
    "HostProcess",
    "NodeAddon",
    "NodeInfo",
    "NodeStartError",
    "RealNode",
    "missing_requirements",
    "node_ready",
]
