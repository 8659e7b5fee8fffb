"""NetworkPolicies enforced on the real node: the product's own policies (operator builders)
applied to real pods, checked with real connections, pod IP and Service alike.

The real node runs kube-network-policies beside the kubelet
(dev/memorystore_dev/devcluster/netpol.py, an addon every RealNode starts). Probes run inside
long-lived pods (`kubectl exec`), so each pod's address is in the API before it connects: the
enforcer knows who is asking.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from memorystore.operator import names
from memorystore.operator.builders.model import Owner
from memorystore.operator.builders.network import memory_network_policy, qdrant_network_policy
from memorystore.spec import MemoryStoreSpec
from memorystore_dev.devcluster import netpol
from memorystore_dev.devcluster.node import FWD_CHAIN
from memorystore_dev.devcluster.node import host as node_host
from support.netpol_pods import Pods, without_owner
from support.real_node import RealNodeRun
from support.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

STORE = "acme"
AGENT = {names.CLIENT_POD_LABEL: STORE}


@pytest.fixture
def namespaces(real_node: RealNodeRun) -> Iterator[tuple[str, str]]:
    suffix = uuid.uuid4().hex[:6]
    pair = (f"netpol-{suffix}", f"netpol-elsewhere-{suffix}")
    for name in pair:
        real_node.kube.kubectl("create", "namespace", name)
    yield pair
    for name in pair:
        real_node.kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_the_enforcer_runs_beside_the_real_node_after_its_guard(real_node: RealNodeRun):
    enforcers = [a for a in real_node.node.addons if isinstance(a, netpol.NetworkPolicyEnforcer)]
    assert len(enforcers) == 1 and enforcers[0].alive()
    assert enforcers[0].queue in netpol.read_bound_queues()
    forward = node_host.run(["iptables", "-t", "mangle", "-S", "FORWARD"]).splitlines()
    jumps = [line for line in forward if line.startswith("-A FORWARD")]
    # the node's guard sees every packet first; the queue follows it
    assert jumps[0] == f"-A FORWARD -j {FWD_CHAIN}"
    assert f"-A FORWARD -j {netpol.CHAIN}" in jumps[1:]


def test_the_products_policies_admit_only_the_stores_agents_on_real_pods(
    real_node: RealNodeRun, namespaces: tuple[str, str]
):
    ns, elsewhere = namespaces
    pods = Pods(real_node)
    owner = Owner(name=STORE, namespace=ns, uid=str(uuid.uuid4()), generation=1)
    service_labels = names.selector_labels(STORE, names.MEMORY_SERVICE)
    qdrant_labels = names.selector_labels(STORE, names.QDRANT)
    port, qport = names.SERVICE_PORT, names.QDRANT_HTTP_PORT

    pods.start(ns, "memory", port, service_labels)
    pods.start(ns, "qdrant", qport, qdrant_labels)
    pods.start(ns, "agent", 9000, AGENT)
    pods.start(ns, "stranger", 9000, {"app": "stranger"})
    pods.start(elsewhere, "agent", 9000, AGENT)  # the right label in another namespace
    memory, qdrant = pods.ready(ns, "memory"), pods.ready(ns, "qdrant")
    for where, name in ((ns, "agent"), (ns, "stranger"), (elsewhere, "agent")):
        pods.ready(where, name)
    real_node.kube.kubectl("expose", "pod", "memory", f"--port={port}", "-n", ns)
    by_name = f"memory.{ns}.svc.cluster.local:{port}"

    # Control: before any policy everyone reaches everything.
    assert pods.reaches(ns, "stranger", f"{memory}:{port}")
    assert pods.reaches(ns, "agent", f"{qdrant}:{qport}")

    spec = MemoryStoreSpec.model_validate({})
    for policy in (memory_network_policy(owner, spec), qdrant_network_policy(owner)):
        real_node.kube.apply(json.dumps(without_owner(policy)), "-n", ns)
    # the enforcer applies what it has seen: wait until the stranger is turned away
    wait_for(lambda: not pods.reaches(ns, "stranger", f"{memory}:{port}"), timeout=60, every=1)

    assert pods.reaches(ns, "agent", f"{memory}:{port}")
    assert pods.reaches(ns, "agent", by_name)  # through the Service (kube-proxy's DNAT)
    assert not pods.reaches(ns, "stranger", by_name)
    assert not pods.reaches(elsewhere, "agent", f"{memory}:{port}")
    assert not pods.reaches(elsewhere, "agent", by_name)
    # only the memory service reaches Qdrant; an agent of the store does not
    assert pods.reaches(ns, "memory", f"{qdrant}:{qport}")
    assert not pods.reaches(ns, "agent", f"{qdrant}:{qport}")

    # a pod that gains the label is admitted; losing it turns it away again
    real_node.kube.kubectl(
        "label", "pod", "stranger", "-n", ns, f"{names.CLIENT_POD_LABEL}={STORE}"
    )
    wait_for(lambda: pods.reaches(ns, "stranger", f"{memory}:{port}"), timeout=60, every=1)
    real_node.kube.kubectl("label", "pod", "stranger", "-n", ns, f"{names.CLIENT_POD_LABEL}-")
    wait_for(lambda: not pods.reaches(ns, "stranger", f"{memory}:{port}"), timeout=60, every=1)

    # without the policies everyone is back in
    real_node.kube.kubectl("delete", "networkpolicy", "--all", "-n", ns)
    wait_for(lambda: pods.reaches(ns, "stranger", f"{memory}:{port}"), timeout=60, every=1)
    assert pods.reaches(ns, "agent", f"{qdrant}:{qport}")
