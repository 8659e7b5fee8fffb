"""The two config files the operator renders: service.yaml for the memory service, client.yaml
for agent pods. Pure, and they assume a spec `check_spec` accepted."""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from memorystore.config import ClientConfig, ServiceConfig
from memorystore.operator import names
from memorystore.operator.builders.model import Owner
from memorystore.operator.builders.paths import (
    BACKUP_DIR,
    BACKUP_SIGNING_KEY_FILE,
    CLIENT_CA_FILE,
    CLIENT_KEY_FILE,
    DATA_DIR,
    EMBEDDED_QDRANT_PATH,
    EMBEDDER_KEY_FILE,
    HISTORY_DSN_FILE,
    HISTORY_PATH,
    LLM_KEY_FILE,
    PREVIOUS_SERVICE_KEY_FILE,
    QDRANT_CA_FILE,
    QDRANT_KEY_FILE,
    SERVICE_KEY_FILE,
    TLS_CERT_FILE,
    TLS_KEY_FILE,
    VECTOR_DSN_FILE,
)
from memorystore.spec import EmbedderMigration, MemoryStoreSpec


def service_config(owner: Owner, spec: MemoryStoreSpec, *, backup: bool = False) -> ServiceConfig:
    """The config the memory service runs with: every secret a `{file: PATH}` reference
    to a mounted Secret key (secret_files.py mounts the same paths).
    `backup`: spec.backup.volume's claim exists and is mounted, so backups go there.

    Needs a spec `check_spec` accepted (it checks these same data against the model)."""
    return ServiceConfig.model_validate(service_config_data(owner, spec, backup=backup))


def service_config_data(
    owner: Owner, spec: MemoryStoreSpec, *, backup: bool = False
) -> dict[str, Any]:
    """The service config's fields before validation, so that `check_spec` can name the spec
    field behind each problem. Needs a spec with one vector store tier and one history."""
    vs = spec.vector_store
    vector_store: dict[str, Any] = {"collection": vs.collection}
    if vs.embedded is not None:
        vector_store["embedded"] = {
            "path": EMBEDDED_QDRANT_PATH,
            "indexAfter": vs.embedded.index_after,
        }
    elif vs.postgres is not None:
        vector_store["postgres"] = {"hnswEfSearch": vs.postgres.hnsw_ef_search}
        if vs.postgres.dsn_secret_ref is not None:  # else: the history's database
            vector_store["postgres"]["database"] = {"dsn": {"file": VECTOR_DSN_FILE}}
    elif vs.managed is not None:
        vector_store["server"] = {
            "url": names.qdrant_url(owner.name, owner.namespace, tls=vs.managed.tls),
            "apiKey": {"file": QDRANT_KEY_FILE},
            # Always written out: a distributed Qdrant's own default is one shard per peer.
            "shardNumber": vs.managed.shards,
            "replicationFactor": vs.managed.replication_factor,
        }
        if vs.managed.tls:
            vector_store["server"]["ca"] = {"file": QDRANT_CA_FILE}
    else:
        assert vs.external is not None
        vector_store["server"] = {"url": vs.external.url}
        if vs.external.api_key_secret_ref is not None:
            vector_store["server"]["apiKey"] = {"file": QDRANT_KEY_FILE}
        if vs.external.ca_secret_ref is not None:
            vector_store["server"]["ca"] = {"file": QDRANT_CA_FILE}
    embedder = spec.embedder.model_dump(
        by_alias=True, exclude_none=True, mode="json", exclude={"api_key_secret_ref"}
    )
    if spec.embedder.api_key_secret_ref is not None:
        embedder["apiKey"] = {"file": EMBEDDER_KEY_FILE}
    data: dict[str, Any] = {
        "tenant": names.tenant(owner.name, owner.namespace),
        "listen": {"host": "0.0.0.0", "port": names.SERVICE_PORT},
        "dataDir": DATA_DIR,
        "apiKey": {"file": SERVICE_KEY_FILE},
        "previousApiKey": {"file": PREVIOUS_SERVICE_KEY_FILE, "optional": True},
        "vectorStore": vector_store,
        "history": _history(spec),
        "embedder": embedder,
        # No `recall`: agents send their budgets (client.yaml) with every recall, so a change
        # of spec.recall reaches them without restarting the service.
        "retrieval": spec.retrieval,
        "consolidation": spec.consolidation,
    }
    if spec.llm is not None:
        llm = spec.llm.model_dump(
            by_alias=True, exclude_none=True, mode="json", exclude={"api_key_secret_ref"}
        )
        if spec.llm.api_key_secret_ref is not None:
            llm["apiKey"] = {"file": LLM_KEY_FILE}
        data["llm"] = llm
    if spec.tls.enabled:
        data["tls"] = {"certFile": TLS_CERT_FILE, "keyFile": TLS_KEY_FILE}
    if backup:
        # signed with the store's backup key (the Secret the Deployment mounts), the key its
        # restore init container verifies with
        data["backup"] = {"path": BACKUP_DIR, "signingKey": {"file": BACKUP_SIGNING_KEY_FILE}}
    return data


def _history(spec: MemoryStoreSpec) -> dict[str, Any]:
    """SQLite on the data volume, or PostgreSQL with its DSN from the Secret (a file)."""
    pg = spec.history_db.postgres
    if pg is None:
        return {"path": HISTORY_PATH}
    return {
        "postgres": {
            "dsn": {"file": HISTORY_DSN_FILE},
            "poolSize": pg.pool_size,
            "statementTimeoutSeconds": pg.statement_timeout_seconds,
        }
    }


def client_config(owner: Owner, spec: MemoryStoreSpec, ca_cert: str | None = None) -> ClientConfig:
    """What agent pods mount: where the service is and where its key file is, never the key.

    With TLS and a known CA (`ca_cert`, which the client ConfigMap carries as ca.crt) the
    agents verify the service against that CA; with TLS and no CA known (a cert-manager
    issuer whose Secret has no ca.crt) against the system's trusted CAs. Needs a spec
    `check_spec` accepted."""
    tls = spec.tls.enabled
    return ClientConfig(
        endpoint=names.memory_endpoint(owner.name, owner.namespace, tls=tls),
        tenant=names.tenant(owner.name, owner.namespace),
        api_key={"file": CLIENT_KEY_FILE},
        scope=spec.scope,
        mode=spec.mode,
        recall=spec.recall,
        tls={"caFile": CLIENT_CA_FILE if tls and ca_cert else None},
    )


def _header(owner: Owner) -> str:
    return (
        f"# Rendered by memorystore-operator from MemoryStore {owner.namespace}/{owner.name}.\n"
        "# Edit the MemoryStore, not this file: the operator restores it.\n"
    )


def _yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, allow_unicode=True)


# Left out of the rendered service.yaml: `limits` and `recall` (the service's own defaults:
# the spec does not set limits, and its recall budgets are the agents'), `generate` (the
# operator generates keys, the service never does) and `optional` where it is false (the
# default; only previousApiKey is optional).
_SERVICE_EXCLUDE: dict[str, Any] = {
    "limits": True,
    "recall": True,
    "api_key": {"generate", "optional"},
    "previous_api_key": {"generate"},
    "vector_store": {
        "server": {"api_key": {"generate", "optional"}, "ca": {"generate", "optional"}},
        "postgres": {"database": {"dsn": {"generate", "optional"}}},
    },
    "history": {"postgres": {"dsn": {"generate", "optional"}}},
    "embedder": {"api_key": {"generate", "optional"}},
    "llm": {"api_key": {"generate", "optional"}},
    "backup": {"signing_key": {"generate", "optional"}},
}
# The rendered client.yaml holds what the spec decides; agent-side knobs (timeouts,
# fail-open, capture, write permission) keep the middleware's defaults and env toggles.
_CLIENT_INCLUDE = {"endpoint", "tenant", "api_key", "scope", "mode", "recall", "tls"}


def render_service_config(owner: Owner, cfg: ServiceConfig) -> str:
    """service.yaml, by alias, without None; its sha256 rolls the service's pods."""
    exclude = _SERVICE_EXCLUDE
    if cfg.embedder.migration == EmbedderMigration():
        # the migration's defaults left out: the config (and its checksum, which rolls the
        # pods) of a store that leaves them alone stays as it was before they existed
        exclude = {**exclude, "embedder": {**exclude["embedder"], "migration": True}}
    data = cfg.model_dump(by_alias=True, exclude_none=True, mode="json", exclude=exclude)
    return _header(owner) + _yaml(data)


def render_client_config(owner: Owner, cfg: ClientConfig) -> str:
    """client.yaml, by alias, without None."""
    data = cfg.model_dump(
        by_alias=True,
        exclude_none=True,
        mode="json",
        include=_CLIENT_INCLUDE,
        # `verify` is the agent's own choice (MEMORYSTORE_VERIFY_TLS), never the operator's
        exclude={"api_key": {"generate", "optional"}, "tls": {"verify"}},
    )
    if not data.get("tls"):
        data.pop("tls", None)
    return _header(owner) + _yaml(data)


def config_checksum(text: str) -> str:
    """sha256 of a rendered file: a pod-template annotation, so a config change rolls pods."""
    return hashlib.sha256(text.encode()).hexdigest()
