"""The real test node's NetworkPolicy enforcer: upstream kube-network-policies, fed by an
iptables NFQUEUE rule the harness installs itself. Test harness only, never in the product.

Why: the product's isolation rests on NetworkPolicies (a store's memory service admits only
its agent pods; only the service reaches Qdrant), and a cluster enforces them only when
something on the node does. kube-network-policies (sigs.k8s.io, pinned in versions.py) takes
the first packet of each new connection from an NFQUEUE and decides in user space from the
pods, namespaces and NetworkPolicies it watches. What was checked on this machine:

- Its own dataplane installs the queue rule with nftables' `queue` expression, which this
  kernel lacks (CONFIG_NFT_QUEUE is off): the install fails atomically (nothing is left) with
  `netlink receive: no such file or directory`; it retries, gives up and keeps deciding for
  whatever reaches its queue.
- The xtables NFQUEUE target is built in (iptables-nft installs `target name NFQUEUE`), so
  the harness installs the equivalent rule: chain CHAIN in the mangle table, jumped to from
  the end of FORWARD, queues every NEW connection from or to the pod CIDR. Bridged
  pod-to-pod frames traverse FORWARD through br_netfilter; Service traffic does so after
  kube-proxy's DNAT, so the decision sees the destination pod. A verdict ACCEPT ends only
  the table it was given in, so kube-proxy's filter rules still see every admitted packet;
  the jump is appended so that the real node's guard chain (first in mangle FORWARD) has
  already dropped anything leaving the pod network. `--queue-bypass`: with no reader the
  packet passes (the enforcer stopped or not yet up); a test expecting a refusal fails then.

What is enforced: connections between pods (pod → pod, pod → Service → pod), Ingress and
Egress, decided once per connection (an established connection outlives a new policy, as
upstream). Not enforced: traffic between a pod and the host itself (kubelet probes, CoreDNS
and the API relay on the bridge address take INPUT/OUTPUT, not FORWARD; upstream exempts
node traffic too). ipBlock peers match pod IPs as well (upstream's reading).

Running it as a host process: it reads only the in-cluster config (token and CA at the fixed
/var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/PORT), so it runs in a
private mount namespace (`unshare --mount`) where the harness's folder is bind-mounted over
/run; the host's /run is untouched. Its token comes from the TokenRequest API for a
ServiceAccount that may only read pods, namespaces and NetworkPolicies (and write events).
Callers hold the host lock (memorystore_dev.devcluster.node.host.host_lock): the chain and the
queue number are machine-wide. CHAIN starts with MEMORYSTORE-NODE, so the real node's journal
teardown also removes it after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import yaml

import memorystore_dev.devcluster.node.host as host
from memorystore_dev.devcluster.node.teardown import remove_chains

if TYPE_CHECKING:
    from memorystore_dev.devcluster.cluster import Component
    from memorystore_dev.devcluster.node import NodeInfo

ENFORCER = "kube-network-policies"
CHAIN = "MEMORYSTORE-NODE-NETPOL"
TABLE = "mangle"
DEFAULT_QUEUE = 100
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "kube-network-policies"
CLUSTER_ROLE = "memorystore:kube-network-policies"
# A week: longer than any test run or `memorystore dev cluster` session is expected to last.
TOKEN_SECONDS = 7 * 24 * 3600
NFQUEUE_PROC = Path("/proc/net/netfilter/nfnetlink_queue")
BRIDGE_SYSCTL = "net.bridge.bridge-nf-call-iptables"
SA_SUBDIR = Path("secrets/kubernetes.io/serviceaccount")  # below /run in its mount namespace
REQUIRED_COMMANDS = ("iptables", "iptables-save", "iptables-restore", "unshare", "mount", "env")


class EnforcerError(RuntimeError):
    """The enforcer could not start or stop cleanly; the message names the step and the log."""


# --- pure parts -----------------------------------------------------------------------------


def pod_network(value: str) -> ipaddress.IPv4Network:
    """The pod CIDR as an IPv4 network; anything else is refused naming the value."""
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"pod_cidr {value!r} is not a network address/prefix: {exc}") from None
    if not isinstance(net, ipaddress.IPv4Network):
        raise ValueError(f"pod_cidr {value!r} is not IPv4 (the test node is IPv4 only)")
    if net.prefixlen < 8:
        raise ValueError(f"pod_cidr {value!r} is wider than /8: refusing to queue that much")
    return net


def queue_number(value: int) -> int:
    """An NFQUEUE number (0–65535); anything else is refused naming the value."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ValueError(f"queue {value!r} is not an NFQUEUE number (0-65535)")
    return value


def queue_rules(pod_cidr: str, queue: int, chain: str = CHAIN) -> list[str]:
    """The rules of `chain`: every NEW connection from or to the pods goes to `queue`."""
    net, num = pod_network(pod_cidr), queue_number(queue)
    target = f"-j NFQUEUE --queue-num {num} --queue-bypass"
    return [
        f"-A {chain} -s {net} -m conntrack --ctstate NEW {target}",
        f"-A {chain} -d {net} -m conntrack --ctstate NEW {target}",
    ]


def install_script(pod_cidr: str, queue: int, chain: str = CHAIN) -> str:
    """`iptables-restore --noflush` input: make `chain`, fill it, jump to it at the end of
    FORWARD (after the node's guard chain, which must see every packet first)."""
    lines = [f"*{TABLE}", f":{chain} - [0:0]", *queue_rules(pod_cidr, queue, chain)]
    lines += [f"-A FORWARD -j {chain}", "COMMIT", ""]
    return "\n".join(lines)


def api_endpoint(url: str) -> tuple[str, int]:
    """(host, port) of an https API server URL, for KUBERNETES_SERVICE_HOST/PORT."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"api_server {url!r} is not an https://host:port URL")
    return parts.hostname, parts.port or 443


def launch_argv(
    binary: Path, run_dir: Path, api_server: str, node_name: str, queue: int, run_mount: str
) -> list[str]:
    """The command: in-cluster env, a private mount namespace with `run_dir` over /run, then
    the enforcer reading `queue` for `node_name`, metrics on loopback only."""
    api_host, api_port = api_endpoint(api_server)
    num = queue_number(queue)
    if not node_name:
        raise ValueError("node_name must not be empty")
    return [
        "env",
        f"KUBERNETES_SERVICE_HOST={api_host}",
        f"KUBERNETES_SERVICE_PORT={api_port}",
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        'mount --bind -- "$1" "$2" && shift 2 && exec "$@"',
        ENFORCER,
        str(run_dir),
        run_mount,
        str(binary),
        f"--hostname-override={node_name}",
        "--disable-nri",  # no NRI socket here; pod IPs come from the API server
        f"--nfqueue-id={num}",
        "--metrics-bind-address=127.0.0.1:0",
        "--netfilter-bug-1766-fix=false",  # only shapes its (failing) nftables rules
        "--v=2",  # one log line per decision: the evidence of what it allowed or dropped
    ]


def rbac_objects() -> list[tuple[str, dict[str, Any]]]:
    """(POST URL, object) for the ServiceAccount and its read-only cluster role."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": CLUSTER_ROLE},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["list", "watch"]},
            {
                "apiGroups": ["networking.k8s.io"],
                "resources": ["networkpolicies"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["", "events.k8s.io"],
                "resources": ["events"],
                "verbs": ["create", "patch", "update"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_ROLE},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": CLUSTER_ROLE,
        },
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
    }
    return [
        (f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", account),
        (f"{rbac}/clusterroles", role),
        (f"{rbac}/clusterrolebindings", binding),
    ]


def bound_queues(proc_text: str) -> set[int]:
    """Queue numbers with a reader, from /proc/net/netfilter/nfnetlink_queue (first column)."""
    queues = set()
    for line in proc_text.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            queues.add(int(fields[0]))
    return queues


# --- I/O ------------------------------------------------------------------------------------


def read_bound_queues() -> set[int]:
    """Queues that have a reader now (the file exists once nfnetlink_queue has been used)."""
    try:
        return bound_queues(NFQUEUE_PROC.read_text())
    except FileNotFoundError:
        return set()


def missing_commands() -> list[str]:
    """Host commands the enforcer needs that are not on PATH (iptables, unshare, …)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [c for c in REQUIRED_COMMANDS if shutil.which(c, path=path) is None]


def chain_present(chain: str = CHAIN) -> bool:
    """Whether `chain` exists in the mangle table."""
    out = host.run(["iptables-save", "-t", TABLE], check=False)
    return any(line.split()[0] == f":{chain}" for line in out.splitlines() if line[:1] == ":")


def remove_rules(chain: str = CHAIN) -> None:
    """Delete `chain` and the FORWARD jump to it (no-op when absent)."""
    remove_chains(4, TABLE, [chain])


def kubeconfig_files(kubeconfig: Path) -> tuple[str, Path, Path, Path]:
    """(server, CA, client cert, client key) of a kubeconfig of file paths (what the harness
    writes); anything else is refused naming the file."""
    try:
        config = yaml.safe_load(kubeconfig.read_text())
        context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
        names = context["context"]
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == names["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == names["user"])
        return (
            cluster["server"],
            Path(cluster["certificate-authority"]),
            Path(user["client-certificate"]),
            Path(user["client-key"]),
        )
    except (KeyError, StopIteration, TypeError) as exc:
        raise EnforcerError(
            f"{kubeconfig}: needs a current context with a server, a CA file and a client "
            f"certificate and key file ({exc!r})"
        ) from None


@contextlib.contextmanager
def admin_client(kubeconfig: Path) -> Iterator[httpx.Client]:
    """An HTTP client authenticated as the kubeconfig's user."""
    server, ca, cert, key = kubeconfig_files(kubeconfig)
    tls = ssl.create_default_context(cafile=str(ca))
    tls.load_cert_chain(str(cert), str(key))
    with httpx.Client(base_url=server, verify=tls, timeout=15) as client:
        yield client


class NetworkPolicyEnforcer:
    """A real-node addon (see memorystore_dev.devcluster.node.NodeAddon): start → alive → stop."""

    def __init__(
        self, binary: Path, queue: int = DEFAULT_QUEUE, ready_timeout: float = 60.0
    ) -> None:
        self.name = ENFORCER
        self.binary = Path(binary)
        self.queue = queue_number(queue)
        self.ready_timeout = ready_timeout
        self.component: Component | None = None
        self.run_dir: Path | None = None
        self.log: Path | None = None
        self._installed = False

    def start(self, info: NodeInfo) -> None:
        """Credentials, the enforcer process (until it reads its queue), then the queue rule."""
        pod_network(info.pod_cidr)
        missing = missing_commands()
        if missing:
            raise EnforcerError(f"missing host commands: {', '.join(missing)} (make node-deps)")
        if not os.access(self.binary, os.X_OK):
            raise EnforcerError(
                f"{self.binary} is not an executable (memorystore dev tools --tools {ENFORCER})"
            )
        if host.read_sysctl(BRIDGE_SYSCTL) != "1":
            # bridged pod-to-pod frames would skip iptables: nothing would ever be queued
            raise EnforcerError(
                f"{BRIDGE_SYSCTL} is {host.read_sysctl(BRIDGE_SYSCTL)!r}, not 1: bridged pod "
                "traffic would bypass the queue rule (the node or the test must set it)"
            )
        if self.queue in read_bound_queues():
            raise EnforcerError(
                f"NFQUEUE {self.queue} already has a reader: another enforcer runs on this host"
            )
        remove_rules()  # a killed run's leftover (callers hold the host lock: it is ours)
        self.log = info.logs / f"{self.name}.log"
        self.run_dir = info.workdir / ENFORCER / "run"
        self._write_credentials(info)
        argv = launch_argv(
            self.binary,
            self.run_dir,
            info.api_server,
            info.name,
            self.queue,
            os.path.realpath("/var/run"),
        )
        self.component = info.spawn(self.name, argv)
        deadline = time.monotonic() + self.ready_timeout
        while self.queue not in read_bound_queues():
            if not self.alive():
                raise EnforcerError(f"{ENFORCER} exited at start; log: {self.log}\n{self._tail()}")
            if time.monotonic() > deadline:
                raise EnforcerError(
                    f"{ENFORCER} did not read NFQUEUE {self.queue} within "
                    f"{self.ready_timeout:.0f} s; log: {self.log}\n{self._tail()}"
                )
            time.sleep(0.1)
        self._installed = True  # from here on, stop() must remove the rule
        proc = subprocess.run(
            ["iptables-restore", "--noflush"],
            input=install_script(info.pod_cidr, self.queue),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            raise EnforcerError(f"iptables-restore of {CHAIN} failed: {proc.stderr.strip()}")

    def _write_credentials(self, info: NodeInfo) -> None:
        """The ServiceAccount, its role and a token, laid out as in a pod (mode 0600)."""
        assert self.run_dir is not None
        with admin_client(info.admin_kubeconfig) as api:
            for url, body in rbac_objects():
                made = api.post(url, json=body)
                if made.status_code not in (201, 409):
                    raise EnforcerError(f"creating {url} failed: {made.status_code} {made.text}")
            request = {"spec": {"expirationSeconds": TOKEN_SECONDS}}
            made = api.post(
                f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
                json=request,
            )
            if made.status_code != 201:
                raise EnforcerError(f"TokenRequest failed: {made.status_code}")
            token = made.json()["status"]["token"]
        folder = self.run_dir / SA_SUBDIR
        folder.mkdir(parents=True, exist_ok=True)
        self.run_dir.chmod(0o700)
        for name, data in (
            ("token", token.encode()),
            ("ca.crt", kubeconfig_files(info.admin_kubeconfig)[1].read_bytes()),
            ("namespace", NAMESPACE.encode()),
        ):
            path = folder / name
            path.touch(mode=0o600)
            path.write_bytes(data)

    def _tail(self) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return self.log.read_text(errors="replace")[-1500:]

    def alive(self) -> bool:
        """Whether the enforcer process still runs."""
        return self.component is not None and self.component.process.poll() is None

    def stop(self) -> None:
        """The queue rule first (traffic then flows as without policies), then the process,
        then the token file. Raises if the rule could not be removed."""
        from memorystore_dev.devcluster.cluster import terminate

        problems = []
        if self._installed or chain_present():
            try:
                remove_rules()
            except host.HostError as exc:
                problems.append(str(exc))
            self._installed = False
        if self.component is not None:
            terminate(self.component.process)
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        if problems:
            raise EnforcerError("; ".join(problems))
