"""A reference evaluator of Kubernetes NetworkPolicy (networking.k8s.io/v1) semantics.

Why: the oracle the real enforcer (dev/memorystore_dev/devcluster/netpol.py) is checked against,
and a way to state what the product's own policies admit. Written from the API reference, not
from any implementation: policies are plain API dicts (the same dicts tests send to the API
server), so nothing is translated twice.

Semantics (https://kubernetes.io/docs/concepts/services-networking/network-policies/):
- A pod is isolated for a direction when a policy of its namespace selects it (podSelector)
  and that direction is among the policy's policyTypes (default: Ingress, plus Egress when
  the policy has egress rules). Not isolated: everything is allowed in that direction.
- Isolated: allowed iff some rule of some selecting policy of that direction matches. A rule
  with no peers matches every peer; with no ports, every port. Policies are additive.
- Peers: podSelector alone = pods of the policy's namespace; namespaceSelector alone = all
  pods of the matching namespaces; both = matching pods in matching namespaces; ipBlock =
  the address is in cidr and in no except (applied to pod addresses too).
- Ports: protocol (default TCP) must equal; no port = every port; a number, a number range
  up to endPort, or a name resolved against the destination pod's container ports.
- A connection needs the source's egress and the destination's ingress; replies follow.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Labels = Mapping[str, str]
Policy = Mapping[str, Any]
NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class ContainerPort:
    number: int
    protocol: str = "TCP"
    name: str = ""


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    ip: str
    labels: Labels = field(default_factory=dict)
    ports: tuple[ContainerPort, ...] = ()


@dataclass(frozen=True)
class External:
    """An address that is no pod (selectors never match it; ipBlocks may)."""

    ip: str


Endpoint = Pod | External


def selector_matches(selector: Mapping[str, Any] | None, labels: Labels) -> bool:
    """LabelSelector semantics: matchLabels AND every matchExpression; {} matches all."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown selector operator {op!r}")
    return True


def policy_types(policy: Policy) -> set[str]:
    """The explicit policyTypes, else the API server's default for this spec."""
    spec = policy["spec"]
    if spec.get("policyTypes"):
        return set(spec["policyTypes"])
    return {"Ingress", "Egress"} if spec.get("egress") else {"Ingress"}


def _namespace_labels(namespaces: Mapping[str, Labels], name: str) -> dict[str, str]:
    """A namespace's labels, with the name label the API server always sets."""
    return {**namespaces.get(name, {}), NAME_LABEL: name}


def peer_matches(
    peer: Mapping[str, Any],
    policy_namespace: str,
    endpoint: Endpoint,
    namespaces: Mapping[str, Labels],
) -> bool:
    """Whether one `from`/`to` entry matches the other end of the connection."""
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        ip = ipaddress.ip_address(endpoint.ip)
        if ip not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(ip in ipaddress.ip_network(e) for e in block.get("except") or [])
    if not isinstance(endpoint, Pod):
        return False
    pod_sel, ns_sel = peer.get("podSelector"), peer.get("namespaceSelector")
    if pod_sel is None and ns_sel is None:
        raise ValueError(f"a peer needs podSelector, namespaceSelector or ipBlock: {peer}")
    if pod_sel is not None and not selector_matches(pod_sel, endpoint.labels):
        return False
    if ns_sel is None:
        return endpoint.namespace == policy_namespace
    return selector_matches(ns_sel, _namespace_labels(namespaces, endpoint.namespace))


def port_matches(
    ports: Sequence[Mapping[str, Any]] | None, destination: Endpoint, port: int, protocol: str
) -> bool:
    """Whether a rule's `ports` admit `protocol`/`port` on `destination`."""
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        want = entry.get("port")
        if want is None:
            return True
        if isinstance(want, str):
            if isinstance(destination, Pod) and any(
                p.name == want and p.number == port and p.protocol == protocol
                for p in destination.ports
            ):
                return True
            continue
        end = entry.get("endPort")
        if want == port or (end is not None and want <= port <= end):
            return True
    return False


def _selecting(policies: Iterable[Policy], pod: Pod, direction: str) -> list[Policy]:
    return [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and selector_matches(p["spec"].get("podSelector", {}), pod.labels)
        and direction in policy_types(p)
    ]


def direction_allows(
    policies: Iterable[Policy],
    namespaces: Mapping[str, Labels],
    subject: Endpoint,
    other: Endpoint,
    destination: Endpoint,
    port: int,
    protocol: str,
    direction: str,
) -> bool:
    """Whether `subject`'s `direction` policies let it talk to `other` (ports: `destination`)."""
    if not isinstance(subject, Pod):
        return True  # only pods are isolated
    selecting = _selecting(policies, subject, direction)
    if not selecting:
        return True
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(key) or []:
            if not port_matches(rule.get("ports"), destination, port, protocol):
                continue
            peers = rule.get(peers_key) or []
            namespace = policy["metadata"]["namespace"]
            if not peers or any(peer_matches(p, namespace, other, namespaces) for p in peers):
                return True
    return False


def allowed(
    policies: Iterable[Policy],
    namespaces: Mapping[str, Labels],
    source: Endpoint,
    destination: Endpoint,
    port: int,
    protocol: str = "TCP",
) -> bool:
    """Whether a new connection from `source` to `destination`:`port`/`protocol` is allowed."""
    policies = list(policies)
    return direction_allows(
        policies, namespaces, source, destination, destination, port, protocol, "Egress"
    ) and direction_allows(
        policies, namespaces, destination, source, destination, port, protocol, "Ingress"
    )
