"""A real kubelet node joined to the local control plane: pods really run on it, resolve
cluster DNS, reach the API server through the `kubernetes` Service, keep data on a volume of
the default StorageClass, and cannot send a packet off the machine; a failed start and the
final stop both leave the host as it was (the `real_node` fixture checks the latter)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memorystore_dev.devcluster.node import (
    BRIDGE,
    FWD_CHAIN,
    GATEWAY,
    NODE_NAME,
    OUT_CHAIN,
    POD_CIDR,
    REAL_NODE_TAINT,
    SERVICE_CIDR,
    STORAGE_CLASS,
    host,
)
from memorystore_dev.devcluster.target import Kube
from support.real_node import DYING_ADDON, RealNodeRun, host_diff
from support.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# TEST-NET-3 (RFC 5737): never a real host. The test routes it into a namespace of its own,
# so even a broken guard could not send a packet off the machine.
OFF_MACHINE = "203.0.113.7"


@pytest.fixture
def ns(real_node: RealNodeRun, request: pytest.FixtureRequest) -> Iterator[str]:
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{name}-{uuid.uuid4().hex[:6]}"
    real_node.kube.kubectl("create", "namespace", name)
    yield name
    real_node.kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def probe_pod(
    name: str,
    image: str,
    args: list[str],
    claim: str | None = None,
    uid: int | None = None,
    restart: str = "Never",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod of the probe image that tolerates the real node's taint and selects it."""
    container: dict[str, Any] = {
        "name": "probe",
        "image": image,
        "imagePullPolicy": "Never",  # imported into containerd; no registry here
        "args": args,
    }
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {
            "nodeSelector": {"memorystore.dev/node": "real"},
            "tolerations": [{**REAL_NODE_TAINT, "operator": "Equal"}],
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 1,
            "containers": [container],
        },
    }
    if uid is not None:
        pod["spec"]["securityContext"] = {"runAsUser": uid, "runAsNonRoot": True}
    if claim:
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return pod


def run_to_completion(kube: Kube, ns: str, pod: dict[str, Any], timeout: float = 120) -> str:
    """Create the pod, wait until it finishes, return its log; fail with the log if it failed."""
    kube.apply(json.dumps(pod), "-n", ns)
    name = pod["metadata"]["name"]

    def finished() -> str:
        phase = kube.get("pod", name, "-n", ns).get("status", {}).get("phase", "")
        return phase if phase in ("Succeeded", "Failed") else ""

    phase = wait_for(finished, timeout=timeout)
    logs = kube.kubectl("logs", name, "-n", ns).stdout
    assert phase == "Succeeded", f"pod {name} {phase}:\n{logs}"
    return logs


def ok_lines(logs: str) -> dict[str, str]:
    """`OK <check> <detail>` lines of the probe, by check."""
    out = {}
    for line in logs.splitlines():
        if line.startswith("OK "):
            check, _, detail = line[3:].partition(" ")
            out[check] = detail
    return out


def test_a_failed_start_names_its_step_and_log_and_leaves_nothing(real_node: RealNodeRun):
    failed = real_node.failed_start
    print(f"\nfailed start (an addon dying last) unwound in {failed.seconds:.1f} s")
    assert failed.error is not None, "a node whose addon dies must not start"
    message = str(failed.error)
    assert f"step 'addon {DYING_ADDON}' failed" in message
    log = re.search(r"log: (\S+)", message)
    assert log, message
    assert Path(log.group(1)).name == f"{DYING_ADDON}.log"
    kept = Path(log.group(1))
    assert kept.exists(), "the named log must survive the removed workdir"
    assert "exited with 1" in message  # /bin/false, the addon's process
    if kept.parent.name.startswith("memorystore-cluster-logs-"):
        shutil.rmtree(kept.parent)  # kept for people; this failure was on purpose
    assert len(failed.started_pids) >= 9  # control plane + containerd, kubelet, proxy, dns, …
    assert failed.leftover_processes == []
    assert not failed.workdir_left
    assert host_diff(real_node.before, failed.after) == ""


def test_the_next_start_undoes_what_a_sigkilled_node_left(real_node: RealNodeRun):
    killed = real_node.killed_run
    print(f"\nthe CLI's real node came up, ran a pod and was SIGKILLed in {killed.seconds:.1f} s")
    # A SIGKILL cannot be caught: the host really kept the node's changes …
    for leftover in (BRIDGE, f"blackhole {SERVICE_CIDR}", FWD_CHAIN, "netns: gone [], new ['cni-"):
        assert leftover in killed.left, f"{leftover!r} not left after SIGKILL:\n{killed.left}"
    # … and the next start undid them from the journal before doing anything else.
    assert f"undoing what the real node of pid {killed.pid} left behind" in "\n".join(
        real_node.failed_start.lines
    )
    assert host_diff(real_node.before, real_node.failed_start.after) == ""


def test_the_real_node_is_ready_labelled_tainted_and_beside_kwok(real_node: RealNodeRun):
    kube = real_node.kube
    node = kube.get("node", NODE_NAME)
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    assert node["metadata"]["labels"]["memorystore.dev/node"] == "real"
    assert REAL_NODE_TAINT in [
        {k: t[k] for k in ("key", "value", "effect")} for t in node["spec"]["taints"]
    ]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.37.2"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.")
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == GATEWAY
    assert {n["metadata"]["name"] for n in kube.get("nodes")["items"]} == {
        NODE_NAME,
        "kwok-node-0",
    }
    # The kubernetes Service points at the bridge address, where the relay listens.
    slices = kube.get(
        "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes"
    )["items"]
    assert [e["addresses"] for s in slices for e in s["endpoints"]] == [[GATEWAY]]


def test_an_untolerating_pod_still_lands_on_the_simulated_node(real_node: RealNodeRun, ns: str):
    kube = real_node.kube
    kube.kubectl("run", "plain", "--image=registry.invalid/x:1", "-n", ns, "--restart=Never")
    pod = wait_for(lambda: kube.get("pod", "plain", "-n", ns)["spec"].get("nodeName"), 60)
    assert pod == "kwok-node-0"


def test_a_pod_runs_on_the_bridge_resolves_cluster_dns_and_reaches_the_api(
    real_node: RealNodeRun, ns: str
):
    kube = real_node.kube
    pod = probe_pod(
        "probe",
        real_node.probe_image,
        [
            "ip",
            "dns:kubernetes.default.svc.cluster.local",
            "api",
            # no upstream resolver: a name outside the cluster does not resolve
            "nodns:example.com",
        ],
    )
    logs = run_to_completion(kube, ns, pod)
    oks = ok_lines(logs)
    status = kube.get("pod", "probe", "-n", ns)
    assert status["spec"]["nodeName"] == NODE_NAME
    pod_ip = status["status"]["podIP"]
    assert ipaddress.ip_address(pod_ip) in ipaddress.ip_network(POD_CIDR)
    assert pod_ip != GATEWAY
    assert oks["ip"] == pod_ip  # the IP the pod sees is the one the API reports
    assert oks["dns:kubernetes.default.svc.cluster.local"] == "10.96.0.1"
    assert oks["api"] == "10.96.0.1:443=v1.37.2 dns=v1.37.2"
    assert "nodns:example.com" in oks
    # The container really ran under the node's containerd, in a cgroup of the kubelet's tree.
    assert any(Path("/sys/fs/cgroup/memory/memorystore-real-node").glob("kubepods*"))


def test_a_claim_of_the_default_class_binds_and_keeps_data_across_pods(
    real_node: RealNodeRun, ns: str
):
    kube = real_node.kube
    classes = kube.get("storageclass")["items"]
    defaults = [
        c["metadata"]["name"]
        for c in classes
        if c["metadata"].get("annotations", {}).get("storageclass.kubernetes.io/is-default-class")
        == "true"
    ]
    assert defaults == [STORAGE_CLASS]
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    kube.apply(json.dumps(claim), "-n", ns)
    secret = uuid.uuid4().hex
    image = real_node.probe_image
    # A non-root writer (the memory service runs as 10001), then a separate reader pod.
    run_to_completion(
        kube, ns, probe_pod("writer", image, [f"write:/data/note:{secret}"], "data", uid=10001)
    )
    logs = run_to_completion(
        kube, ns, probe_pod("reader", image, [f"read:/data/note:{secret}"], "data", uid=20002)
    )
    assert f"OK read:/data/note:{secret}" in logs
    pvc = kube.get("pvc", "data", "-n", ns)
    assert pvc["spec"]["storageClassName"] == STORAGE_CLASS  # defaulted by admission
    assert pvc["status"]["phase"] == "Bound"
    pv = kube.get("pv", pvc["spec"]["volumeName"])
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == [NODE_NAME]
    folder = Path(pv["spec"]["hostPath"]["path"])
    assert (folder / "note").read_text() == secret
    # Reclaim policy Delete: the volume and its folder go with the claim.
    kube.kubectl("delete", "pod", "writer", "reader", "-n", ns, "--wait=true")
    kube.kubectl("delete", "pvc", "data", "-n", ns, "--wait=true")
    wait_for(
        lambda: kube.kubectl("get", "pv", pv["metadata"]["name"], check=False).returncode != 0, 60
    )
    assert not folder.exists()


def test_pods_reach_each_other_through_a_service_and_the_host_reaches_a_pod(
    real_node: RealNodeRun, ns: str
):
    kube = real_node.kube
    server = probe_pod("server", real_node.probe_image, ["serve:8080"], restart="Always")
    kube.apply(json.dumps(server), "-n", ns)
    kube.kubectl("expose", "pod", "server", "--port=80", "--target-port=8080", "-n", ns)
    kube.kubectl("wait", "--for=condition=Ready", "pod/server", "-n", ns, "--timeout=90s")
    ip = kube.get("pod", "server", "-n", ns)["status"]["podIP"]
    logs = run_to_completion(
        kube,
        ns,
        probe_pod("client", real_node.probe_image, [f"connect:server.{ns}.svc.cluster.local:80"]),
    )
    assert f"OK connect:server.{ns}.svc.cluster.local:80" in logs
    with socket.create_connection((ip, 8080), timeout=3) as conn:
        assert conn.recv(16) == b"probe\n"


@pytest.fixture
def sink_route() -> Iterator[str]:
    """Route TEST-NET-3 into a veth whose peer sits in a network namespace this test made
    (held by a `sleep`, so nothing under /run/netns): a leak would stay on the machine and
    reach the veth. (This kernel has no `dummy` driver.)"""
    name = "msprobe0"
    holder = subprocess.Popen(["unshare", "--net", "sleep", "600"])
    try:
        # the namespace's identity is the link's text ("net:[inode]"); resolving the path
        # names the process too, so it differed at once and the veth could land in ours
        ours = os.readlink("/proc/self/ns/net")
        wait_for(lambda: os.readlink(f"/proc/{holder.pid}/ns/net") != ours, 10, 0.05)
        host.run(["ip", "link", "add", name, "type", "veth", "peer", "name", "msprobe1"])
        # no IPv6 on the host side: the sink exists only for the IPv4 route
        host.write_sysctl(f"net.ipv6.conf.{name}.disable_ipv6", "1")
        host.run(["ip", "link", "set", "msprobe1", "netns", str(holder.pid)])
        host.run(["nsenter", "-t", str(holder.pid), "-n", "ip", "link", "set", "msprobe1", "up"])
        host.run(["ip", "link", "set", name, "up"])
        host.run(["ip", "route", "add", "203.0.113.0/24", "dev", name])
        yield name
    finally:
        host.run(["ip", "link", "del", name], check=False)
        holder.kill()
        holder.wait()


def _drops(chain: str) -> int:
    out = host.run(["iptables", "-t", "mangle", "-L", chain, "-v", "-x", "-n"])
    return sum(int(line.split()[0]) for line in out.splitlines()[2:] if " DROP " in line)


@pytest.fixture
def leak_counter(sink_route: str) -> Iterator[Callable[[], int]]:
    """Counts pod packets that get past every mangle rule towards the sink: a rule with no
    target, last in mangle POSTROUTING (after the guards; only SNAT and the wire follow).
    Unlike the link's transmit counter it ignores traffic of anyone else on the machine."""
    rule = ["POSTROUTING", "-o", sink_route, "-s", POD_CIDR]
    host.run(["iptables", "-t", "mangle", "-A", *rule])
    try:

        def count() -> int:
            out = host.run(["iptables", "-t", "mangle", "-L", "POSTROUTING", "-v", "-x", "-n"])
            return sum(
                int(line.split()[0])
                for line in out.splitlines()[2:]
                if sink_route in line and POD_CIDR in line
            )

        yield count
    finally:
        host.run(["iptables", "-t", "mangle", "-D", *rule], check=False)


def test_pod_traffic_off_the_pod_network_is_dropped_on_the_machine(
    real_node: RealNodeRun, ns: str, leak_counter: Callable[[], int]
):
    kube = real_node.kube
    # The guards are the first mangle rules (mangle runs before any filter rule).
    mangle = ["iptables", "-t", "mangle", "-S"]
    assert host.run([*mangle, "FORWARD"]).splitlines()[1] == f"-A FORWARD -j {FWD_CHAIN}"
    assert host.run([*mangle, "POSTROUTING"]).splitlines()[1] == f"-A POSTROUTING -j {OUT_CHAIN}"
    assert f"blackhole {SERVICE_CIDR}" in host.run(["ip", "route", "show", "type", "blackhole"])
    assert (
        host.read_sysctl("net.ipv4.ip_forward")
        == real_node.before["sysctls"]["net.ipv4.ip_forward"]
    ), "only the bridge forwards; the machine's own setting is untouched"
    assert host.read_sysctl(f"net.ipv4.conf.{BRIDGE}.forwarding") == "1"
    # A Service whose endpoint is off the machine: kube-proxy DNATs to it, the guard drops it.
    kube.apply(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "outside"},
                "spec": {"ports": [{"port": 80, "targetPort": 80}]},
            }
        ),
        "-n",
        ns,
    )
    kube.apply(
        json.dumps(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "outside-1",
                    "labels": {"kubernetes.io/service-name": "outside"},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [OFF_MACHINE]}],
                "ports": [{"port": 80, "protocol": "TCP", "name": ""}],
            }
        ),
        "-n",
        ns,
    )
    wait_for(lambda: OFF_MACHINE in host.run(["iptables-save", "-t", "nat"]), 30)
    drops, leaked = _drops(FWD_CHAIN), leak_counter()
    logs = run_to_completion(
        kube,
        ns,
        probe_pod(
            "leaker",
            real_node.probe_image,
            [
                f"noconnect:{OFF_MACHINE}:80",  # straight out
                f"noconnect:outside.{ns}.svc.cluster.local:80",  # through a Service
                "noconnect:10.96.255.254:80",  # a Service address nobody has
            ],
        ),
    )
    assert logs.count("OK noconnect:") == 3, logs
    assert leak_counter() == leaked, "a pod's packet got past the guards towards the sink"
    assert _drops(FWD_CHAIN) > drops, "the guard chain did not see the outward packets"
