"""What the builders are given besides the spec: the store, the default images, the keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Owner:
    """The MemoryStore being reconciled."""

    name: str
    namespace: str
    uid: str
    generation: int


@dataclass(frozen=True)
class Images:
    """Default images, from the operator's settings (the Helm chart sets them)."""

    service: str = "ghcr.io/memorystore/memory-service:0.1.0"
    qdrant: str = "qdrant/qdrant:v1.16.1"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Images:
        """MEMORYSTORE_SERVICE_IMAGE / MEMORYSTORE_QDRANT_IMAGE (the chart's values) win."""
        return cls(
            service=env.get("MEMORYSTORE_SERVICE_IMAGE") or cls.service,
            qdrant=env.get("MEMORYSTORE_QDRANT_IMAGE") or cls.qdrant,
        )


@dataclass(frozen=True)
class Keys:
    """The generated keys, created once by the apply layer and kept in the keys Secret.

    For the children, `service_api_key` is the key agents are given: the current key of the
    service-key Secret (`keys.py`), which starts as the keys Secret's and rotates."""

    service_api_key: str
    qdrant_api_key: str
