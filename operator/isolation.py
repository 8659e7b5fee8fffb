"""Which pods may reach a store's memory service, and which stores would admit the same pods.

Pure functions. Every store's NetworkPolicy admits pods carrying the label unique to that
store (`memorystore.dev/client: <store>`) plus whatever `spec.allowedAgentPods` adds. Two
stores in one namespace are isolated from each other's agents only if no single pod could
carry labels that both policies admit; when one could, the operator warns (a condition and
an Event) instead of silently sharing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memorystore.operator.names import CLIENT_POD_LABEL
from memorystore.spec import MemoryStoreSpec


def client_pod_labels(store: str) -> dict[str, str]:
    """The label an agent pod carries to reach this store's service (docs/kubernetes.md)."""
    return {CLIENT_POD_LABEL: store}


def admitted_selectors(store: str, spec: MemoryStoreSpec) -> list[dict[str, str]]:
    """The podSelectors (matchLabels) the store's NetworkPolicy admits, unique label first."""
    selectors = [client_pod_labels(store)]
    extra = spec.allowed_agent_pods.match_labels
    if extra:
        selectors.append(dict(sorted(extra.items())))
    return selectors


def compatible(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """True when one pod could match both selectors: no key is required with two values."""
    return all(b[key] == value for key, value in a.items() if key in b)


@dataclass(frozen=True)
class Overlap:
    """Another store whose policy admits pods this store's policy admits too."""

    store: str
    labels: dict[str, str]  # a label set one pod would need to be admitted by both

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        return f"{self.store} (a pod labelled {shown})"


def overlaps(
    store: str, spec: MemoryStoreSpec, others: Mapping[str, MemoryStoreSpec]
) -> list[Overlap]:
    """Stores in the same namespace that would admit a pod this store admits, by name."""
    mine = admitted_selectors(store, spec)
    found: list[Overlap] = []
    for other in sorted(others):
        if other == store:
            continue
        pair = next(
            (
                (a, b)
                for a in mine
                for b in admitted_selectors(other, others[other])
                if compatible(a, b)
            ),
            None,
        )
        if pair is not None:
            found.append(Overlap(other, {**pair[0], **pair[1]}))
    return found


def overlap_message(store: str, found: list[Overlap]) -> str:
    """For the condition and the Event: what is shared and how to separate it."""
    return (
        f"the memory service of {store} admits the same agent pods as "
        + "; ".join(o.describe() for o in found)
        + f". Give each store's agent pods only its own label ({CLIENT_POD_LABEL}: <store>) "
        "and distinct spec.allowedAgentPods, or put each tenant in its own namespace."
    )
