"""How the store's pods survive voluntary disruptions (a node drain, a cluster upgrade): a
PodDisruptionBudget per kind of pod, and spreading over nodes when there are several."""

from __future__ import annotations

from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.common import metadata
from memorystore.operator.builders.model import Owner

HOSTNAME = "kubernetes.io/hostname"


def _budget(owner: Owner, name: str, component: str) -> dict[str, Any]:
    """At most one pod of `component` evicted at a time. maxUnavailable (not minAvailable)
    so that a single replica can still be drained off its node; a pod that is not ready
    may always be evicted (it serves nothing, and would otherwise block the drain)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(owner, name, component),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": names.selector_labels(owner.name, component)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def qdrant_disruption_budget(owner: Owner) -> dict[str, Any]:
    """One Qdrant peer down at a time: with spec.vectorStore.managed.replicationFactor ≥ 2
    every shard keeps a live copy through a node drain."""
    return _budget(owner, names.qdrant_disruption_budget_name(owner.name), names.QDRANT)


def memory_disruption_budget(owner: Owner) -> dict[str, Any]:
    return _budget(owner, names.memory_disruption_budget_name(owner.name), names.MEMORY_SERVICE)


def spread_over_nodes(store: str, component: str, replicas: int) -> dict[str, Any]:
    """A pod spec's topologySpreadConstraints for several replicas (absent for one, so a
    single-replica store renders, and rolls, exactly as before): as even as the nodes
    allow, never unschedulable for it."""
    if replicas <= 1:
        return {}
    return {
        "topologySpreadConstraints": [
            {
                "labelSelector": {"matchLabels": names.selector_labels(store, component)},
                "maxSkew": 1,
                "topologyKey": HOSTNAME,
                "whenUnsatisfiable": "ScheduleAnyway",
            }
        ]
    }
