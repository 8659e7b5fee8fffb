"""PostgreSQL stores (spec.historyDb.postgres, spec.vectorStore.postgres): what the operator
accepts, what it builds (no data volume, rolling updates, several replicas) and what it
refuses, each refusal naming the fields to change."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx
import pytest
import yaml
from lightkube.core.exceptions import ApiError

from memorystore.config import PostgresConnection, ServiceConfig, load_model
from memorystore.operator import backups, names, reconcile
from memorystore.operator.builders import desired_children, expected_workloads
from memorystore.operator.builders.configs import render_service_config, service_config
from memorystore.operator.builders.model import Images, Keys, Owner
from memorystore.operator.builders.network import memory_network_policy
from memorystore.operator.builders.validate import SpecError, check_spec, postgres_fields
from memorystore.operator.status import (
    READY,
    SERVICE_READY,
    VECTOR_STORE_READY,
    Observed,
    Workload,
    compute_status,
)
from memorystore.spec import (
    HistoryPostgres,
    MemoryStoreSpec,
    MemoryStoreStatus,
    Phase,
    PostgresSettings,
)

OWNER = Owner(name="acme", namespace="tenants", uid="u-1", generation=2)
KEYS = Keys(service_api_key="svc-key-Zm9vYmFy", qdrant_api_key="qdrant-key-cXV1eA")
IMAGES = Images()

CNPG = {"name": "acme-pg-app", "key": "uri"}  # a CloudNativePG cluster's app Secret
VECTORS_DB = {"name": "acme-vectors-app", "key": "uri"}
PG_HISTORY = {"postgres": {"dsnSecretRef": CNPG}}
# The spec docs/operations/postgres.md shows: state and vectors in one CloudNativePG database,
# 3 replicas.
REPLICATED = {
    "historyDb": PG_HISTORY,
    "vectorStore": {"postgres": {}},
    "service": {"replicas": 3},
}


def spec_of(raw: dict[str, Any]) -> MemoryStoreSpec:
    return MemoryStoreSpec.model_validate(copy.deepcopy(raw))


def children(raw: dict[str, Any]) -> list[dict[str, Any]]:
    spec = spec_of(raw)
    check_spec(OWNER, spec)
    return desired_children(OWNER, spec, IMAGES, KEYS)


def find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def deployment(raw: dict[str, Any]) -> dict[str, Any]:
    return find(children(raw), "Deployment", "acme-memory")


def container(raw: dict[str, Any]) -> dict[str, Any]:
    (only,) = deployment(raw)["spec"]["template"]["spec"]["containers"]
    return only


def files(raw: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Secret files the service mounts: purpose (the directory) -> (Secret, key); and no
    secret in its environment."""
    assert all("valueFrom" not in e for e in container(raw)["env"])
    found = {}
    for volume in deployment(raw)["spec"]["template"]["spec"]["volumes"]:
        secret = volume.get("secret") or {}
        if len(secret.get("items", [])) == 1:
            found[volume["name"]] = (secret["secretName"], secret["items"][0]["key"])
    return found


def rendered(raw: dict[str, Any]) -> dict[str, Any]:
    config_map = find(children(raw), "ConfigMap", "acme-memory-config")
    return yaml.safe_load(config_map["data"]["service.yaml"])


def ref(secret: dict[str, str]) -> tuple[str, str]:
    return secret["name"], secret["key"]


# --- one definition of the database settings ---------------------------------------------------


def test_the_spec_and_the_service_config_share_the_database_settings():
    """One definition: a spec the CRD accepts always renders a config the service accepts."""
    assert issubclass(PostgresConnection, PostgresSettings)
    assert issubclass(HistoryPostgres, PostgresSettings)
    spec = HistoryPostgres(dsn_secret_ref={"name": "pg", "key": "uri"}, pool_size=200)
    rendered = {"dsn": {"env": "X"}, **spec.model_dump(exclude={"dsn_secret_ref"})}
    assert PostgresConnection.model_validate(rendered).pool_size == 200


# --- accepted ----------------------------------------------------------------------------------

ACCEPTED: dict[str, dict[str, Any]] = {
    "state-and-vectors-in-one-database": REPLICATED,
    "managed-qdrant-3": {"historyDb": PG_HISTORY, "service": {"replicas": 3}},
    "external-qdrant-2": {
        "historyDb": PG_HISTORY,
        "vectorStore": {"external": {"url": "https://q.example:6333"}},
        "service": {"replicas": 2},
    },
    "vectors-in-their-own-database": {
        "historyDb": PG_HISTORY,
        "vectorStore": {"postgres": {"dsnSecretRef": VECTORS_DB}},
        "service": {"replicas": 4},
    },
    # one replica: the SQLite history stays on its volume, the vectors go to PostgreSQL
    "sqlite-history-postgres-vectors": {"vectorStore": {"postgres": {"dsnSecretRef": VECTORS_DB}}},
    "postgres-history-one-replica": {"historyDb": PG_HISTORY},
    "suspended": {**REPLICATED, "suspend": True},
}


@pytest.mark.parametrize("raw", ACCEPTED.values(), ids=ACCEPTED)
def test_postgres_specs_are_accepted(raw):
    check_spec(OWNER, spec_of(raw))


# --- refused, naming what to change ------------------------------------------------------------

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    (
        "vectors-without-a-database",
        {"vectorStore": {"postgres": {}}},
        "spec.vectorStore.postgres.dsnSecretRef is required unless spec.historyDb.postgres is "
        "set: unset, the vectors live in the history's database",
    ),
    (
        "sqlite-two-replicas",
        {"vectorStore": {"postgres": {"dsnSecretRef": VECTORS_DB}}, "service": {"replicas": 2}},
        "spec.service.replicas is 2, but a SQLite history (spec.historyDb.sqlite) is one writer "
        "on a ReadWriteOnce volume: use 1 (to scale to zero, spec.suspend), or for more "
        "replicas a store with spec.historyDb.postgres",
    ),
    (
        "sqlite-and-managed-two-replicas",
        {"service": {"replicas": 2}},
        "spec.service.replicas is 2, but a SQLite history (spec.historyDb.sqlite)",
    ),
    (
        "embedded-two-replicas",
        {"vectorStore": {"embedded": {}}, "service": {"replicas": 2}},
        "spec.service.replicas is 2, but spec.vectorStore.embedded runs the engine in the "
        "service's process and it holds a single-process lock on its files: use 1 (to scale "
        "to zero, spec.suspend), or for more replicas a store with spec.vectorStore.postgres, "
        "managed or external and spec.historyDb.postgres",
    ),
    (
        "embedded-with-postgres-history",
        {"vectorStore": {"embedded": {}}, "historyDb": PG_HISTORY},
        "spec.historyDb.sqlite is required with spec.vectorStore.embedded",
    ),
    (
        "postgres-and-managed-vectors",
        {"historyDb": PG_HISTORY, "vectorStore": {"postgres": {}, "managed": {}}},
        "spec.vectorStore: set exactly one of spec.vectorStore.managed, "
        "spec.vectorStore.external, spec.vectorStore.embedded or spec.vectorStore.postgres",
    ),
    (
        "sqlite-and-postgres-history",
        {"historyDb": {"sqlite": {}, **PG_HISTORY}},
        "spec.historyDb: set exactly one of spec.historyDb.sqlite or spec.historyDb.postgres",
    ),
    (
        "backup-of-postgres-state",
        {**REPLICATED, "backup": {"volume": {"claimName": "acme-backups"}}},
        "spec.backup must not be set with spec.historyDb.postgres and spec.vectorStore.postgres: "
        "the memories are in PostgreSQL, so back the database up with its own tools (pg_dump, "
        "CloudNativePG backups); remove spec.backup",
    ),
    (
        "backup-of-postgres-vectors",
        {
            "vectorStore": {"postgres": {"dsnSecretRef": VECTORS_DB}},
            "backup": {"volume": {"claimName": "acme-backups"}},
        },
        "spec.backup must not be set with spec.vectorStore.postgres: ",
    ),
    (
        "restore-into-postgres",
        {"historyDb": PG_HISTORY, "restore": {"fromBackup": "old-202612010300"}},
        "spec.restore must not be set with spec.historyDb.postgres: a backup restores into the "
        "service's data volume, not a database; restore the database with its own tools "
        "(pg_restore, a CloudNativePG recovery)",
    ),
]


@pytest.mark.parametrize(
    ("raw", "message"), [(r, m) for _, r, m in REFUSED], ids=[i for i, _, _ in REFUSED]
)
def test_unbuildable_postgres_specs_are_refused_naming_the_fields(raw, message):
    with pytest.raises(SpecError) as info:
        check_spec(OWNER, spec_of(raw))
    assert str(info.value).startswith(message), str(info.value)


def test_postgres_fields_name_what_puts_the_memories_in_postgres():
    assert postgres_fields(spec_of({})) == []
    assert postgres_fields(spec_of(REPLICATED)) == [
        "spec.historyDb.postgres",
        "spec.vectorStore.postgres",
    ]


# --- the service config: the database named, its DSN never written ------------------------------


def test_the_history_goes_to_postgres_with_its_dsn_from_a_mounted_file():
    raw = {**REPLICATED, "historyDb": {"postgres": {**PG_HISTORY["postgres"], "poolSize": 25}}}
    cfg = rendered(raw)
    assert cfg["history"] == {
        "postgres": {
            "dsn": {"file": "/var/run/secrets/memorystore/history-dsn/dsn"},
            "poolSize": 25,
            "statementTimeoutSeconds": 10.0,
            "connectTimeoutSeconds": 5.0,
        }
    }
    assert cfg["vectorStore"] == {"collection": "memories", "postgres": {"hnswEfSearch": 100}}
    assert cfg["dataDir"] == "/data"
    assert files(raw)["history-dsn"] == ref(CNPG)
    assert "vector-dsn" not in files(raw)  # the history's database: one DSN


def test_the_vectors_share_the_historys_database_unless_given_their_own():
    shared = service_config(OWNER, spec_of(REPLICATED))
    assert shared.vector_store.postgres.database is None
    assert shared.vector_database() is shared.history.postgres
    own = {
        **REPLICATED,
        "vectorStore": {
            "postgres": {"dsnSecretRef": VECTORS_DB, "hnswEfSearch": 400},
            "collection": "acme_v2",
        },
    }
    cfg = service_config(OWNER, spec_of(own))
    assert cfg.vector_store.postgres.database.dsn.file == (
        "/var/run/secrets/memorystore/vector-dsn/dsn"
    )
    assert cfg.vector_store.postgres.hnsw_ef_search == 400
    assert cfg.vector_store.collection == "acme_v2"  # names the vectors' tables
    assert files(own)["vector-dsn"] == ref(VECTORS_DB)
    assert files(own)["history-dsn"] == ref(CNPG)


@pytest.mark.parametrize("raw", ACCEPTED.values(), ids=ACCEPTED)
def test_the_rendered_config_loads_as_the_service_reads_it(raw, tmp_path, monkeypatch):
    spec = spec_of(raw)
    text = render_service_config(OWNER, service_config(OWNER, spec))
    path = tmp_path / "service.yaml"
    path.write_text(text)
    loaded = load_model(ServiceConfig, path)
    assert loaded == service_config(OWNER, spec)
    # secrets by reference only: no `generate`, no DSN, no Secret name in the file
    assert "generate" not in text and "postgresql://" not in text
    assert "acme-pg-app" not in text and "acme-vectors-app" not in text


# --- the pods: no data volume, rolling updates, several replicas --------------------------------


def test_postgres_state_needs_no_data_volume():
    objs = children(REPLICATED)
    assert [o for o in objs if o["kind"] == "PersistentVolumeClaim"] == []
    pod = deployment(REPLICATED)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data"] == {"emptyDir": {"sizeLimit": "1Gi"}, "name": "data"}
    mounts = {m["name"]: m for m in container(REPLICATED)["volumeMounts"]}
    assert mounts["data"] == {"mountPath": "/data", "name": "data"}  # the service's dataDir


def test_the_children_of_a_postgres_store_and_their_order():
    assert [(o["kind"], o["metadata"]["name"]) for o in children(REPLICATED)] == [
        ("NetworkPolicy", "acme-memory"),
        ("ConfigMap", "acme-memory-config"),
        ("PodDisruptionBudget", "acme-memory"),
        ("Deployment", "acme-memory"),
        ("Service", "acme-memory"),
        ("ConfigMap", "acme-client"),
        ("Secret", "acme-client"),
    ]
    assert expected_workloads(OWNER, spec_of(REPLICATED)) == [("Deployment", "acme-memory")]


def test_postgres_history_with_a_managed_qdrant_keeps_qdrant_and_drops_the_claim():
    objs = children(ACCEPTED["managed-qdrant-3"])
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert ("StatefulSet", "acme-qdrant") in kinds
    assert ("PersistentVolumeClaim", "acme-memory-data") not in kinds
    assert files(ACCEPTED["managed-qdrant-3"])["qdrant-api-key"] == ("acme-keys", "qdrant-api-key")


def test_postgres_history_rolls_one_new_pod_at_a_time_without_losing_one():
    for raw in (REPLICATED, ACCEPTED["postgres-history-one-replica"]):
        assert deployment(raw)["spec"]["strategy"] == {
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            "type": "RollingUpdate",
        }


def test_a_sqlite_history_still_recreates_and_keeps_its_volume():
    raw = ACCEPTED["sqlite-history-postgres-vectors"]
    assert deployment(raw)["spec"]["strategy"] == {"type": "Recreate"}
    find(children(raw), "PersistentVolumeClaim", "acme-memory-data")
    volumes = {v["name"]: v for v in deployment(raw)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"] == {"claimName": "acme-memory-data"}
    assert files(raw)["vector-dsn"] == ref(VECTORS_DB)
    assert "history-dsn" not in files(raw)
    assert rendered(raw)["history"] == {"path": "/data/history.db"}


def test_replicas_spread_over_nodes_and_one_may_be_evicted_at_a_time():
    objs = children(REPLICATED)
    dep = find(objs, "Deployment", "acme-memory")
    selector = names.selector_labels("acme", names.MEMORY_SERVICE)
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["template"]["spec"]["topologySpreadConstraints"] == [
        {
            "labelSelector": {"matchLabels": selector},
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
        }
    ]
    budget = find(objs, "PodDisruptionBudget", "acme-memory")
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": selector},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    assert budget["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid  # collected with it


def test_scaling_changes_only_the_deployment_so_nothing_is_left_to_delete():
    """The budget exists (the same object) at every replica count, so scaling never leaves a
    child that is no longer wanted: the apply layer needs no pruning for it."""
    one = children({**REPLICATED, "service": {"replicas": 1}})
    three = children(REPLICATED)
    keys = [(o["kind"], o["metadata"]["name"]) for o in one]
    assert keys == [(o["kind"], o["metadata"]["name"]) for o in three]
    changed = [k for k, a, b in zip(keys, one, three, strict=True) if a != b]
    assert changed == [("Deployment", "acme-memory")]
    assert (
        "topologySpreadConstraints"
        not in find(one, "Deployment", "acme-memory")["spec"]["template"]["spec"]
    )


def test_suspending_a_postgres_store_scales_to_zero_with_nothing_else_to_keep():
    objs = children(ACCEPTED["suspended"])
    assert find(objs, "Deployment", "acme-memory")["spec"]["replicas"] == 0
    assert not [o for o in objs if o["kind"] == "PersistentVolumeClaim"]


@pytest.mark.parametrize("raw", ACCEPTED.values(), ids=ACCEPTED)
def test_postgres_children_are_valid_kubernetes_objects(raw):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for child in children(raw):
        if child["kind"] in ("Deployment", "PodDisruptionBudget"):
            kubernetes_validate.validate(child, "1.37", strict=True)


def test_the_service_may_reach_a_database_anywhere_because_egress_is_not_restricted():
    """The DSN's host is outside the operator's control: the policies restrict ingress only."""
    policy = memory_network_policy(OWNER, spec_of(REPLICATED))
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert "egress" not in policy["spec"]


# --- the apply layer: secrets checked, status, backups --------------------------------------------


def test_the_dsn_secrets_are_checked_like_every_other_reference():
    own = ACCEPTED["vectors-in-their-own-database"]
    assert reconcile.secret_refs(spec_of(own)) == {
        "spec.historyDb.postgres.dsnSecretRef": ("acme-pg-app", "uri"),
        "spec.vectorStore.postgres.dsnSecretRef": ("acme-vectors-app", "uri"),
    }
    assert reconcile.secret_refs(spec_of(REPLICATED)) == {
        "spec.historyDb.postgres.dsnSecretRef": ("acme-pg-app", "uri")
    }


def _deployment(want: int, ready: int) -> Workload:
    return Workload(
        "Deployment",
        "acme-memory",
        {
            "metadata": {"generation": 1},
            "spec": {"replicas": want},
            "status": {"observedGeneration": 1, "readyReplicas": ready, "updatedReplicas": ready},
        },
    )


def _status(service: Workload) -> MemoryStoreStatus:
    observed = Observed(
        generation=2,
        suspended=False,
        postgres_vector_store=True,
        service=service,
        endpoint="https://acme-memory.tenants.svc:8765",
    )
    return compute_status(observed, MemoryStoreStatus(), "2026-12-01T00:00:00Z")


def _cond(status: MemoryStoreStatus, type_: str) -> Any:
    return next(c for c in status.conditions if c.type == type_)


def test_postgres_vectors_are_ready_with_the_service_that_queries_them():
    ready = _status(_deployment(3, 3))
    assert ready.phase == Phase.READY
    vectors = _cond(ready, VECTOR_STORE_READY)
    assert (vectors.status, vectors.reason) == ("True", "Postgres")
    assert "PostgreSQL" in vectors.message and "None" not in vectors.message


def test_postgres_vectors_wait_on_the_service_and_ready_names_the_services_reason():
    waiting = _status(_deployment(3, 1))
    assert waiting.phase == Phase.PENDING
    vectors = _cond(waiting, VECTOR_STORE_READY)
    assert (vectors.status, vectors.reason) == ("False", "ServiceNotReady")
    not_ready = "Deployment acme-memory: 1/3 replicas ready"
    assert vectors.message.endswith(f"which is not ready: {not_ready}")
    assert _cond(waiting, SERVICE_READY).reason == "NotReady"
    ready = _cond(waiting, READY)
    assert (ready.reason, ready.message) == ("NotReady", not_ready)


class _Api:
    """Just enough of lightkube's AsyncClient for a backup's preconditions."""

    def __init__(self, store: dict[str, Any]) -> None:
        self.store = store

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        if resource.__name__ == "MemoryStore" and name == "acme":
            return resource.from_dict(self.store)
        response = httpx.Response(
            404,
            json={"kind": "Status", "code": 404, "message": "not found"},
            request=httpx.Request("GET", "https://api/x"),
        )
        raise ApiError(request=response.request, response=response)


def test_a_backup_of_a_postgres_store_fails_pointing_at_the_databases_own_tools():
    store = {
        "apiVersion": "memorystore.dev/v1beta1",
        "kind": "MemoryStore",
        "metadata": {"name": "acme", "namespace": "tenants"},
        "spec": REPLICATED,
    }
    with pytest.raises(backups.BackupFailed) as info:
        asyncio.run(backups._preconditions(_Api(store), "tenants", "acme"))
    assert str(info.value) == (
        "store acme keeps its memories in PostgreSQL (spec.historyDb.postgres and "
        "spec.vectorStore.postgres): back the database up with its own tools (pg_dump, "
        "CloudNativePG backups)"
    )
