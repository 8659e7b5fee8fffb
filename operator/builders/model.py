"""What the builders are given besides the spec: the store, the default images, the keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memorystore import __version__


@dataclass(frozen=True)
class Owner:
    """The MemoryStore being reconciled."""

    name: str
    namespace: str
    uid: str
    generation: int


@dataclass(frozen=True)
class Images:
    """Default images, from the operator's settings (`settings.py`: the Helm chart sets them)."""

    service: str = f"ghcr.io/memorystore/memory-service:{__version__}"
    qdrant: str = "qdrant/qdrant:v1.18.3"


@dataclass(frozen=True)
class Keys:
    """The generated keys, created once by the apply layer and kept in the keys Secret.

    For the children, `service_api_key` is the key agents are given: the current key of the
    service-key Secret (`keys.py`), which starts as the keys Secret's and rotates."""

    service_api_key: str
    qdrant_api_key: str


@dataclass(frozen=True)
class OperatorPods:
    """Where the operator's own pods are, so a store's NetworkPolicy admits them to the
    memory service (the operator calls its backup API). From the operator's settings
    (`settings.py`: the chart's env vars); running outside a cluster there are none, and no
    peer is added."""

    namespace: str
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Monitoring:
    """How every store's memory service is scraped (the chart's `monitoring` values, through
    the operator's settings). `pod_monitors`: a PodMonitor per store (applied only where the
    Prometheus Operator's CRD is served) with `interval` and `labels` (what a Prometheus
    selects PodMonitors by); `scrapers`: NetworkPolicy peers admitted to the service's port,
    where /metrics is served (the API itself still wants the store's key)."""

    pod_monitors: bool = False
    interval: str = "30s"
    labels: tuple[tuple[str, str], ...] = ()
    scrapers: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Restore:
    """A backup to restore before the service starts (spec.restore.fromBackup, Succeeded):
    the claim that holds it and its directory on that claim."""

    claim: str
    path: str
