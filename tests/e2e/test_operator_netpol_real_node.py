"""The operator's NetworkPolicy (the chart's, rendered by the pinned helm) enforced on the real
node: probe pods carrying the operator's labels are reached only on the health and metrics
ports, and reach the API server, cluster DNS and the memory services of the watched
namespace on the service's port, nothing else.

The policy comes from `helm template` exactly as an install renders it, with the API
server's address and port read from the `kubernetes` EndpointSlice (what docs/kubernetes.md
tells an installer to put in networkPolicy.apiServer). The enforcer
(kube-network-policies, dev/memorystore_dev/devcluster/netpol.py) polices pod-to-pod
traffic; the API server and DNS of this harness live on the node's bridge address, so for
them this test shows the allow side only (they stay reachable under the policy).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from memorystore.operator import names
from memorystore_dev.devcluster.tools import ensure_tools
from support.netpol_pods import Pods
from support.paths import REPO
from support.real_node import RealNodeRun
from support.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CHART = REPO / "charts" / "memorystore"
RELEASE = "ms"
HEALTH, METRICS = 8080, 9090


@pytest.fixture
def namespaces(real_node: RealNodeRun) -> Iterator[tuple[str, str, str]]:
    suffix = uuid.uuid4().hex[:6]
    trio = (f"op-{suffix}", f"tenant-{suffix}", f"other-{suffix}")
    for name in trio:
        real_node.kube.kubectl("create", "namespace", name)
    yield trio
    for name in trio:
        real_node.kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def api_server(run: RealNodeRun) -> tuple[str, int]:
    """The address and port pods reach after the `kubernetes` Service's DNAT."""
    slices = run.kube.get(
        "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes"
    )["items"]
    (endpoint_slice,) = slices
    address = endpoint_slice["endpoints"][0]["addresses"][0]
    (port,) = [p["port"] for p in endpoint_slice["ports"]]
    return address, int(port)


def chart_policy(operator_ns: str, watched: str, api: tuple[str, int]) -> dict[str, Any]:
    helm = ensure_tools(["helm"])["helm"]
    out = subprocess.run(
        [
            str(helm),
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            operator_ns,
            "--set",
            f"watch.namespaces={{{watched}}}",
            "--set",
            f"networkPolicy.apiServer.cidrs={{{api[0]}/32}}",
            "--set",
            f"networkPolicy.apiServer.ports={{{api[1]}}}",
            "--show-only",
            "templates/networkpolicy.yaml",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return yaml.safe_load(out.stdout)


def test_the_operators_policy_admits_probes_and_metrics_and_lets_out_only_what_it_needs(
    real_node: RealNodeRun, namespaces: tuple[str, str, str]
):
    op, tenant, other = namespaces
    pods = Pods(real_node)
    policy = chart_policy(op, tenant, api_server(real_node))
    operator_labels = policy["spec"]["podSelector"]["matchLabels"]
    service_labels = names.selector_labels("acme", names.MEMORY_SERVICE)
    port = names.SERVICE_PORT

    pods.start(op, "operator", METRICS, operator_labels)  # the metrics port
    pods.start(op, "operator-health", HEALTH, operator_labels)
    pods.start(op, "operator-other", 9000, operator_labels)  # a port the policy does not open
    pods.start(op, "stranger", 9000, {"app": "stranger"})
    # `memory` also carries a label of its own: the Services below select it alone (the
    # service labels would also select `memory-other-port`, which refuses port 8765)
    memory_labels = {**service_labels, "probe-target": "memory"}
    pods.start(tenant, "memory", port, memory_labels)
    pods.start(tenant, "memory-other-port", 9000, service_labels)
    pods.start(tenant, "unlabelled", port, {"app": "something-else"})
    pods.start(other, "memory", port, memory_labels)  # a namespace the operator does not watch
    ip = {
        (ns, name): pods.ready(ns, name)
        for ns, name in [
            (op, "operator"),
            (op, "operator-health"),
            (op, "operator-other"),
            (op, "stranger"),
            (tenant, "memory"),
            (tenant, "memory-other-port"),
            (tenant, "unlabelled"),
            (other, "memory"),
        ]
    }

    # Control: before the policy the operator's pod reaches everything, and is reached.
    assert pods.reaches(op, "operator", f"{ip[other, 'memory']}:{port}")
    assert pods.reaches(op, "stranger", f"{ip[op, 'operator-other']}:9000")

    real_node.kube.apply(json.dumps(policy), "-n", op)
    wait_for(
        lambda: not pods.reaches(op, "operator", f"{ip[other, 'memory']}:{port}"),
        timeout=60,
        every=1,
    )

    # egress: the watched namespace's memory services on their port, and nothing else
    assert pods.reaches(op, "operator", f"{ip[tenant, 'memory']}:{port}")
    assert not pods.reaches(op, "operator", f"{ip[tenant, 'memory-other-port']}:9000")
    assert not pods.reaches(op, "operator", f"{ip[tenant, 'unlabelled']}:{port}")
    assert not pods.reaches(op, "operator", f"{ip[other, 'memory']}:{port}")
    assert not pods.reaches(op, "operator", f"{ip[op, 'stranger']}:9000")
    # ... through a Service too (kube-proxy's DNAT happens before the policy is applied)
    for ns in (tenant, other):
        selector = "--selector=probe-target=memory"
        real_node.kube.kubectl("expose", "pod", "memory", f"--port={port}", selector, "-n", ns)
    # the new Services work once kube-proxy and DNS have them: the stranger (no policy
    # selects it) reaches both, so the operator's refusal below is the policy's
    for ns in (tenant, other):
        service = f"memory.{ns}.svc.cluster.local:{port}"
        wait_for(lambda s=service: pods.reaches(op, "stranger", s), timeout=60, every=1)
    assert pods.reaches(op, "operator", f"memory.{tenant}.svc.cluster.local:{port}")
    assert not pods.reaches(op, "operator", f"memory.{other}.svc.cluster.local:{port}")
    # the API server (with the pod's token and CA) and cluster DNS stay reachable
    assert pods.check(op, "operator", "api", "dns:kubernetes.default.svc.cluster.local")

    # ingress: the health and metrics ports from anywhere, nothing else
    assert pods.reaches(op, "stranger", f"{ip[op, 'operator']}:{METRICS}")
    assert pods.reaches(tenant, "unlabelled", f"{ip[op, 'operator']}:{METRICS}")
    assert pods.reaches(op, "stranger", f"{ip[op, 'operator-health']}:{HEALTH}")
    assert not pods.reaches(op, "stranger", f"{ip[op, 'operator-other']}:9000")
    assert not pods.reaches(tenant, "memory", f"{ip[op, 'operator-other']}:9000")

    # without the policy everything is open again
    real_node.kube.kubectl("delete", "networkpolicy", "--all", "-n", op)
    wait_for(
        lambda: pods.reaches(op, "operator", f"{ip[other, 'memory']}:{port}"),
        timeout=60,
        every=1,
    )
    assert pods.reaches(op, "stranger", f"{ip[op, 'operator-other']}:9000")
