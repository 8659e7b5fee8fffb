"""The MemoryStore's spec: one tenant's memory, assembled from the parts the sibling modules
define. Its field order is the CRD's and the docs'.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from memorystore.spec.backup import BackupSpec, RestoreSpec
from memorystore.spec.base import Model
from memorystore.spec.kube import LabelSelector
from memorystore.spec.memory import (
    ConsolidationSettings,
    Mode,
    RecallSettings,
    RetrievalSettings,
    Scope,
)
from memorystore.spec.providers import CRDLLM, CRDEmbedder
from memorystore.spec.service import ServiceKeySpec, ServiceSpec, TLSSpec
from memorystore.spec.storage import (
    HistoryDBSpec,
    HistorySQLite,
    ManagedQdrant,
    VectorStoreSpec,
)

__all__ = [
    "DeletionPolicy",
    "MemoryStoreSpec",
]


class DeletionPolicy(StrEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


class MemoryStoreSpec(Model):
    """One tenant's memory."""

    vector_store: VectorStoreSpec = Field(
        default_factory=lambda: VectorStoreSpec(managed=ManagedQdrant()),
        description="Where vectors live: exactly one of managed (the default), external, "
        "embedded or postgres.",
    )
    history_db: HistoryDBSpec = Field(
        default_factory=lambda: HistoryDBSpec(sqlite=HistorySQLite()),
        description="Where the service's state lives (change history, idempotency records, "
        "sessions): exactly one of sqlite (the default) or postgres.",
    )
    embedder: CRDEmbedder = Field(default_factory=CRDEmbedder, description="Embedding model.")
    llm: CRDLLM | None = Field(None, description="Extraction model; none stores text as is.")
    scope: Scope = Field(Scope.USER, description="Whose memory an agent reads and writes.")
    mode: Mode = Field(Mode.BOTH, description="Who decides when memory is read and written.")
    recall: RecallSettings = Field(default_factory=RecallSettings, description="Recall budgets.")
    consolidation: ConsolidationSettings = Field(
        default_factory=ConsolidationSettings,
        description="De-duplication, supersession and session-end consolidation.",
    )
    retrieval: RetrievalSettings = Field(
        default_factory=RetrievalSettings, description="How memories are found (offline)."
    )
    service: ServiceSpec = Field(default_factory=ServiceSpec, description="Memory service.")
    allowed_agent_pods: LabelSelector = Field(
        default_factory=LabelSelector,
        description="Pods of the store's namespace allowed to reach the memory service besides "
        "those labelled memorystore.dev/client=<store name>, which are always allowed. Empty "
        "(the default): only those. Pods of other namespaces are never allowed. If two stores "
        "in one namespace could admit the same pod, the AgentPodsIsolated condition turns "
        "False and a Warning Event names both.",
    )
    deletion_policy: DeletionPolicy = Field(
        DeletionPolicy.RETAIN, description="Retain keeps volumes and data on deletion."
    )
    suspend: bool = Field(False, description="Scale to zero and keep the data.")
    tls: TLSSpec = Field(
        default_factory=TLSSpec,
        description="HTTPS between agents and the memory service (on by default).",
    )
    service_key: ServiceKeySpec = Field(
        default_factory=ServiceKeySpec,
        description="The tenant's service key: rotation without downtime.",
    )
    backup: BackupSpec | None = Field(
        None,
        description="Backups: the target volume, an optional schedule and how many scheduled "
        "backups to keep. Unset: MemoryStoreBackups naming this store fail. Not with "
        "spec.historyDb.postgres or spec.vectorStore.postgres: back the database up with its "
        "own tools (pg_dump, CloudNativePG backups).",
    )
    restore: RestoreSpec | None = Field(
        None,
        description="Start from a backup (MemoryStoreBackup). Only when the store is created: "
        "it cannot be added, changed or removed afterwards. Not with spec.historyDb.postgres "
        "or spec.vectorStore.postgres (restore the database with its own tools).",
    )
