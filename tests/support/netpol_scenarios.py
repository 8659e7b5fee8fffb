"""Random NetworkPolicy scenarios the API server accepts: two namespaces, four pods at fixed
addresses, up to three policies. Shared by the oracle's unit properties and the differential
test that replays them against the real enforcer (tests/integration/test_netpol_enforcer.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from support.netpol_model import ContainerPort, Pod

NAMESPACES = ("np-a", "np-b")
SUBNET = "10.244.200"  # the lab bridge's network (never routed off the machine)
POD_SLOTS = (("np-a", "p0", 10), ("np-a", "p1", 11), ("np-b", "p2", 12), ("np-b", "p3", 13))
PROBES = (("TCP", 8080), ("TCP", 8081), ("UDP", 8080))  # every pod serves all three
POD_LABELS = {"role": ("x", "y"), "tier": ("1", "2")}
NS_LABELS = {"team": ("a", "b"), "env": ("dev", "prod")}
IP_BLOCKS = (
    {"cidr": f"{SUBNET}.8/30"},  # p0, p1
    {"cidr": f"{SUBNET}.12/30"},  # p2, p3
    {"cidr": f"{SUBNET}.0/24", "except": [f"{SUBNET}.10/32"]},  # all but p0
    {"cidr": f"{SUBNET}.0/24", "except": [f"{SUBNET}.12/31", f"{SUBNET}.11/32"]},
    {"cidr": "10.99.0.0/16"},  # no pod
)


@dataclass(frozen=True)
class Scenario:
    namespaces: dict[str, dict[str, str]]
    pods: tuple[Pod, ...]
    policies: tuple[dict[str, Any], ...]


def labels(space: dict[str, tuple[str, ...]]) -> st.SearchStrategy[dict[str, str]]:
    """A label set drawing each key from `space` or leaving it out."""
    return st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in space.items()})


def nonempty_labels(space: dict[str, tuple[str, ...]]) -> st.SearchStrategy[dict[str, str]]:
    """A label set with at least one key of `space` (a matchLabels that constrains)."""
    keys = st.lists(st.sampled_from(sorted(space)), min_size=1, unique=True)
    return keys.flatmap(
        lambda ks: st.fixed_dictionaries({k: st.sampled_from(space[k]) for k in ks})
    )


def expression(space: dict[str, tuple[str, ...]]) -> st.SearchStrategy[dict[str, Any]]:
    key = st.sampled_from(sorted(space))
    with_values = st.tuples(key, st.sampled_from(["In", "NotIn"])).flatmap(
        lambda kv: st.lists(st.sampled_from(space[kv[0]]), min_size=1, max_size=2, unique=True).map(
            lambda vs: {"key": kv[0], "operator": kv[1], "values": vs}
        )
    )
    without = st.tuples(key, st.sampled_from(["Exists", "DoesNotExist"])).map(
        lambda kv: {"key": kv[0], "operator": kv[1]}
    )
    return st.one_of(with_values, without)


def selector(space: dict[str, tuple[str, ...]]) -> st.SearchStrategy[dict[str, Any]]:
    """A LabelSelector: {} (everything), matchLabels, matchExpressions or both."""
    return st.fixed_dictionaries(
        {},
        optional={
            "matchLabels": nonempty_labels(space),
            "matchExpressions": st.lists(expression(space), min_size=1, max_size=2),
        },
    )


def peer() -> st.SearchStrategy[dict[str, Any]]:
    pods, spaces = selector(POD_LABELS), selector(NS_LABELS)
    return st.one_of(
        st.builds(lambda p: {"podSelector": p}, pods),
        st.builds(lambda n: {"namespaceSelector": n}, spaces),
        st.builds(lambda p, n: {"podSelector": p, "namespaceSelector": n}, pods, spaces),
        st.sampled_from(IP_BLOCKS).map(lambda b: {"ipBlock": dict(b)}),
    )


def port() -> st.SearchStrategy[dict[str, Any]]:
    protocol = st.sampled_from(["TCP", "UDP"])
    numbered = st.fixed_dictionaries(
        {"port": st.sampled_from([8080, 8081])},
        optional={"protocol": protocol, "endPort": st.just(8081)},
    ).filter(lambda p: p.get("endPort", p["port"]) >= p["port"])
    named = st.fixed_dictionaries(
        {"port": st.sampled_from(["web", "alt", "echo"])}, optional={"protocol": protocol}
    )
    any_port = st.fixed_dictionaries({"protocol": protocol})
    return st.one_of(numbered, named, any_port)


def rule(peers_key: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            peers_key: st.lists(peer(), min_size=0, max_size=2),
            "ports": st.lists(port(), min_size=0, max_size=2),
        },
    )


@st.composite
def policy(draw: st.DrawFn, index: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": draw(selector(POD_LABELS))}
    types = draw(st.sampled_from([None, ["Ingress"], ["Egress"], ["Ingress", "Egress"]]))
    if types is not None:
        spec["policyTypes"] = types
    for key, peers_key in (("ingress", "from"), ("egress", "to")):
        rules = draw(st.none() | st.lists(rule(peers_key), min_size=0, max_size=2))
        if rules is not None:
            spec[key] = rules
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"policy-{index}", "namespace": draw(st.sampled_from(NAMESPACES))},
        "spec": spec,
    }


def container_ports(last: int) -> tuple[ContainerPort, ...]:
    """Fixed per slot (a pod's ports are immutable): `web` is 8080 on even slots, 8081 on odd."""
    web = 8080 if last % 2 == 0 else 8081
    return (
        ContainerPort(web, "TCP", "web"),
        ContainerPort(8081 if web == 8080 else 8080, "TCP", "alt"),
        ContainerPort(8080, "UDP", "echo"),
    )


@st.composite
def pod(draw: st.DrawFn, namespace: str, name: str, last: int) -> Pod:
    addr = f"{SUBNET}.{last}"
    return Pod(namespace, name, addr, draw(labels(POD_LABELS)), container_ports(last))


@st.composite
def scenarios(draw: st.DrawFn, min_policies: int = 0, max_policies: int = 3) -> Scenario:
    namespaces = {ns: draw(labels(NS_LABELS)) for ns in NAMESPACES}
    pods = tuple(draw(pod(ns, name, last)) for ns, name, last in POD_SLOTS)
    count = draw(st.integers(min_policies, max_policies))
    policies = tuple(draw(policy(i)) for i in range(count))
    return Scenario(namespaces, pods, policies)


def pod_manifest(p: Pod, node: str) -> dict[str, Any]:
    """The Pod object for `p` (never run: bound to `node`, which no kubelet serves)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": p.name, "namespace": p.namespace, "labels": dict(p.labels)},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "c",
                    "image": "memorystore.local/none:0",
                    "ports": [
                        {"name": cp.name, "containerPort": cp.number, "protocol": cp.protocol}
                        for cp in p.ports
                    ],
                }
            ],
            "tolerations": [{"operator": "Exists"}],  # never evicted from the silent node
        },
    }
