"""The spec checks the schema cannot make: the only place a spec is refused after parsing."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from lightkube.utils.quantity import parse_quantity
from pydantic import ValidationError

from memorystore.config import ServiceConfig, ServiceEmbedder, ServiceLLM
from memorystore.operator import names
from memorystore.operator.builders.configs import service_config_data
from memorystore.operator.builders.model import Owner
from memorystore.spec import MemoryStoreSpec, Model, Resources, Storage


class SpecError(ValueError):
    """A spec the operator cannot realise; the message names the field (a status condition)."""


# Kubernetes quantity grammar without a sign: a number, then a binary or decimal SI suffix
# or an exponent ("1Gi", "500m", "1.5", "1e3").
_QUANTITY = re.compile(r"^(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")


def check_spec(owner: Owner, spec: MemoryStoreSpec) -> None:
    """Refuse what cannot be built, naming the field.

    Run once per reconcile, before anything is written; every builder assumes a spec this
    accepted, so none of them can fail halfway through. The CRD's CEL rules catch most of
    this at `kubectl apply`; this checks again so that an older CRD, a direct API write or a
    unit test can never produce broken children.
    """
    problem = names.name_problem(owner.name)
    if problem:
        raise SpecError(f"metadata.name {problem}")
    vs = spec.vector_store
    if sum(tier is not None for tier in (vs.managed, vs.external, vs.embedded, vs.postgres)) != 1:
        raise SpecError(
            "spec.vectorStore: set exactly one of spec.vectorStore.managed, "
            "spec.vectorStore.external, spec.vectorStore.embedded or spec.vectorStore.postgres"
        )
    if vs.external is not None:
        _check_url(vs.external.url, "spec.vectorStore.external.url")
    history = spec.history_db
    if (history.sqlite is None) == (history.postgres is None):
        raise SpecError(
            "spec.historyDb: set exactly one of spec.historyDb.sqlite or spec.historyDb.postgres"
        )
    if vs.embedded is not None and history.sqlite is None:
        raise SpecError(
            "spec.historyDb.sqlite is required with spec.vectorStore.embedded: the engine's "
            "files live on its volume"
        )
    if vs.postgres is not None and vs.postgres.dsn_secret_ref is None and history.postgres is None:
        raise SpecError(
            "spec.vectorStore.postgres.dsnSecretRef is required unless spec.historyDb.postgres "
            "is set: unset, the vectors live in the history's database"
        )
    _check_replicas(spec)
    _check_postgres_state(spec)
    if history.sqlite is not None:
        _check_storage(history.sqlite.storage, "spec.historyDb.sqlite.storage")
    _check_resources(spec.service.resources, "spec.service.resources")
    if vs.managed is not None and vs.managed.replication_factor > vs.managed.replicas:
        raise SpecError(
            f"spec.vectorStore.managed.replicationFactor ({vs.managed.replication_factor}) must "
            f"be at most spec.vectorStore.managed.replicas ({vs.managed.replicas}): each copy of "
            "a shard lives on a different Qdrant replica"
        )
    if vs.managed is not None:
        _check_storage(vs.managed.storage, "spec.vectorStore.managed.storage")
        _check_resources(vs.managed.resources, "spec.vectorStore.managed.resources")
    _check_service_config(owner, spec)


def _check_replicas(spec: MemoryStoreSpec) -> None:
    """More than one service replica needs state and vectors every replica shares."""
    replicas = spec.service.replicas
    if replicas <= 1:
        return
    if spec.vector_store.embedded is not None:
        raise SpecError(
            f"spec.service.replicas is {replicas}, but spec.vectorStore.embedded runs the "
            "engine in the service's process and it holds a single-process lock on its files: "
            "use 1 (to scale to zero, spec.suspend), or for more replicas a store with "
            "spec.vectorStore.postgres, managed or external and spec.historyDb.postgres"
        )
    if spec.history_db.postgres is None:
        raise SpecError(
            f"spec.service.replicas is {replicas}, but a SQLite history "
            "(spec.historyDb.sqlite) is one writer on a ReadWriteOnce volume: use 1 (to scale "
            "to zero, spec.suspend), or for more replicas a store with spec.historyDb.postgres"
        )


def postgres_fields(spec: MemoryStoreSpec) -> list[str]:
    """The spec fields that put the store's memories in PostgreSQL (none: SQLite / Qdrant)."""
    fields = []
    if spec.history_db.postgres is not None:
        fields.append("spec.historyDb.postgres")
    if spec.vector_store.postgres is not None:
        fields.append("spec.vectorStore.postgres")
    return fields


# Why the memory service's backups (files on a volume) do not cover a PostgreSQL store: its
# POST /v1/backups/ answers 409 with the same advice.
POSTGRES_BACKUP_ADVICE = "back the database up with its own tools (pg_dump, CloudNativePG backups)"


def _check_postgres_state(spec: MemoryStoreSpec) -> None:
    """A backup copies SQLite files and Qdrant points onto a volume, and a restore writes them
    into an empty data volume: neither reaches a database."""
    fields = " and ".join(postgres_fields(spec))
    if not fields:
        return
    if spec.backup is not None:
        raise SpecError(
            f"spec.backup must not be set with {fields}: the memories are in PostgreSQL, so "
            f"{POSTGRES_BACKUP_ADVICE}; remove spec.backup"
        )
    if spec.restore is not None:
        raise SpecError(
            f"spec.restore must not be set with {fields}: a backup restores into the service's "
            "data volume, not a database; restore the database with its own tools (pg_restore, "
            "a CloudNativePG recovery) and create the store without spec.restore"
        )


def _check_url(url: str, field: str) -> None:
    parts = urlsplit(url)
    if parts.username or parts.password:
        # It would be written into a ConfigMap (and this message into status): never echo it.
        raise SpecError(
            f"{field} must not contain credentials; put the key in a Secret and name it in "
            "spec.vectorStore.external.apiKeySecretRef"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(f"{field} must be an http:// or https:// URL with a host, not {url!r}")


def _check_quantity(value: str, field: str) -> None:
    if not _QUANTITY.match(value):
        raise SpecError(f"{field} must be a Kubernetes quantity such as 1Gi or 500m, not {value!r}")


def _check_storage(storage: Storage, field: str) -> None:
    _check_quantity(storage.size, f"{field}.size")


def _check_resources(resources: Resources, field: str) -> None:
    """Quantities only, and no limit below its request (the API server would refuse the
    pod, and the store would never start: say so here, naming both)."""
    for kind, values in (("requests", resources.requests), ("limits", resources.limits)):
        for name, value in values.items():
            _check_quantity(value, f"{field}.{kind}.{name}")
    for name, limit in sorted(resources.limits.items()):
        request = resources.requests.get(name)
        at_most, at_least = parse_quantity(limit), parse_quantity(request)
        if at_most is not None and at_least is not None and at_most < at_least:
            raise SpecError(
                f"{field}.limits.{name} ({limit}) is below {field}.requests.{name} "
                f"({request}): raise the limit, or lower the request (setting requests or "
                "limits replaces that whole map, defaults included)"
            )


def _check_service_config(owner: Owner, spec: MemoryStoreSpec) -> None:
    """The memory service's own rules (e.g. a remote embedder needs a model), applied to the
    config this spec renders: the embedder, then the LLM, then the whole file."""
    data = service_config_data(owner, spec)
    _check_model(ServiceEmbedder, data["embedder"], "spec.embedder")
    if "llm" in data:
        _check_model(ServiceLLM, data["llm"], "spec.llm")
    _check_model(ServiceConfig, data, "spec")


def _check_model(model: type[Model], data: dict[str, Any], field: str) -> None:
    """Validate `data` as `model`; problems become one SpecError naming spec fields."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join([field, *(str(p) for p in err["loc"])])
            problems.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
        raise SpecError("; ".join(problems)) from None
