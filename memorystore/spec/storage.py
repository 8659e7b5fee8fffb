"""Where a store's data lives: the vectors (managed or external Qdrant, the engine embedded in
the service, or PostgreSQL with pgvector) and the service's state (SQLite on a volume, or
PostgreSQL). The tier is chosen once: the CRD refuses a switch (`operator/crd_rules.py`).
"""

from __future__ import annotations

from pydantic import Field

from memorystore.spec.base import Model
from memorystore.spec.kube import (
    LabelValue,
    Placed,
    SecretKeyRef,
    Storage,
    Toleration,
    node_selector_field,
    tolerations_field,
)
from memorystore.spec.sizing import QdrantResources

# points outside the embedded engine's HNSW graph before the service builds it
INDEX_AFTER = 20_000

__all__ = [
    "EmbeddedEngine",
    "ExternalQdrant",
    "HistoryDBSpec",
    "HistoryPostgres",
    "HistorySQLite",
    "ManagedQdrant",
    "PostgresSettings",
    "PostgresVectors",
    "VectorStoreSpec",
]


class ManagedQdrant(Placed):
    """A Qdrant StatefulSet run by the operator for this tenant."""

    replicas: int = Field(1, ge=1, le=9, description="Qdrant replicas.")
    shards: int = Field(
        1,
        ge=1,
        le=64,
        description="Shards of the collection, spread over the Qdrant replicas. Set when the "
        "memory service creates the collection; cannot change afterwards.",
    )
    replication_factor: int = Field(
        1,
        ge=1,
        le=9,
        description="Copies of each shard, each on a different Qdrant replica (at most "
        "replicas): with 2 or more, the memories stay readable while one Qdrant pod is down. "
        "Set when the memory service creates the collection, which it does once this many "
        "Qdrant replicas have joined the cluster (Qdrant adds no copy later); cannot change "
        "afterwards.",
    )
    storage: Storage = Field(default_factory=Storage, description="Per-replica volume.")
    resources: QdrantResources = Field(
        default_factory=QdrantResources,
        description="Resources of each Qdrant pod; requests and limits by default, derived "
        "from measurements.",
    )
    image: str | None = Field(None, description="Qdrant image; the chart's default if unset.")
    tls: bool = Field(
        True,
        description="Serve Qdrant's REST, gRPC and peer-to-peer ports over TLS with a "
        "certificate from the store's CA (Secret `<name>-qdrant-tls`, renewed by the operator), "
        "which the memory service verifies (the default). false: the API key and every memory "
        "cross the pod network in clear text.",
    )
    node_selector: dict[str, LabelValue] = node_selector_field("Qdrant pods")
    tolerations: list[Toleration] = tolerations_field("Qdrant pods")


class ExternalQdrant(Model):
    """A Qdrant server the tenant already runs."""

    url: str = Field(description="Qdrant URL, e.g. https://qdrant.example:6333.")
    api_key_secret_ref: SecretKeyRef | None = Field(None, description="Qdrant API key.")
    ca_secret_ref: SecretKeyRef | None = Field(
        None,
        description="CA certificate(s), PEM, the server's certificate is verified against "
        "(an https url), e.g. a private CA's; re-read when the Secret changes. Unset: the "
        "service image's trust store.",
    )


class EmbeddedEngine(Model):
    """The Qdrant engine inside the memory service's own process: one pod per tenant.

    Its files live on the service's data volume (`spec.historyDb.sqlite.storage`) beside the
    SQLite history, so one volume holds the tenant's memory. The engine locks its files for
    one process, so `spec.service.replicas` is 1.
    """

    index_after: int = Field(
        INDEX_AFTER,
        ge=0,
        description="Points outside the HNSW graph before the service builds it, in a child "
        "process beside it (searches scan those points meanwhile: ~2.5 ms per 20,000 on two "
        "cores; with the graph, ~2 ms at 100,000). 0: never built, every search scans.",
    )


class PostgresSettings(Model):
    """How each memory-service replica uses a PostgreSQL database.

    The same fields, bounds and defaults as the service config's `PostgresConnection`
    (`memorystore.config`), which the operator renders from these."""

    pool_size: int = Field(
        10,
        ge=2,
        le=200,
        description="Most pooled connections each memory-service replica holds open to the "
        "database (one pool for queries and one for locks, each up to this size): size the "
        "database's max_connections for replicas × 2 × poolSize.",
    )
    statement_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=600,
        description="Longest a single statement may run before it fails (the request "
        "then answers 503).",
    )


# A DSN in a Secret: a CloudNativePG cluster's `<cluster>-app` Secret, key `uri`, works as is.
_DSN_SECRET = (
    "Secret key holding a PostgreSQL connection URI or key=value DSN, password included (a "
    "CloudNativePG cluster's `<cluster>-app` Secret, key `uri`, works as is). Passed to the "
    "memory service as an environment variable from the Secret, never copied into a ConfigMap."
)


class PostgresVectors(Model):
    """Vectors in PostgreSQL with pgvector (HNSW); keyword search runs in PostgreSQL too."""

    dsn_secret_ref: SecretKeyRef | None = Field(
        None,
        description=f"{_DSN_SECRET} Unset: the database of spec.historyDb.postgres (which must "
        "then be set).",
    )
    hnsw_ef_search: int = Field(
        100,
        ge=10,
        le=1000,
        description="HNSW candidates examined per search: more finds more of the true nearest "
        "neighbours, more slowly.",
    )


class VectorStoreSpec(Model):
    """Where vectors live: exactly one of `managed`, `external`, `embedded` or `postgres`."""

    managed: ManagedQdrant | None = Field(None, description="Operator-managed Qdrant.")
    external: ExternalQdrant | None = Field(None, description="External Qdrant.")
    embedded: EmbeddedEngine | None = Field(
        None,
        description="The Qdrant engine in the memory service's process, on its data volume "
        "(spec.historyDb.sqlite.storage): one pod, at most one replica. Set as `embedded: {}`.",
    )
    postgres: PostgresVectors | None = Field(
        None,
        description="PostgreSQL with the pgvector extension, shared by every service replica: "
        "by default the database of spec.historyDb.postgres (set as `postgres: {}`), or "
        "another one (dsnSecretRef). The database needs pgvector installed.",
    )
    collection: str = Field(
        "memories",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="Collection name. Cannot change once created. With "
        "spec.vectorStore.postgres it names the vectors' tables, so stores that share a "
        "vector database need different ones.",
    )


class HistorySQLite(Model):
    storage: Storage = Field(
        default_factory=Storage,
        description="The memory service's data volume: the SQLite file, and with "
        "spec.vectorStore.embedded the vectors too.",
    )


class HistoryPostgres(PostgresSettings):
    """The service's state in PostgreSQL: no data volume, and several replicas can serve."""

    dsn_secret_ref: SecretKeyRef = Field(
        description=f"{_DSN_SECRET} The database is the store's own: its tables have fixed names."
    )


class HistoryDBSpec(Model):
    sqlite: HistorySQLite | None = Field(
        None, description="SQLite files on a ReadWriteOnce volume: one service replica."
    )
    postgres: HistoryPostgres | None = Field(
        None,
        description="PostgreSQL: the service's state (history, idempotency records, scope "
        "order and locks, session journal, exports) in a database every replica shares, so "
        "spec.service.replicas may exceed 1 (with spec.vectorStore.managed, external or "
        "postgres). No data volume is created. spec.backup and spec.restore do not apply: "
        "back the database up with its own tools (pg_dump, CloudNativePG backups).",
    )
