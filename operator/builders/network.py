"""The NetworkPolicies that keep each store's pods to its own agents and its own service."""

from __future__ import annotations

from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.common import metadata
from memorystore.operator.builders.model import OperatorPods, Owner
from memorystore.operator.isolation import admitted_selectors
from memorystore.spec import MemoryStoreSpec


def _tcp(port: int) -> dict[str, Any]:
    return {"port": port, "protocol": "TCP"}


def qdrant_network_policy(owner: Owner) -> dict[str, Any]:
    """Only this store's memory service reaches Qdrant's API; only its peers reach p2p."""
    store = owner.name
    qdrant = {"matchLabels": names.selector_labels(store, names.QDRANT)}
    service = {"matchLabels": names.selector_labels(store, names.MEMORY_SERVICE)}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(owner, names.qdrant_network_policy_name(store), names.QDRANT),
        "spec": {
            "ingress": [
                {
                    "from": [{"podSelector": service}],
                    "ports": [_tcp(names.QDRANT_HTTP_PORT), _tcp(names.QDRANT_GRPC_PORT)],
                },
                {"from": [{"podSelector": qdrant}], "ports": [_tcp(names.QDRANT_P2P_PORT)]},
            ],
            "podSelector": qdrant,
            "policyTypes": ["Ingress"],
        },
    }


def operator_peer(pods: OperatorPods) -> dict[str, Any]:
    """The operator's own pods (it calls the backup API): exactly its namespace, by the
    name label the API server sets on every namespace, and its pods' labels there."""
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": pods.namespace}},
        "podSelector": {"matchLabels": dict(pods.labels)},
    }


def memory_network_policy(
    owner: Owner,
    spec: MemoryStoreSpec,
    operator_pods: OperatorPods | None = None,
    scrapers: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """Only this store's agent pods (and the operator) reach the memory service, on its port.

    Admitted: pods labelled `memorystore.dev/client: <store>` (unique to the store), plus
    the pods `spec.allowedAgentPods` matches. A podSelector without a namespaceSelector
    matches pods of this namespace only, so no agent pod of another namespace is ever
    admitted. With `operator_pods` (the operator runs in a cluster) the operator's pods too,
    by their namespace and labels, for backups; and the `scrapers` the chart names
    (`monitoring.scrapeFrom`), for /metrics.
    """
    store = owner.name
    peers = [{"podSelector": {"matchLabels": s}} for s in admitted_selectors(store, spec)]
    if operator_pods is not None:
        peers.append(operator_peer(operator_pods))
    peers += [dict(peer) for peer in scrapers]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(owner, names.memory_network_policy_name(store), names.MEMORY_SERVICE),
        "spec": {
            "ingress": [{"from": peers, "ports": [_tcp(names.SERVICE_PORT)]}],
            "podSelector": {"matchLabels": names.selector_labels(store, names.MEMORY_SERVICE)},
            "policyTypes": ["Ingress"],
        },
    }
