"""The real node's NetworkPolicy enforcer (dev/memorystore_dev/devcluster/netpol.py) enforcing
for real: the pinned kube-network-policies binary, the harness's iptables NFQUEUE rule, a real API
server, and "pods" that are network namespaces on a test bridge (tests/support/netpol_lab.py).

Root only (bridges, namespaces, iptables); without root or the host commands the tests skip
with the reason, and with CI=true that skip is a failure. They hold the machine's real-node
lock, so they never run beside a real node. The host must be as it was afterwards.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings

from memorystore_dev.devcluster import netpol
from memorystore_dev.devcluster.cluster import LocalCluster, spawn_process
from memorystore_dev.devcluster.node import NodeInfo, host, undo_leftovers
from memorystore_dev.devcluster.target import CLUSTER_TOOLS
from memorystore_dev.devcluster.tools import ensure_tools
from support.netpol_lab import Lab, Node, host_state, probe, probe_all, state_diff
from support.netpol_model import ContainerPort, Pod, allowed
from support.netpol_scenarios import (
    NAMESPACES,
    POD_SLOTS,
    PROBES,
    SUBNET,
    Scenario,
    container_ports,
    pod_manifest,
    scenarios,
)

pytestmark = pytest.mark.slow

LAB_NODE = "netpol-lab-node"  # a Node object no kubelet serves: the lab's pods are bound to it
SENTINEL_NS, SENTINEL_CLIENT, SENTINEL_SERVER = "np-sentinel", 20, 21
LIFE_NS, OTHER_NS = "np-life", "np-other"
SERVER, CLIENT_X, CLIENT_U, FOREIGN_X = 30, 31, 32, 33
ADDRESSES = [last for _, _, last in POD_SLOTS] + [SENTINEL_CLIENT, SENTINEL_SERVER]
ADDRESSES += [SERVER, CLIENT_X, CLIENT_U, FOREIGN_X]
POLICIES = "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"
MERGE = {"Content-Type": "application/merge-patch+json"}


def _log(line: str) -> None:
    print(f"[netpol-lab] {line}", file=sys.__stderr__, flush=True)


def problems() -> list[str]:
    """Why the lab cannot run here (empty when it can)."""
    found = []
    if os.geteuid() != 0:
        found.append("needs root (bridges, network namespaces, iptables)")
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = netpol.missing_commands() + [
        c for c in ("ip", "ipset") if not shutil.which(c, path=path)
    ]
    if missing:
        found.append(f"missing host commands {missing}: run `make node-deps` as root")
    if os.geteuid() == 0 and not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        found.append("no br_netfilter (net.bridge.bridge-nf-call-iptables)")
    return found


def _skip_or_fail() -> None:
    found = problems()
    if found:
        reason = "NetworkPolicy lab unavailable: " + "; ".join(found)
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: this must run in CI)")
        pytest.skip(reason)


def _no_kubeconfig(stem: str, user: str, group: str | None) -> Path:
    raise AssertionError("the enforcer needs no client certificate")


@dataclass
class World:
    """The lab's cluster objects, and the barrier that proves the enforcer has seen them."""

    cluster: LocalCluster
    net: Lab
    binary: Path
    epoch: int = 0
    pods: dict[int, Pod] = field(default_factory=dict)

    @contextlib.contextmanager
    def api(self) -> Iterator[httpx.Client]:
        with self.cluster.client() as client:
            yield client

    def node(self, last: int) -> Node:
        return self.net.nodes[last]

    def info(self) -> NodeInfo:
        """What a real node would hand the enforcer, for the lab's bridge and node name."""
        assert self.cluster.workdir is not None
        logs = self.cluster.workdir / "logs"
        return NodeInfo(
            name=LAB_NODE,
            bridge=self.net.bridge,
            pod_cidr=f"{SUBNET}.0/24",
            gateway="",
            service_cidr="10.96.0.0/16",
            cluster_domain="cluster.local",
            dns_ip="",
            workdir=self.cluster.workdir / "lab",
            logs=logs,
            api_server=self.cluster.server,
            admin_kubeconfig=self.cluster.kubeconfig,
            node_kubeconfig=self.cluster.kubeconfig,
            kubeconfig_for=_no_kubeconfig,
            spawn=lambda name, argv: spawn_process(name, argv, logs / f"{name}.log", log=_log),
        )

    @contextlib.contextmanager
    def enforcer(self) -> Iterator[netpol.NetworkPolicyEnforcer]:
        enforcer = netpol.NetworkPolicyEnforcer(self.binary)
        try:
            enforcer.start(self.info())
            yield enforcer
        finally:
            enforcer.stop()

    # --- objects --------------------------------------------------------------------------

    def namespace(self, name: str, labels: dict[str, str]) -> None:
        with self.api() as api:
            body = {"metadata": {"name": name, "labels": labels}}
            made = api.post("/api/v1/namespaces", json=body)
            if made.status_code == 409:
                self.relabel(f"/api/v1/namespaces/{name}", labels)
            else:
                made.raise_for_status()

    def pod(self, p: Pod) -> None:
        """Create the Pod object and give it the lab node's address as its status."""
        with self.api() as api:
            base = f"/api/v1/namespaces/{p.namespace}/pods"
            api.post(base, json=pod_manifest(p, LAB_NODE)).raise_for_status()
            current = api.get(f"{base}/{p.name}").json()
            current["status"] = {
                "phase": "Running",
                "podIP": p.ip,
                "podIPs": [{"ip": p.ip}],
                "conditions": [{"type": "Ready", "status": "True"}],
            }
            api.put(f"{base}/{p.name}/status", json=current).raise_for_status()
        self.pods[int(p.ip.rsplit(".", 1)[1])] = p

    def relabel(self, url: str, labels: dict[str, str]) -> None:
        """Make the object's labels exactly `labels` (the namespace name label stays)."""
        with self.api() as api:
            current = api.get(url).json()["metadata"].get("labels") or {}
            patch: dict[str, str | None] = {
                k: None for k in current if k not in labels and k != "kubernetes.io/metadata.name"
            }
            patch.update(labels)
            body = {"metadata": {"labels": patch}}
            api.patch(url, json=body, headers=MERGE).raise_for_status()

    def pod_labels(self, last: int, labels: dict[str, str]) -> None:
        p = self.pods[last]
        self.relabel(f"/api/v1/namespaces/{p.namespace}/pods/{p.name}", labels)
        self.pods[last] = Pod(p.namespace, p.name, p.ip, dict(labels), p.ports)

    def policies(self, namespaces: Sequence[str], policies: Sequence[dict[str, Any]]) -> None:
        """Replace every policy of `namespaces` with `policies`."""
        with self.api() as api:
            for ns in namespaces:
                api.delete(POLICIES.format(ns=ns)).raise_for_status()
            for pol in policies:
                made = api.post(POLICIES.format(ns=pol["metadata"]["namespace"]), json=pol)
                assert made.status_code == 201, f"the API refused {pol}: {made.text}"

    def forget_flows(self) -> None:
        """Drop the lab's connection-tracking entries, so every probe is a NEW flow.

        The enforcer judges a flow's first packet only (NFQUEUE on ctstate NEW); conntrack
        keeps a UDP flow 30-120 s, and a probe's ephemeral source port now and then repeats
        that of a recent probe which an earlier example's policies allowed: that probe
        then rides the old flow past a policy that refuses it (seen in CI: UDP allowed
        where egress was denied). The oracle judges new connections, as policies do."""
        for direction in ("-s", "-d"):
            done = subprocess.run(
                ["conntrack", "-D", direction, f"{SUBNET}.0/24"], capture_output=True, text=True
            )
            # exit 1 with "0 flow entries": nothing to delete
            assert done.returncode == 0 or " 0 flow entries" in done.stderr, done.stderr

    def barrier(self, timeout: float = 60) -> float:
        """Wait until the enforcer has seen every write made before this call.

        Why it works: its pods, namespaces and policies each arrive in one ordered watch. The
        sentinel client reaches the sentinel server only once the enforcer has the new epoch
        label on the client pod AND on its namespace AND the new epoch's policy — each
        written after everything else, so each proves its whole stream caught up.
        """
        self.epoch += 1
        epoch = str(self.epoch)
        client = self.pods[SENTINEL_CLIENT]
        self.pod_labels(SENTINEL_CLIENT, {**client.labels, "epoch": epoch})
        self.relabel(f"/api/v1/namespaces/{SENTINEL_NS}", {"epoch": epoch})
        gate = {
            "metadata": {"name": f"gate-{epoch}", "namespace": SENTINEL_NS},
            "spec": {
                "podSelector": {"matchLabels": {"role": "sentinel-server"}},
                "ingress": [
                    {
                        "from": [
                            {
                                "podSelector": {"matchLabels": {"epoch": epoch}},
                                "namespaceSelector": {"matchLabels": {"epoch": epoch}},
                            }
                        ],
                        "ports": [{"port": 8080}],
                    }
                ],
            },
        }
        with self.api() as api:
            api.post(POLICIES.format(ns=SENTINEL_NS), json=gate).raise_for_status()
            if self.epoch > 1:
                api.delete(f"{POLICIES.format(ns=SENTINEL_NS)}/gate-{self.epoch - 1}")
        t0 = time.monotonic()
        src, dst = self.node(SENTINEL_CLIENT), self.node(SENTINEL_SERVER)
        while not probe(src, dst, "TCP", 8080, timeout=0.5):
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"the enforcer did not catch up with epoch {epoch}")
        return time.monotonic() - t0


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    _skip_or_fail()
    with host.host_lock(timeout=1800, log=_log):
        # what a real node or a lab killed before its teardown left is not this lab's change
        undo_leftovers(_log)
        lab = Lab("msnpl", SUBNET, ADDRESSES)
        assert not lab.down(), "an earlier lab's links or namespaces could not be removed"
        before = host_state()
        tools = ensure_tools([*CLUSTER_TOOLS, netpol.ENFORCER], log=_log)
        with LocalCluster(tools, log=_log) as cluster, lab.running() as net:
            w = World(cluster, net, tools[netpol.ENFORCER])
            with w.api() as api:
                node = {"metadata": {"name": LAB_NODE, "labels": {"memorystore.dev/lab": "netpol"}}}
                api.post("/api/v1/nodes", json=node).raise_for_status()
            for ns in [*NAMESPACES, SENTINEL_NS, LIFE_NS, OTHER_NS]:
                w.namespace(ns, {})
            for ns, name, last in POD_SLOTS:
                w.pod(Pod(ns, name, f"{SUBNET}.{last}", {}, container_ports(last)))
            ports = (ContainerPort(8080, "TCP", "web"),)
            for last, ns, name, labels in (
                (SENTINEL_CLIENT, SENTINEL_NS, "sentinel-client", {"role": "sentinel-client"}),
                (SENTINEL_SERVER, SENTINEL_NS, "sentinel-server", {"role": "sentinel-server"}),
                (SERVER, LIFE_NS, "server", {"app": "server"}),
                (CLIENT_X, LIFE_NS, "client-x", {"role": "x"}),
                (CLIENT_U, LIFE_NS, "client-unlabelled", {}),
                (FOREIGN_X, OTHER_NS, "client-x", {"role": "x"}),
            ):
                w.pod(Pod(ns, name, f"{SUBNET}.{last}", labels, ports))
            isolate = {
                "metadata": {"name": "sentinel-isolated", "namespace": SENTINEL_NS},
                "spec": {
                    "podSelector": {"matchLabels": {"role": "sentinel-server"}},
                    "policyTypes": ["Ingress"],
                },
            }
            w.policies([SENTINEL_NS], [isolate])
            yield w
        after = host_state()
    assert after == before, f"the lab left the host changed: {state_diff(before, after)}"


def _life_probes(w: World) -> dict[str, bool]:
    """The lifecycle test's probes, by a readable name."""
    server = w.node(SERVER)
    named = {
        "x:tcp8080": (w.node(CLIENT_X), server, "TCP", 8080),
        "x:tcp8081": (w.node(CLIENT_X), server, "TCP", 8081),
        "x:udp8080": (w.node(CLIENT_X), server, "UDP", 8080),
        "unlabelled:tcp8080": (w.node(CLIENT_U), server, "TCP", 8080),
        "other-namespace-x:tcp8080": (w.node(FOREIGN_X), server, "TCP", 8080),
    }
    return dict(zip(named, probe_all(list(named.values())), strict=True))


ALL_OPEN = {
    "x:tcp8080": True,
    "x:tcp8081": True,
    "x:udp8080": True,
    "unlabelled:tcp8080": True,
    "other-namespace-x:tcp8080": True,
}
ONLY_X = {
    "metadata": {"name": "only-x", "namespace": LIFE_NS},
    "spec": {
        "podSelector": {"matchLabels": {"app": "server"}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [{"podSelector": {"matchLabels": {"role": "x"}}}],
                "ports": [{"protocol": "TCP", "port": 8080}],
            }
        ],
    },
}


@pytest.mark.timeout(900)
def test_a_policy_refuses_the_unlabelled_client_and_admits_the_labelled_one(world):
    w = world
    before = host_state()
    w.policies([LIFE_NS], [])
    assert _life_probes(w) == ALL_OPEN

    # Control: the policy alone, with no enforcer, changes nothing (what every test so far saw).
    w.policies([LIFE_NS], [ONLY_X])
    time.sleep(1)
    assert _life_probes(w) == ALL_OPEN

    with w.enforcer() as enforcer:
        pid = enforcer.component.process.pid  # type: ignore[union-attr]
        assert enforcer.alive() and enforcer.queue in netpol.read_bound_queues()
        assert netpol.chain_present()
        # its credentials exist in its own mount namespace only
        token = Path(f"/proc/{pid}/root/run/secrets/kubernetes.io/serviceaccount/token")
        assert token.stat().st_mode & 0o077 == 0 and token.read_text().count(".") == 2
        assert not Path("/run/secrets").exists()

        w.barrier()
        assert _life_probes(w) == {
            "x:tcp8080": True,
            "x:tcp8081": False,  # only the listed port
            "x:udp8080": False,  # only the listed protocol
            "unlabelled:tcp8080": False,
            "other-namespace-x:tcp8080": False,  # the label, but in another namespace
        }

        # taking the label away revokes new connections; giving it back restores them
        w.pod_labels(CLIENT_X, {})
        w.barrier()
        assert not probe(w.node(CLIENT_X), w.node(SERVER), "TCP", 8080)
        w.pod_labels(CLIENT_X, {"role": "x"})
        w.barrier()
        assert probe(w.node(CLIENT_X), w.node(SERVER), "TCP", 8080)

        w.policies([LIFE_NS], [])
        w.barrier()
        assert _life_probes(w) == ALL_OPEN
        assert enforcer.alive()
        log = enforcer.log.read_text() if enforcer.log else ""

    # the refusals were the enforcer's decisions: a packet of the unlabelled client to the
    # server's port, logged with a drop verdict
    src, dst = re.escape(w.node(CLIENT_U).ip), re.escape(w.node(SERVER).ip)
    seen = set(re.findall(rf"\[(\d+)\] {src}:\d+ {dst}:8080 TCP", log))
    dropped = set(re.findall(r'"Finished syncing packet" id=(\d+) .*verdict="drop"', log))
    assert seen & dropped, "no logged drop of the unlabelled client's connection"
    # its own nftables install failed as this kernel predicts (no nft `queue` expression)
    assert '"syncing nftables rules" error=' in log
    assert not Path(f"/proc/{pid}").exists()
    assert enforcer.queue not in netpol.read_bound_queues()
    assert host_state() == before, state_diff(before, host_state())


@pytest.mark.timeout(600)
def test_a_second_enforcer_is_refused_and_a_dead_one_is_cleaned_up(world):
    w = world
    before = host_state()
    w.policies([LIFE_NS], [ONLY_X])
    with w.enforcer() as first:
        w.barrier()
        second = netpol.NetworkPolicyEnforcer(w.binary)
        with pytest.raises(netpol.EnforcerError, match="NFQUEUE 100 already has a reader"):
            second.start(w.info())
        assert second.component is None  # refused before anything ran
        assert not probe(w.node(CLIENT_U), w.node(SERVER), "TCP", 8080)  # first still enforces
        # the enforcer dies: with --queue-bypass, traffic then flows as with no policy
        first.component.process.kill()  # type: ignore[union-attr]
        first.component.process.wait(10)  # type: ignore[union-attr]
        assert not first.alive()
        assert probe(w.node(CLIENT_U), w.node(SERVER), "TCP", 8080, timeout=5)
    assert not netpol.chain_present()  # stop() cleaned up after the dead process
    w.policies([LIFE_NS], [])
    assert host_state() == before, state_diff(before, host_state())


@pytest.mark.timeout(300)
def test_the_enforcer_refuses_to_start_where_bridged_traffic_skips_iptables(world):
    name = netpol.BRIDGE_SYSCTL
    before = host_state()
    host.write_sysctl(name, "0")
    try:
        enforcer = netpol.NetworkPolicyEnforcer(world.binary)
        with pytest.raises(netpol.EnforcerError, match=f"{name} is '0', not 1"):
            enforcer.start(world.info())
        assert enforcer.component is None and not netpol.chain_present()
    finally:
        host.write_sysctl(name, "1")
    assert host_state() == before, state_diff(before, host_state())


def _oracle(s: Scenario) -> dict[tuple[int, int, str, int], bool]:
    by_last = {int(p.ip.rsplit(".", 1)[1]): p for p in s.pods}
    return {
        (a, b, proto, port): allowed(s.policies, s.namespaces, by_last[a], by_last[b], port, proto)
        for a, b in itertools.permutations(by_last, 2)
        for proto, port in PROBES
    }


@pytest.fixture
def enforced(world: World) -> Iterator[World]:
    with world.enforcer():
        yield world


@pytest.mark.timeout(1800)
@settings(
    max_examples=int(os.environ.get("NETPOL_EXAMPLES", "20")),
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),  # a shrink would cost minutes
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(s=scenarios(min_policies=1))
def test_the_enforcer_agrees_with_the_reference_semantics(enforced, s):
    """Random policies, labels and namespace labels; every pod pair, port and protocol."""
    w = enforced
    for ns, labels in s.namespaces.items():
        w.relabel(f"/api/v1/namespaces/{ns}", labels)
    for p in s.pods:
        w.pod_labels(int(p.ip.rsplit(".", 1)[1]), dict(p.labels))
    w.policies(list(NAMESPACES), list(s.policies))
    w.barrier()
    w.forget_flows()
    expected = _oracle(s)
    keys = list(expected)
    refused = sum(not v for v in expected.values())
    share = "none" if not refused else "all" if refused == len(keys) else "some"
    event(f"connections the oracle refuses: {share}")
    got = dict(
        zip(
            keys,
            probe_all([(w.node(a), w.node(b), proto, port) for a, b, proto, port in keys]),
            strict=True,
        )
    )
    # a slow "allowed" is still allowed: re-probe refusals the oracle allows, patiently
    slow = [k for k in keys if expected[k] and not got[k]]
    again = probe_all([(w.node(k[0]), w.node(k[1]), k[2], k[3]) for k in slow], timeout=6)
    got.update(zip(slow, again, strict=True))
    wrong = {k: (expected[k], got[k]) for k in keys if expected[k] != got[k]}
    assert not wrong, (
        f"(src, dst, proto, port): (oracle, enforcer) differ: {wrong}\n"
        f"namespaces={s.namespaces}\npods={s.pods}\npolicies={s.policies}"
    )
