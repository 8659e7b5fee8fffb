"""The pure builders: golden children for sample specs, plus the properties that matter.

Golden files live in tests/unit/operator/golden/<sample>.yaml. After an intended change,
regenerate them and review the diff:

    UPDATE_GOLDEN=1 PYTHONSAFEPATH=1 .venv/bin/pytest tests/unit/operator/test_builders.py
"""

from __future__ import annotations

import base64
import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from memorystore.config import ClientConfig, ServiceConfig, format_validation_error, load_model
from memorystore.operator import names
from memorystore.operator.builders import desired_children, expected_workloads, pod_monitor
from memorystore.operator.builders.configs import (
    client_config,
    render_client_config,
    render_service_config,
    service_config,
)
from memorystore.operator.builders.model import (
    Images,
    Keys,
    Monitoring,
    OperatorPods,
    Owner,
    Restore,
)
from memorystore.operator.builders.secrets import keys_secret
from memorystore.operator.builders.validate import SpecError, check_spec
from memorystore.spec import MemoryStoreSpec, RecallSettings

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

OWNER = Owner(
    name="acme", namespace="tenants", uid="0b6f1c9e-4c1d-4c57-9d55-3a1f0c2d7e11", generation=3
)
KEYS = Keys(service_api_key="svc-key-Zm9vYmFyYmF6cXV4", qdrant_api_key="qdrant-key-cXV1eGNvcmdl")
IMAGES = Images()
# What the apply layer reads from the TLS Secrets; the builders only copy it (public).
CA_CERT = "-----BEGIN CERTIFICATE-----\nTUVNT1JZU1RPUkUtVEVTVC1DQQ==\n-----END CERTIFICATE-----\n"

# Sample specs as a user writes them (camelCase), parsed by the real model.
SAMPLES: dict[str, dict[str, Any]] = {
    "managed-default": {},
    "external-openai": {
        "vectorStore": {
            "external": {
                "url": "https://qdrant.example.com:6333",
                "apiKeySecretRef": {"name": "acme-qdrant", "key": "api-key"},
            },
            "collection": "acme_memories",
        },
        "embedder": {
            "provider": "openai",
            "model": "text-embedding-3-small",
            "dimensions": 1536,
            "apiKeySecretRef": {"name": "acme-openai", "key": "embeddings"},
        },
        "llm": {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "baseUrl": "https://api.openai.com/v1",
            "apiKeySecretRef": {"name": "acme-openai", "key": "chat"},
        },
        "scope": "agent",
        "mode": "static_control",
        "recall": {"topK": 5, "tokenBudget": 800},
    },
    "suspended": {
        "suspend": True,
        "deletionPolicy": "Delete",
        "vectorStore": {
            "managed": {
                "replicas": 3,
                "storage": {"size": "20Gi", "storageClassName": "fast-ssd"},
                "resources": {
                    "requests": {"memory": "1Gi", "cpu": "500m"},
                    "limits": {"cpu": "2", "memory": "2Gi"},
                },
                "image": "registry.example.com/qdrant/qdrant:v1.18.3",
            }
        },
    },
    "allowed-agent-pods": {
        "allowedAgentPods": {"matchLabels": {"tier": "agents", "app": "chat-agent"}},
        "historyDb": {"sqlite": {"storage": {"size": "5Gi", "storageClassName": "standard"}}},
        "service": {
            "replicas": 1,
            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
            "image": "registry.example.com/memorystore/memory-service:0.1.0",
        },
        "scope": "project",
        "mode": "agent_control",
    },
    # One pod: the engine in the service's process, its files on the service's volume.
    "embedded": {
        "vectorStore": {"embedded": {}, "collection": "acme_small"},
        "historyDb": {"sqlite": {"storage": {"size": "2Gi"}}},
        "service": {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
    },
    # Three Qdrant peers holding every shard twice: one may be drained at a time.
    "redundant": {
        "vectorStore": {"managed": {"replicas": 3, "shards": 6, "replicationFactor": 2}},
    },
    # A dedicated, tainted node pool for each kind of pod.
    "placed": {
        "service": {
            "nodeSelector": {"pool": "memory", "memorystore.dev/node": "real"},
            "tolerations": [
                {"key": "memorystore.dev/real-node", "value": "true", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 30},
            ],
        },
        "vectorStore": {
            "managed": {
                "nodeSelector": {"pool": "qdrant"},
                "tolerations": [{"operator": "Exists"}],
            }
        },
    },
    # State and vectors in one CloudNativePG database (its `<cluster>-app` Secret), three
    # replicas: no data volume, rolling updates, spread over nodes.
    "postgres": {
        "historyDb": {
            "postgres": {
                "dsnSecretRef": {"name": "acme-pg-app", "key": "uri"},
                "poolSize": 20,
                "statementTimeoutSeconds": 30,
            }
        },
        "vectorStore": {"postgres": {"hnswEfSearch": 200}},
        "service": {"replicas": 3},
    },
    # Backups onto a claim that exists, restored from another store's backup, and the
    # operator's pods admitted to the service (it runs in a cluster, from the chart).
    "backup-restore": {
        "backup": {"volume": {"claimName": "acme-backups"}, "schedule": "0 3 * * *"},
        "restore": {"fromBackup": "old-202612010300"},
        "vectorStore": {"embedded": {}},
    },
}  # fmt: skip
# What the apply layer observed, for the samples that need it (builders.desired_children).
OBSERVED: dict[str, dict[str, Any]] = {
    "backup-restore": {
        "backup_claim": "acme-backups",
        "restore": Restore(claim="old-backups", path="old-202612010300"),
        "operator_pods": OperatorPods(
            "memorystore-system",
            (("app.kubernetes.io/component", "operator"), ("app.kubernetes.io/instance", "ms")),
        ),
    },
}


def spec_of(raw: dict[str, Any]) -> MemoryStoreSpec:
    return MemoryStoreSpec.model_validate(copy.deepcopy(raw))


def children_of(sample: str, keys: Keys = KEYS) -> list[dict[str, Any]]:
    return desired_children(
        OWNER, spec_of(SAMPLES[sample]), IMAGES, keys, ca_cert=CA_CERT, **OBSERVED.get(sample, {})
    )


def all_objects(sample: str) -> list[dict[str, Any]]:
    return [keys_secret(OWNER, KEYS, owned=False), *children_of(sample)]


def find(children: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [c for c in children if c["kind"] == kind and c["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def kinds_and_names(children: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["kind"], c["metadata"]["name"]) for c in children]


class _GoldenDumper(yaml.SafeDumper):
    """Multi-line strings (the rendered config files) as readable `|` blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_GoldenDumper.add_representer(str, _str)


def render_golden(objects: list[dict[str, Any]]) -> str:
    return yaml.dump_all(
        objects, Dumper=_GoldenDumper, sort_keys=True, default_flow_style=False, width=100
    )


# --- golden files ---------------------------------------------------------------------------


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_golden_children(sample):
    text = render_golden(all_objects(sample))
    path = GOLDEN / f"{sample}.yaml"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), (
        f"{path.name} differs from the rendered children; if the change is intended, "
        "rerun with UPDATE_GOLDEN=1 and review the diff"
    )


def test_golden_files_match_the_samples_exactly():
    on_disk = {p.stem for p in GOLDEN.glob("*.yaml")}
    assert on_disk == set(SAMPLES), "stale or missing golden files"


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_same_input_gives_byte_identical_output(sample):
    first = render_golden(all_objects(sample))
    # Same spec, dict keys written in the opposite order.
    reordered = dict(reversed(list(SAMPLES[sample].items())))
    again = desired_children(
        OWNER, spec_of(reordered), IMAGES, KEYS, ca_cert=CA_CERT, **OBSERVED.get(sample, {})
    )
    assert render_golden([keys_secret(OWNER, KEYS, owned=False), *again]) == first
    assert render_golden(all_objects(sample)) == first


# --- every child ----------------------------------------------------------------------------

COMMON_LABELS = {
    "app.kubernetes.io/name": "memorystore",
    "app.kubernetes.io/instance": "acme",
    "app.kubernetes.io/managed-by": "memorystore-operator",
    "app.kubernetes.io/part-of": "memorystore",
    "memorystore.dev/store": "acme",
}


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_every_child_has_the_owner_reference_labels_and_namespace(sample):
    for obj in all_objects(sample):
        meta = obj["metadata"]
        where = f"{obj['kind']}/{meta['name']}"
        assert meta["namespace"] == "tenants", where
        if obj["kind"] == "PersistentVolumeClaim" or meta["name"].endswith("-keys"):
            # data-bearing: owned only under deletionPolicy Delete (see the next test)
            continue
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "memorystore.dev/v1beta1",
                "kind": "MemoryStore",
                "name": "acme",
                "uid": OWNER.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ], where
        labels = meta["labels"]
        assert {k: labels.get(k) for k in COMMON_LABELS} == COMMON_LABELS, where
        assert labels["app.kubernetes.io/component"] in {
            "qdrant",
            "memory-service",
            "client",
            "keys",
        }, where
        assert meta["name"].startswith("acme-"), where


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_names_are_unique_per_kind(sample):
    pairs = kinds_and_names(all_objects(sample))
    assert len(pairs) == len(set(pairs))


def test_managed_children_and_their_apply_order():
    assert kinds_and_names(children_of("managed-default")) == [
        ("NetworkPolicy", "acme-qdrant"),
        ("NetworkPolicy", "acme-memory"),
        ("Service", "acme-qdrant-headless"),
        ("Service", "acme-qdrant"),
        ("PodDisruptionBudget", "acme-qdrant"),
        ("Secret", "acme-qdrant-config"),
        ("StatefulSet", "acme-qdrant"),
        ("ConfigMap", "acme-memory-config"),
        ("PersistentVolumeClaim", "acme-memory-data"),
        ("PodDisruptionBudget", "acme-memory"),
        ("Deployment", "acme-memory"),
        ("Service", "acme-memory"),
        ("ConfigMap", "acme-client"),
        ("Secret", "acme-client"),
    ]


def test_workload_pods_carry_their_selector_and_store_labels():
    for sample in SAMPLES:
        for obj in children_of(sample):
            if obj["kind"] not in ("StatefulSet", "Deployment"):
                continue
            selector = obj["spec"]["selector"]["matchLabels"]
            pod_labels = obj["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= pod_labels.items()
            assert pod_labels["memorystore.dev/store"] == "acme"


def test_volume_claim_templates_carry_the_store_label():
    # The status layer finds Pending claims by this label.
    sts = find(children_of("managed-default"), "StatefulSet", "acme-qdrant")
    (template,) = sts["spec"]["volumeClaimTemplates"]
    assert template["metadata"]["labels"]["memorystore.dev/store"] == "acme"


# --- secrets stay secret --------------------------------------------------------------------


def _secret_strings(keys: Keys) -> list[str]:
    values = [keys.service_api_key, keys.qdrant_api_key]
    return values + [base64.b64encode(v.encode()).decode() for v in values]


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_no_secret_value_appears_in_any_config_map(sample):
    config_maps = [c for c in children_of(sample) if c["kind"] == "ConfigMap"]
    assert len(config_maps) == 2
    rendered = yaml.safe_dump(config_maps)
    for secret in _secret_strings(KEYS):
        assert secret not in rendered


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_secret_values_appear_only_in_the_two_secrets(sample):
    for obj in children_of(sample):
        if obj["kind"] == "Secret":
            continue
        text = yaml.safe_dump(obj)
        for secret in _secret_strings(KEYS):
            assert secret not in text, f"{obj['kind']}/{obj['metadata']['name']}"


def test_agents_get_the_service_key_and_never_the_qdrant_key():
    secret = find(children_of("managed-default"), "Secret", "acme-client")
    assert secret["type"] == "Opaque"
    assert secret["data"] == {"api-key": base64.b64encode(KEYS.service_api_key.encode()).decode()}
    assert KEYS.qdrant_api_key not in yaml.safe_dump(secret)
    assert base64.b64encode(KEYS.qdrant_api_key.encode()).decode() not in yaml.safe_dump(secret)


def test_keys_secret_holds_both_keys_and_is_immutable():
    secret = keys_secret(OWNER, KEYS, owned=False)
    assert secret["metadata"]["name"] == "acme-keys"
    assert secret["immutable"] is True
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {
        "service-api-key": KEYS.service_api_key,
        "qdrant-api-key": KEYS.qdrant_api_key,
    }
    assert all(c["metadata"]["name"] != "acme-keys" for c in children_of("managed-default"))


# --- config checksum ------------------------------------------------------------------------


def _checksum(raw: dict[str, Any], keys: Keys = KEYS) -> str:
    deployment = find(
        desired_children(OWNER, spec_of(raw), IMAGES, keys), "Deployment", "acme-memory"
    )
    return deployment["spec"]["template"]["metadata"]["annotations"][
        "memorystore.dev/config-checksum"
    ]


def test_config_checksum_follows_the_service_config():
    base = _checksum({})
    assert len(base) == 64
    assert _checksum({"retrieval": {"hybrid": False}}) != base
    assert _checksum({"retrieval": {"candidates": 50}}) != base
    assert _checksum({"embedder": {"threads": 2}}) != base
    assert _checksum({}) == base


def test_a_recall_change_reaches_the_agents_without_restarting_the_service():
    """Agents send their recall budgets (client.yaml) with every call: the service's own
    config, and so its pods, do not depend on spec.recall."""
    before = desired_children(OWNER, spec_of({}), IMAGES, KEYS, ca_cert=CA_CERT)
    after = desired_children(
        OWNER,
        spec_of({"recall": {"topK": 3, "threshold": 0.5, "tokenBudget": 99}}),
        IMAGES,
        KEYS,
        ca_cert=CA_CERT,
    )
    changed = [
        (a["kind"], a["metadata"]["name"])
        for a, b in zip(before, after, strict=True)
        if render_golden([a]) != render_golden([b])
    ]
    assert changed == [("ConfigMap", "acme-client")]
    client = yaml.safe_load(find(after, "ConfigMap", "acme-client")["data"]["client.yaml"])
    assert client["recall"]["topK"] == 3 and client["recall"]["tokenBudget"] == 99
    # byte-identical: the service's config, its checksum and so its pods
    for kind, name in (("ConfigMap", "acme-memory-config"), ("Deployment", "acme-memory")):
        assert render_golden([find(before, kind, name)]) == render_golden([find(after, kind, name)])
    text = find(after, "ConfigMap", "acme-memory-config")["data"]["service.yaml"]
    assert "recall" not in yaml.safe_load(text)
    assert service_config(OWNER, spec_of({"recall": {"topK": 3}})).recall == RecallSettings()


def test_config_checksum_ignores_the_keys():
    other = Keys(service_api_key="another-service-key", qdrant_api_key="another-qdrant-key")
    assert _checksum({}, other) == _checksum({})


def test_config_checksum_is_the_sha256_of_the_mounted_file():
    import hashlib

    children = children_of("managed-default")
    text = find(children, "ConfigMap", "acme-memory-config")["data"]["service.yaml"]
    deployment = find(children, "Deployment", "acme-memory")
    annotation = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotation == {
        "memorystore.dev/config-checksum": hashlib.sha256(text.encode()).hexdigest()
    }


# --- the rendered config files round-trip through the real models --------------------------


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_service_yaml_round_trips(sample, tmp_path, monkeypatch):
    monkeypatch.delenv("MEMORYSTORE_API_KEY", raising=False)
    children = children_of(sample)
    path = tmp_path / "service.yaml"
    path.write_text(find(children, "ConfigMap", "acme-memory-config")["data"]["service.yaml"])
    loaded = load_model(ServiceConfig, path)
    backup = OBSERVED.get(sample, {}).get("backup_claim") is not None
    assert loaded == service_config(OWNER, spec_of(SAMPLES[sample]), backup=backup)
    assert loaded.tenant == "tenants/acme"
    assert loaded.listen.host == "0.0.0.0" and loaded.listen.port == 8765
    assert loaded.data_dir == "/data"
    if SAMPLES[sample].get("historyDb", {}).get("postgres"):
        assert loaded.history.path is None
        assert loaded.history.postgres.dsn.env is None
        assert loaded.history.postgres.dsn.file == "/var/run/secrets/memorystore/history-dsn/dsn"
    else:
        assert loaded.history.path == "/data/history.db" and loaded.history.postgres is None
    # the service key is a mounted file (it rotates); the previous one exists only in a grace
    assert loaded.api_key.env is None and loaded.api_key.file == (
        "/var/run/secrets/memorystore/service-key/api-key"
    )
    assert not loaded.api_key.optional
    assert loaded.previous_api_key is not None and loaded.previous_api_key.optional
    assert loaded.previous_api_key.file == (
        "/var/run/secrets/memorystore/service-key/previous-api-key"
    )


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_client_yaml_round_trips(sample, tmp_path):
    children = children_of(sample)
    path = tmp_path / "client.yaml"
    path.write_text(find(children, "ConfigMap", "acme-client")["data"]["client.yaml"])
    loaded = load_model(ClientConfig, path)
    spec = spec_of(SAMPLES[sample])
    assert loaded == client_config(OWNER, spec, CA_CERT)
    assert loaded.endpoint == "https://acme-memory.tenants.svc:8765"
    assert loaded.tls.ca_file == "/etc/memorystore/client/ca.crt" and loaded.tls.verify
    assert loaded.tenant == "tenants/acme"
    assert loaded.api_key.file == "/etc/memorystore/secrets/api-key"
    assert loaded.api_key.env is None
    assert (loaded.scope, loaded.mode, loaded.recall) == (spec.scope, spec.mode, spec.recall)


def test_managed_service_config_points_at_the_managed_qdrant():
    cfg = service_config(OWNER, spec_of({}))
    server = cfg.vector_store.server
    assert server is not None and cfg.vector_store.embedded is None
    assert server.url == "https://acme-qdrant.tenants.svc:6333"  # TLS by default
    assert server.api_key is not None and server.api_key.env is None
    assert server.api_key.file == "/var/run/secrets/memorystore/qdrant-api-key/api-key"
    assert (
        server.ca is not None and server.ca.file == "/var/run/secrets/memorystore/qdrant-ca/ca.crt"
    )
    assert cfg.embedder.api_key is None and cfg.llm is None


def test_a_managed_qdrant_without_tls_is_plain_http_end_to_end():
    spec = spec_of({"vectorStore": {"managed": {"tls": False}}})
    server = service_config(OWNER, spec).vector_store.server
    assert server is not None and server.url == "http://acme-qdrant.tenants.svc:6333"
    assert server.ca is None
    children = desired_children(OWNER, spec, IMAGES, KEYS, ca_cert=CA_CERT)
    sts = find(children, "StatefulSet", "acme-qdrant")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    script = container["args"][0]
    assert '--uri "http://$first:6335"' in script and "https://" not in script  # peer URIs
    assert "tls" not in {v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]}
    secret = find(children, "Secret", "acme-qdrant-config")
    text = base64.b64decode(secret["data"]["config.yaml"]).decode()
    assert yaml.safe_load(text) == {"service": {"api_key": KEYS.qdrant_api_key}}
    deploy = find(children, "Deployment", "acme-memory")
    volumes = {v["name"] for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert "qdrant-ca" not in volumes


def test_external_service_config_uses_the_keys_only_where_refs_are_given():
    cfg = service_config(OWNER, spec_of(SAMPLES["external-openai"]))
    assert cfg.vector_store.server.url == "https://qdrant.example.com:6333"
    secrets = "/var/run/secrets/memorystore"
    assert cfg.vector_store.server.api_key.file == f"{secrets}/qdrant-api-key/api-key"
    assert cfg.vector_store.collection == "acme_memories"
    assert cfg.embedder.api_key.file == f"{secrets}/embedder-api-key/api-key"
    assert cfg.llm.api_key.file == f"{secrets}/llm-api-key/api-key"
    for source in (cfg.vector_store.server.api_key, cfg.embedder.api_key, cfg.llm.api_key):
        assert source.env is None
    assert cfg.recall == RecallSettings()  # spec.recall (topK 5) is the agents': client.yaml

    bare = service_config(
        OWNER,
        spec_of(
            {
                "vectorStore": {"external": {"url": "http://qdrant.shared:6333"}},
                "embedder": {"provider": "ollama", "model": "bge-m3", "dimensions": 1024},
                "llm": {"provider": "ollama", "model": "qwen3"},
            }
        ),
    )
    assert bare.vector_store.server.api_key is None
    assert bare.embedder.api_key is None
    assert bare.llm.api_key is None
    text = render_service_config(OWNER, bare)
    assert "apiKey" in text and "env:" not in text  # the service's own key is a file
    assert "optional: true" in text and text.count("optional") == 1  # the previous key only


def test_rendered_files_leave_out_what_the_spec_does_not_decide():
    spec = spec_of({})
    service = yaml.safe_load(render_service_config(OWNER, service_config(OWNER, spec)))
    assert "limits" not in service and "generate" not in str(service)
    client = yaml.safe_load(render_client_config(OWNER, client_config(OWNER, spec, CA_CERT)))
    assert set(client) == {"apiKey", "endpoint", "mode", "recall", "scope", "tenant", "tls"}
    assert client["tls"] == {"caFile": "/etc/memorystore/client/ca.crt"}  # verify: the agent's


# --- the memory service's pods --------------------------------------------------------------


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("valueFrom", e.get("value")) for e in container["env"]}


def _secret_files(pod: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """file path -> (Secret, key) of every one-key Secret volume the container mounts."""
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    files = {}
    for volume in pod["volumes"]:
        secret = volume.get("secret")
        if secret and len(secret.get("items", [])) == 1:
            (item,) = secret["items"]
            mount = mounts[volume["name"]]
            assert mount["readOnly"] is True and secret["defaultMode"] == 0o440
            files[f"{mount['mountPath']}/{item['path']}"] = (secret["secretName"], item["key"])
    return files


def test_memory_deployment_reads_each_secret_from_its_own_file():
    secrets = "/var/run/secrets/memorystore"
    managed = find(children_of("managed-default"), "Deployment", "acme-memory")
    pod = managed["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert _env(container) == {"HOME": "/tmp", "MEM0_TELEMETRY": "False"}
    assert _secret_files(pod) == {
        f"{secrets}/qdrant-api-key/api-key": ("acme-keys", "qdrant-api-key"),
        # the CA of Qdrant's certificate only: its key stays in the Qdrant pods
        f"{secrets}/qdrant-ca/ca.crt": ("acme-qdrant-tls", "ca.crt"),
    }
    external = find(children_of("external-openai"), "Deployment", "acme-memory")
    pod = external["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert _env(container) == {"HOME": "/tmp", "MEM0_TELEMETRY": "False"}
    assert _secret_files(pod) == {
        f"{secrets}/embedder-api-key/api-key": ("acme-openai", "embeddings"),
        f"{secrets}/llm-api-key/api-key": ("acme-openai", "chat"),
        f"{secrets}/qdrant-api-key/api-key": ("acme-qdrant", "api-key"),
    }
    # the config names exactly those files
    cfg = service_config(OWNER, spec_of(SAMPLES["external-openai"]))
    named = {cfg.vector_store.server.api_key.file, cfg.embedder.api_key.file}
    assert named | {cfg.llm.api_key.file} == set(_secret_files(pod))


def test_memory_deployment_shape():
    children = children_of("managed-default")
    deployment = find(children, "Deployment", "acme-memory")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "memory-service"
    assert container["image"] == IMAGES.service
    assert container["args"] == ["serve", "--config", "/etc/memorystore/service.yaml"]
    assert container["ports"] == [{"containerPort": 8765, "name": "https", "protocol": "TCP"}]
    https = {"port": "https", "scheme": "HTTPS"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", **https}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", **https}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", **https}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["config"] == {"mountPath": "/etc/memorystore", "name": "config", "readOnly": True}
    assert mounts["data"]["mountPath"] == "/data"
    assert mounts["tmp"]["mountPath"] == "/tmp"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"] == {"name": "acme-memory-config"}
    assert volumes["data"]["persistentVolumeClaim"] == {"claimName": "acme-memory-data"}
    assert volumes["tmp"] == {"emptyDir": {"sizeLimit": "512Mi"}, "name": "tmp"}
    _assert_restricted(pod, container, uid=10001)
    claim = find(children, "PersistentVolumeClaim", "acme-memory-data")
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }


def _assert_restricted(pod: dict[str, Any], container: dict[str, Any], uid: int) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid
    assert pod["securityContext"]["runAsGroup"] == uid
    assert pod["securityContext"]["fsGroup"] == uid
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}


def test_resources_and_images_come_from_the_spec():
    children = children_of("allowed-agent-pods")
    deployment = find(children, "Deployment", "acme-memory")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/memorystore/memory-service:0.1.0"
    # requests as written; limits, unset, keep their defaults
    assert container["resources"] == {
        "limits": {"cpu": "2", "memory": "2Gi"},
        "requests": {"cpu": "250m", "memory": "512Mi"},
    }
    claim = find(children, "PersistentVolumeClaim", "acme-memory-data")
    assert claim["spec"]["storageClassName"] == "standard"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"


# --- managed Qdrant -------------------------------------------------------------------------


def test_qdrant_statefulset_shape():
    children = children_of("managed-default")
    sts = find(children, "StatefulSet", "acme-qdrant")
    spec = sts["spec"]
    assert spec["replicas"] == 1
    assert spec["serviceName"] == "acme-qdrant-headless"
    assert spec["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == IMAGES.qdrant
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "http": 6333,
        "grpc": 6334,
        "p2p": 6335,
    }
    https = {"port": "http", "scheme": "HTTPS"}  # kubelet does not verify: no CA needed
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", **https}
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", **https}
    assert container["startupProbe"]["httpGet"] == {"path": "/livez", **https}
    assert not [e for e in container["env"] if "valueFrom" in e or "API_KEY" in e["name"]]
    # the key comes from a config file (--config-path) in the Secret the keys make
    config = "/var/run/secrets/memorystore/qdrant-config/config.yaml"
    assert f"./qdrant --config-path {config}" in container["args"][0]
    secret = find(children, "Secret", "acme-qdrant-config")
    text = base64.b64decode(secret["data"]["config.yaml"]).decode()
    tls_dir = "/var/run/secrets/memorystore/qdrant-tls"
    assert yaml.safe_load(text) == {
        "service": {"api_key": KEYS.qdrant_api_key, "enable_tls": True},
        "cluster": {"p2p": {"enable_tls": True}},
        "tls": {
            "cert": f"{tls_dir}/tls.crt",
            "key": f"{tls_dir}/tls.key",
            "ca_cert": f"{tls_dir}/ca.crt",
            "cert_ttl": 300,
        },
    }
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations == {"memorystore.dev/qdrant-tls": "true"}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts == {
        "/qdrant/storage": {"mountPath": "/qdrant/storage", "name": "storage"},
        # snapshots live on the storage claim too (an emptyDir would lose them with the pod)
        "/qdrant/snapshots": {
            "mountPath": "/qdrant/snapshots",
            "name": "storage",
            "subPath": "snapshots",
        },
        "/qdrant/init": {"mountPath": "/qdrant/init", "name": "init"},
        "/tmp": {"mountPath": "/tmp", "name": "tmp"},
        "/var/run/secrets/memorystore/qdrant-config": {
            "mountPath": "/var/run/secrets/memorystore/qdrant-config",
            "name": "config",
            "readOnly": True,
        },
        tls_dir: {"mountPath": tls_dir, "name": "tls", "readOnly": True},
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"] == {"defaultMode": 0o440, "secretName": "acme-qdrant-tls"}
    assert volumes["init"]["emptyDir"] == {"sizeLimit": "16Mi"}
    assert volumes["tmp"]["emptyDir"] == {"sizeLimit": "256Mi"}
    assert volumes["config"]["secret"] == {"defaultMode": 0o440, "secretName": "acme-qdrant-config"}
    assert container["resources"] == {
        "limits": {"cpu": "2", "memory": "1536Mi"},
        "requests": {"cpu": "250m", "memory": "256Mi"},
    }
    (template,) = spec["volumeClaimTemplates"]
    assert template["metadata"]["name"] == "storage"
    assert template["spec"]["resources"]["requests"]["storage"] == "1Gi"
    _assert_restricted(pod, container, uid=1000)

    headless = find(children, "Service", "acme-qdrant-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    client = find(children, "Service", "acme-qdrant")
    assert [p["port"] for p in client["spec"]["ports"]] == [6333, 6334]


def _run_start_script(tmp_path: Path, hostname: str, reachable_after: int) -> list[str]:
    """The StatefulSet's start script under /bin/sh, in a folder whose `./qdrant` prints its
    arguments; `getent` and `bash` (the peer-port check) fail until their
    `reachable_after`-th call, as while pod 0 is still starting. `sleep` returns at once."""
    sts = find(children_of("managed-default"), "StatefulSet", "acme-qdrant")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/bin/sh", "-c"]
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "calls"
    fail_until = f'echo "$0 $*" >> {calls}; [ "$(wc -l < {calls})" -ge {reachable_after} ]\n'
    for name, body in {"getent": fail_until, "bash": fail_until, "sleep": "exit 0\n",
                       "timeout": 'shift; exec "$@"\n'}.items():  # fmt: skip
        (tools / name).write_text("#!/bin/sh\n" + body)
        (tools / name).chmod(0o755)
    (tmp_path / "qdrant").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (tmp_path / "qdrant").chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "HOSTNAME": hostname}
    done = subprocess.run(
        ["/bin/sh", "-c", container["args"][0]], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout.splitlines()


def test_pod_zero_founds_the_cluster_at_its_headless_name(tmp_path):
    args = _run_start_script(tmp_path, "acme-qdrant-0", reachable_after=1)
    assert args == [
        "--config-path", "/var/run/secrets/memorystore/qdrant-config/config.yaml",
        "--uri", "https://acme-qdrant-0.acme-qdrant-headless.tenants.svc:6335",
    ]  # fmt: skip
    assert not (tmp_path / "calls").exists(), "the founder waits for nobody"


def test_a_new_peer_waits_for_pod_zero_then_joins_it(tmp_path):
    """Qdrant tries its bootstrap peer once and panics when it cannot reach it: a peer with
    no Raft state waits until pod 0 resolves and accepts connections, then joins."""
    args = _run_start_script(tmp_path, "acme-qdrant-2", reachable_after=5)
    first = "https://acme-qdrant-0.acme-qdrant-headless.tenants.svc:6335"
    assert args == [
        "--config-path", "/var/run/secrets/memorystore/qdrant-config/config.yaml",
        "--bootstrap", first,
        "--uri", "https://acme-qdrant-2.acme-qdrant-headless.tenants.svc:6335",
    ]  # fmt: skip
    checks = (tmp_path / "calls").read_text().splitlines()
    assert len(checks) >= 5, checks  # it kept checking until pod 0 answered
    assert any("/dev/tcp/acme-qdrant-0.acme-qdrant-headless.tenants.svc/6335" in c for c in checks)


def test_managed_options_reach_the_statefulset():
    children = children_of("suspended")
    sts = find(children, "StatefulSet", "acme-qdrant")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/qdrant/qdrant:v1.18.3"
    assert container["resources"] == {
        "limits": {"cpu": "2", "memory": "2Gi"},
        "requests": {"cpu": "500m", "memory": "1Gi"},
    }
    (template,) = sts["spec"]["volumeClaimTemplates"]
    assert template["spec"]["storageClassName"] == "fast-ssd"
    assert template["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"


# --- suspend --------------------------------------------------------------------------------


def test_suspend_scales_every_workload_to_zero_and_keeps_the_volumes():
    children = children_of("suspended")
    assert find(children, "Deployment", "acme-memory")["spec"]["replicas"] == 0
    assert find(children, "StatefulSet", "acme-qdrant")["spec"]["replicas"] == 0
    find(children, "PersistentVolumeClaim", "acme-memory-data")
    resumed = desired_children(
        OWNER, spec_of({**SAMPLES["suspended"], "suspend": False}), IMAGES, KEYS
    )
    assert find(resumed, "StatefulSet", "acme-qdrant")["spec"]["replicas"] == 3
    assert find(resumed, "Deployment", "acme-memory")["spec"]["replicas"] == 1


# --- external store -------------------------------------------------------------------------


@pytest.mark.parametrize("sample", ["external-openai", "embedded"])
def test_stores_without_a_managed_qdrant_have_no_qdrant_objects(sample):
    children = children_of(sample)
    assert kinds_and_names(children) == [
        ("NetworkPolicy", "acme-memory"),
        ("ConfigMap", "acme-memory-config"),
        ("PersistentVolumeClaim", "acme-memory-data"),
        ("PodDisruptionBudget", "acme-memory"),
        ("Deployment", "acme-memory"),
        ("Service", "acme-memory"),
        ("ConfigMap", "acme-client"),
        ("Secret", "acme-client"),
    ]
    for obj in children:
        assert obj["metadata"]["labels"]["app.kubernetes.io/component"] != "qdrant"
        assert "qdrant" not in obj["metadata"]["name"]


def test_expected_workloads():
    assert expected_workloads(OWNER, spec_of({})) == [
        ("StatefulSet", "acme-qdrant"),
        ("Deployment", "acme-memory"),
    ]
    assert expected_workloads(OWNER, spec_of(SAMPLES["external-openai"])) == [
        ("Deployment", "acme-memory")
    ]
    assert expected_workloads(OWNER, spec_of(SAMPLES["embedded"])) == [
        ("Deployment", "acme-memory")
    ]


# --- embedded engine ------------------------------------------------------------------------


def test_embedded_store_is_one_pod():
    deployment = find(children_of("embedded"), "Deployment", "acme-memory")
    assert deployment["spec"]["replicas"] == 1
    # the old pod lets go of the volume (and the engine's lock) before the new one starts
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_embedded_engine_files_live_on_the_data_volume_beside_the_history():
    children = children_of("embedded")
    cfg = service_config(OWNER, spec_of(SAMPLES["embedded"]))
    assert cfg.vector_store.server is None and cfg.vector_store.embedded is not None
    assert cfg.vector_store.collection == "acme_small"
    assert cfg.vector_store.embedded.path == "/data/qdrant"
    assert cfg.history.path == "/data/history.db"
    # /data is the mount of the one claim, sized by spec.historyDb.sqlite.storage
    (container,) = find(children, "Deployment", "acme-memory")["spec"]["template"]["spec"][
        "containers"
    ]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "data")
    assert mount == {"mountPath": "/data", "name": "data"}  # read-write
    for path in (cfg.vector_store.embedded.path, cfg.history.path):
        assert path.startswith(mount["mountPath"] + "/")
    claim = find(children, "PersistentVolumeClaim", "acme-memory-data")
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
    }
    # limits as written; requests, unset, keep their defaults
    assert container["resources"] == {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "250m", "memory": "640Mi"},
    }


def test_embedded_engine_gets_no_qdrant_key_at_all():
    children = children_of("embedded")
    (container,) = find(children, "Deployment", "acme-memory")["spec"]["template"]["spec"][
        "containers"
    ]
    assert _env(container) == {"HOME": "/tmp", "MEM0_TELEMETRY": "False"}
    for obj in children:
        assert "qdrant-api-key" not in yaml.safe_dump(obj), obj["kind"]
    text = find(children, "ConfigMap", "acme-memory-config")["data"]["service.yaml"]
    assert "QDRANT" not in text and "server" not in yaml.safe_load(text)["vectorStore"]


def test_embedded_store_suspends_to_zero_and_keeps_its_volume():
    children = desired_children(
        OWNER, spec_of({**SAMPLES["embedded"], "suspend": True}), IMAGES, KEYS
    )
    assert find(children, "Deployment", "acme-memory")["spec"]["replicas"] == 0
    find(children, "PersistentVolumeClaim", "acme-memory-data")


def test_embedded_store_runs_one_replica_and_says_why_not_two():
    raw = {"vectorStore": {"embedded": {}}, "service": {"replicas": 1}}
    deployment = find(
        desired_children(OWNER, spec_of(raw), IMAGES, KEYS), "Deployment", "acme-memory"
    )
    assert deployment["spec"]["replicas"] == 1
    raw = {"vectorStore": {"embedded": {}}, "service": {"replicas": 2}}
    with pytest.raises(SpecError) as info:
        check_spec(OWNER, spec_of(raw))
    message = str(info.value)
    assert message.startswith("spec.service.replicas is 2")
    assert "spec.vectorStore.embedded" in message and "single-process lock" in message


@pytest.mark.parametrize("raw", [{}, {"vectorStore": {"embedded": {}}}])
def test_zero_service_replicas_are_refused_pointing_at_suspend(raw):
    with pytest.raises(ValidationError) as info:
        spec_of({**raw, "service": {"replicas": 0}})
    assert format_validation_error(info.value) == (
        "service.replicas: must be at least 1: to scale to zero use spec.suspend (data kept)"
    )


# --- pod placement --------------------------------------------------------------------------


def _pod_spec(children: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return find(children, kind, name)["spec"]["template"]["spec"]


def test_placement_reaches_each_kind_of_pod_as_written():
    children = children_of("placed")
    service = _pod_spec(children, "Deployment", "acme-memory")
    assert service["nodeSelector"] == {"memorystore.dev/node": "real", "pool": "memory"}
    assert service["tolerations"] == [
        {
            "effect": "NoSchedule",
            "key": "memorystore.dev/real-node",
            "operator": "Equal",  # the default, written out as the API server would
            "value": "true",
        },
        {
            "effect": "NoExecute",
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "tolerationSeconds": 30,
        },
    ]
    qdrant = _pod_spec(children, "StatefulSet", "acme-qdrant")
    assert qdrant["nodeSelector"] == {"pool": "qdrant"}
    assert qdrant["tolerations"] == [{"operator": "Exists"}]


@pytest.mark.parametrize("sample", sorted(set(SAMPLES) - {"placed"}))
def test_without_placement_pods_carry_neither_field(sample):
    # absent rather than empty: stores made before the fields existed do not roll
    for child in children_of(sample):
        if child["kind"] in ("Deployment", "StatefulSet"):
            pod = child["spec"]["template"]["spec"]
            assert "nodeSelector" not in pod and "tolerations" not in pod


def test_placement_rolls_the_service_pods_but_changes_no_config():
    plain = desired_children(OWNER, spec_of({}), IMAGES, KEYS)
    placed = desired_children(
        OWNER,
        spec_of({"service": {"nodeSelector": {"pool": "memory"}}}),
        IMAGES,
        KEYS,
    )
    for kind, name in (("ConfigMap", "acme-memory-config"), ("ConfigMap", "acme-client")):
        assert find(plain, kind, name) == find(placed, kind, name)
    before = find(plain, "Deployment", "acme-memory")["spec"]["template"]
    after = find(placed, "Deployment", "acme-memory")["spec"]["template"]
    assert before["metadata"] == after["metadata"]  # same config checksum
    assert before["spec"] != after["spec"]  # a new pod template: the Deployment rolls
    # the service's placement is not Qdrant's
    assert find(plain, "StatefulSet", "acme-qdrant") == find(placed, "StatefulSet", "acme-qdrant")


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_children_are_valid_kubernetes_objects(sample):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for child in children_of(sample):
        if child["kind"] in ("Deployment", "StatefulSet", "PodDisruptionBudget"):
            kubernetes_validate.validate(child, "1.37", strict=True)


@pytest.mark.parametrize(
    ("placement", "where", "why"),
    [
        (
            {"service": {"tolerations": [{"value": "x"}]}},
            "service.tolerations.0",
            "operator must be Exists when key is empty",
        ),
        (
            {"service": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
            "service.tolerations.0",
            "value must be empty when operator is Exists",
        ),
        (
            {"service": {"tolerations": [{"key": "k", "effect": "NoSchedule",
                                          "tolerationSeconds": 5}]}},
            "service.tolerations.0",
            "tolerationSeconds is only allowed with effect NoExecute",
        ),
        (
            {"service": {"tolerations": [{"key": "k", "effect": "Never"}]}},
            "service.tolerations.0.effect",
            "NoSchedule",
        ),
        (
            {"service": {"tolerations": [{"key": "k", "operator": "In"}]}},
            "service.tolerations.0.operator",
            "Exists",
        ),
        (
            {"service": {"tolerations": [{"key": "k", "tolerationSeconds": -1,
                                          "effect": "NoExecute"}]}},
            "service.tolerations.0.tolerationSeconds",
            "greater than or equal to 0",
        ),
        (
            {"service": {"tolerations": [{"key": "bad key!", "operator": "Exists"}]}},
            "service.tolerations.0.key",
            "should match pattern",
        ),
        (
            {"service": {"tolerations": [{"key": "x" * 64, "operator": "Exists"}]}},
            "service.tolerations.0.key",
            "at most 63 characters",
        ),
        (
            {"service": {"tolerations": [{"operator": "Exists"}] * 33}},
            "service.tolerations",
            "at most 32 items",
        ),
        (
            {"service": {"nodeSelector": {"Bad_Prefix.example/pool": "a"}}},
            "service.nodeSelector",
            "'Bad_Prefix.example/pool' is not a qualified name",
        ),
        (
            {"service": {"nodeSelector": {"example.com/" + "p" * 64: "a"}}},
            "service.nodeSelector",
            "at most 63 characters",
        ),
        (
            {"service": {"nodeSelector": {"pool": "not ok!"}}},
            "service.nodeSelector.pool",
            "should match pattern",
        ),
        (
            {"service": {"nodeSelector": {"pool": "v" * 64}}},
            "service.nodeSelector.pool",
            "at most 63 characters",
        ),
        (
            {"service": {"nodeSelector": {"pool\n": "a"}}},  # `$` must not accept a newline
            "service.nodeSelector",
            "is not a qualified name",
        ),
        (
            {"vectorStore": {"managed": {"nodeSelector": {"-pool": "a"}}}},
            "vectorStore.managed.nodeSelector",
            "'-pool' is not a qualified name",
        ),
        (
            {"vectorStore": {"managed": {"tolerations": [{"key": "k", "operator": "Exists",
                                                          "value": "v"}]}}},
            "vectorStore.managed.tolerations.0",
            "value must be empty when operator is Exists",
        ),
    ],
)  # fmt: skip
def test_bad_placement_is_refused_naming_the_field(placement, where, why):
    # the operator turns this into SpecValid=False before building anything
    with pytest.raises(ValidationError) as info:
        spec_of(placement)
    message = format_validation_error(info.value)
    assert message.startswith(f"{where}: ") or f"; {where}: " in message, message
    assert why in message, message


def test_valid_placement_forms_are_accepted():
    spec = spec_of(
        {
            "service": {
                "nodeSelector": {"kubernetes.io/os": "linux", "empty-value": ""},
                "tolerations": [
                    {"operator": "Exists"},  # every taint
                    {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "a.b/c", "value": "v"},
                ],
            }
        }
    )
    assert [t.operator for t in spec.service.tolerations] == ["Exists", "Exists", "Equal"]


# --- network policies -----------------------------------------------------------------------


def test_qdrant_accepts_only_the_memory_service_and_its_peers():
    policy = find(children_of("managed-default"), "NetworkPolicy", "acme-qdrant")
    qdrant = names.selector_labels("acme", "qdrant")
    service = names.selector_labels("acme", "memory-service")
    assert policy["spec"] == {
        "podSelector": {"matchLabels": qdrant},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [{"podSelector": {"matchLabels": service}}],
                "ports": [{"port": 6333, "protocol": "TCP"}, {"port": 6334, "protocol": "TCP"}],
            },
            {
                "from": [{"podSelector": {"matchLabels": qdrant}}],
                "ports": [{"port": 6335, "protocol": "TCP"}],
            },
        ],
    }


def test_memory_service_accepts_its_own_label_and_the_allowed_agent_pods_only():
    policy = find(children_of("allowed-agent-pods"), "NetworkPolicy", "acme-memory")
    assert policy["spec"]["podSelector"] == {
        "matchLabels": names.selector_labels("acme", "memory-service")
    }
    assert policy["spec"]["ingress"] == [
        {
            "from": [
                {"podSelector": {"matchLabels": {"memorystore.dev/client": "acme"}}},
                {"podSelector": {"matchLabels": {"app": "chat-agent", "tier": "agents"}}},
            ],
            "ports": [{"port": 8765, "protocol": "TCP"}],
        }
    ]


def test_by_default_only_pods_with_the_store_label_are_admitted():
    policy = find(children_of("managed-default"), "NetworkPolicy", "acme-memory")
    (rule,) = policy["spec"]["ingress"]
    # no empty podSelector (which would admit every pod of the namespace), no namespaceSelector
    assert rule["from"] == [{"podSelector": {"matchLabels": {"memorystore.dev/client": "acme"}}}]
    assert all(peer["podSelector"] != {} for peer in rule["from"])


# --- specs that cannot be built -------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner_name", "raw", "field"),
    [
        ("a" * 46, {}, "metadata.name"),
        ("acme.prod", {}, "metadata.name"),
        ("1acme", {}, "metadata.name"),
        (
            "acme",
            {"vectorStore": {"managed": {}, "external": {"url": "http://q:6333"}}},
            "spec.vectorStore",
        ),
        ("acme", {"vectorStore": {}}, "spec.vectorStore"),
        ("acme", {"vectorStore": {"managed": {}, "embedded": {}}}, "spec.vectorStore"),
        (
            "acme",
            {"vectorStore": {"external": {"url": "http://q:6333"}, "embedded": {}}},
            "spec.vectorStore",
        ),
        (
            "acme",
            {
                "vectorStore": {
                    "managed": {},
                    "external": {"url": "http://q:6333"},
                    "embedded": {},
                }
            },
            "spec.vectorStore",
        ),
        (
            "acme",
            {"vectorStore": {"embedded": {}}, "historyDb": {"sqlite": {"storage": {"size": "x"}}}},
            "spec.historyDb.sqlite.storage.size",
        ),
        ("acme", {"historyDb": {}}, "spec.historyDb"),
        ("acme", {"service": {"replicas": 2}}, "spec.service.replicas"),
        (
            "acme",
            {"vectorStore": {"external": {"url": "qdrant:6333"}}},
            "spec.vectorStore.external.url",
        ),
        (
            "acme",
            {"vectorStore": {"external": {"url": "https://user:pw@q.example:6333"}}},
            "spec.vectorStore.external.url",
        ),
        (
            "acme",
            {"vectorStore": {"managed": {"storage": {"size": "lots"}}}},
            "spec.vectorStore.managed.storage.size",
        ),
        (
            "acme",
            {"historyDb": {"sqlite": {"storage": {"size": "1 Gi"}}}},
            "spec.historyDb.sqlite.storage.size",
        ),
        (
            "acme",
            {"service": {"resources": {"limits": {"memory": "2GB"}}}},
            "spec.service.resources.limits.memory",
        ),
        ("acme", {"embedder": {"provider": "openai"}}, "spec.embedder"),
        ("acme", {"embedder": {"dimensions": 512}}, "spec.embedder"),
    ],
)
def test_unbuildable_specs_are_refused_naming_the_field(owner_name, raw, field):
    owner = Owner(name=owner_name, namespace="tenants", uid="u", generation=1)
    with pytest.raises(SpecError) as info:
        check_spec(owner, spec_of(raw))
    assert str(info.value).startswith(field), str(info.value)


def test_two_vector_store_tiers_are_refused_naming_all_four():
    raw = {"vectorStore": {"managed": {}, "embedded": {}}}
    with pytest.raises(SpecError) as info:
        check_spec(OWNER, spec_of(raw))
    for tier in ("managed", "external", "embedded", "postgres"):
        assert f"spec.vectorStore.{tier}" in str(info.value)


def test_credentials_in_the_external_url_are_not_echoed():
    raw = {"vectorStore": {"external": {"url": "ftp://user:s3cret@q.example"}}}
    with pytest.raises(SpecError, match="must not contain credentials") as info:
        check_spec(OWNER, spec_of(raw))
    assert "s3cret" not in str(info.value)


def test_longest_allowed_name_builds_valid_child_names():
    owner = Owner(name="a" * names.MAX_STORE_NAME_LENGTH, namespace="t", uid="u", generation=1)
    for obj in desired_children(owner, spec_of({}), IMAGES, KEYS):
        name = obj["metadata"]["name"]
        if obj["kind"] == "Service":
            assert len(name) <= 63
        if obj["kind"] == "StatefulSet":
            assert len(name) + len("-") + 10 <= 63  # controller-revision-hash label value


def test_data_bearing_children_are_owned_only_under_delete():
    from memorystore.operator.builders.common import owns_data

    retain = MemoryStoreSpec()
    delete = MemoryStoreSpec(deletion_policy="Delete")
    assert not owns_data(retain) and owns_data(delete)
    for spec, owned in ((retain, False), (delete, True)):
        claim = next(
            c
            for c in desired_children(OWNER, spec, IMAGES, KEYS)
            if c["kind"] == "PersistentVolumeClaim"
        )
        assert ("ownerReferences" in claim["metadata"]) is owned
        assert ("ownerReferences" in keys_secret(OWNER, KEYS, owned)["metadata"]) is owned


# --- voluntary disruptions: budgets and spreading -------------------------------------------


@pytest.mark.parametrize(
    ("sample", "component", "name"),
    [
        ("managed-default", "qdrant", "acme-qdrant"),
        ("managed-default", "memory-service", "acme-memory"),
        ("embedded", "memory-service", "acme-memory"),
        ("suspended", "qdrant", "acme-qdrant"),
    ],
)
def test_each_kind_of_pod_has_a_disruption_budget_of_one(sample, component, name):
    children = children_of(sample)
    budget = find(children, "PodDisruptionBudget", name)
    assert budget["apiVersion"] == "policy/v1"
    assert budget["metadata"]["labels"]["app.kubernetes.io/component"] == component
    assert budget["spec"] == {
        "maxUnavailable": 1,  # a single replica can still be drained off its node
        "selector": {"matchLabels": names.selector_labels("acme", component)},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    # the budget selects exactly the pods of its workload
    kind = "StatefulSet" if component == "qdrant" else "Deployment"
    workload = next(c for c in children if c["kind"] == kind)
    assert budget["spec"]["selector"] == workload["spec"]["selector"]


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
def test_disruption_budgets_go_with_the_store_like_its_services(policy):
    children = desired_children(OWNER, spec_of({"deletionPolicy": policy}), IMAGES, KEYS)
    service = find(children, "Service", "acme-memory")
    for budget in (c for c in children if c["kind"] == "PodDisruptionBudget"):
        assert budget["metadata"]["ownerReferences"] == service["metadata"]["ownerReferences"]


def _spread(children: list[dict[str, Any]], kind: str, name: str) -> Any:
    return _pod_spec(children, kind, name).get("topologySpreadConstraints")


def test_several_qdrant_replicas_spread_over_nodes_and_one_does_not_mention_it():
    assert _spread(children_of("managed-default"), "StatefulSet", "acme-qdrant") is None
    assert _spread(children_of("redundant"), "StatefulSet", "acme-qdrant") == [
        {
            "labelSelector": {"matchLabels": names.selector_labels("acme", "qdrant")},
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",  # a spread wish, never unschedulable
        }
    ]
    assert _spread(children_of("redundant"), "Deployment", "acme-memory") is None


def test_suspending_changes_the_replica_counts_but_not_the_pod_templates():
    # the spread follows the replicas asked for, not the 0 of a suspended store: resuming
    # must not roll the pods
    running = desired_children(
        OWNER, spec_of({**SAMPLES["suspended"], "suspend": False}), IMAGES, KEYS
    )
    suspended = desired_children(OWNER, spec_of(SAMPLES["suspended"]), IMAGES, KEYS)
    for kind, name in (("StatefulSet", "acme-qdrant"), ("Deployment", "acme-memory")):
        assert (
            find(running, kind, name)["spec"]["template"]
            == (find(suspended, kind, name)["spec"]["template"])
        )
    assert _spread(suspended, "StatefulSet", "acme-qdrant") is not None


def test_several_service_replicas_spread_over_nodes():
    deployment = find(children_of("postgres"), "Deployment", "acme-memory")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["topologySpreadConstraints"] == [
        {
            "labelSelector": {"matchLabels": names.selector_labels("acme", "memory-service")},
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
        }
    ]
    single = find(children_of("managed-default"), "Deployment", "acme-memory")
    assert "topologySpreadConstraints" not in single["spec"]["template"]["spec"]


# --- a managed Qdrant's collection layout ---------------------------------------------------


def test_the_managed_collection_layout_reaches_the_service_config():
    cfg = service_config(OWNER, spec_of(SAMPLES["redundant"]))
    assert (cfg.vector_store.server.shard_number, cfg.vector_store.server.replication_factor) == (
        6,
        2,
    )
    text = find(children_of("redundant"), "ConfigMap", "acme-memory-config")["data"]
    server = yaml.safe_load(text["service.yaml"])["vectorStore"]["server"]
    assert (server["shardNumber"], server["replicationFactor"]) == (6, 2)
    # written out for the defaults too: a distributed Qdrant's own default is a shard per peer
    default = service_config(OWNER, spec_of({})).vector_store.server
    assert (default.shard_number, default.replication_factor) == (1, 1)


@pytest.mark.parametrize("sample", ["external-openai", "embedded"])
def test_other_tiers_leave_the_collection_layout_to_the_server(sample):
    text = find(children_of(sample), "ConfigMap", "acme-memory-config")["data"]["service.yaml"]
    assert "shardNumber" not in text and "replicationFactor" not in text


def test_more_copies_than_qdrant_replicas_are_refused_naming_both_fields():
    raw = {"vectorStore": {"managed": {"replicas": 2, "replicationFactor": 3}}}
    with pytest.raises(SpecError) as info:
        check_spec(OWNER, spec_of(raw))
    assert str(info.value) == (
        "spec.vectorStore.managed.replicationFactor (3) must be at most "
        "spec.vectorStore.managed.replicas (2): each copy of a shard lives on a different "
        "Qdrant replica"
    )
    check_spec(OWNER, spec_of(SAMPLES["redundant"]))


def test_an_external_qdrants_ca_is_mounted_as_a_file_the_config_names():
    spec = spec_of(
        {
            "vectorStore": {
                "external": {
                    "url": "https://qdrant.example.com:6333",
                    "caSecretRef": {"name": "corp-ca", "key": "ca.pem"},
                }
            }
        }
    )
    server = service_config(OWNER, spec).vector_store.server
    assert server is not None and server.ca is not None
    pod = find(desired_children(OWNER, spec, IMAGES, KEYS, ca_cert=CA_CERT), "Deployment",
               "acme-memory")["spec"]["template"]["spec"]  # fmt: skip
    assert _secret_files(pod) == {server.ca.file: ("corp-ca", "ca.pem")}


# --- monitoring -------------------------------------------------------------------------------

MONITORING = Monitoring(
    pod_monitors=True,
    interval="15s",
    labels=(("release", "prom"),),
    scrapers=(
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        },
    ),
)


def _by_kind(children: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [c for c in children if c["kind"] == kind]


@pytest.mark.parametrize("tls", [True, False])
def test_a_pod_monitor_scrapes_every_service_pod_as_the_pods_serve(tls: bool):
    spec = spec_of({"tls": {"enabled": tls}})
    monitor = pod_monitor(OWNER, spec, MONITORING)
    assert monitor is not None and monitor["kind"] == "PodMonitor"
    children = desired_children(OWNER, spec, IMAGES, KEYS, ca_cert=CA_CERT)
    (deployment,) = _by_kind(children, "Deployment")
    pod = deployment["spec"]["template"]
    # the selector picks the service's pods, and the port it names is theirs
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    assert endpoint["interval"] == "15s" and monitor["metadata"]["labels"]["release"] == "prom"
    assert endpoint["relabelings"][0]["targetLabel"] == "store"
    assert monitor["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    if tls:  # verified against the store's CA, under a name the certificate holds
        assert endpoint["scheme"] == "https"
        ca = endpoint["tlsConfig"]["ca"]["configMap"]
        (client_map,) = [
            c for c in _by_kind(children, "ConfigMap") if c["metadata"]["name"] == ca["name"]
        ]
        assert client_map["data"][ca["key"]] == CA_CERT
        assert endpoint["tlsConfig"]["serverName"] in names.memory_dns_names("acme", "tenants")
    else:
        assert endpoint["scheme"] == "http" and "tlsConfig" not in endpoint


def test_no_pod_monitor_unless_asked():
    assert pod_monitor(OWNER, spec_of({}), Monitoring()) is None


def test_the_scrapers_are_admitted_to_the_service_port_only():
    spec = spec_of({})
    children = desired_children(OWNER, spec, IMAGES, KEYS, scrapers=MONITORING.scrapers)
    policy = next(
        c for c in _by_kind(children, "NetworkPolicy")
        if c["metadata"]["name"] == names.memory_network_policy_name("acme")
    )  # fmt: skip
    (rule,) = policy["spec"]["ingress"]
    assert MONITORING.scrapers[0] in rule["from"]
    assert rule["ports"] == [{"port": names.SERVICE_PORT, "protocol": "TCP"}]
    without = desired_children(OWNER, spec, IMAGES, KEYS)
    plain = next(
        c
        for c in _by_kind(without, "NetworkPolicy")
        if c["metadata"]["name"] == policy["metadata"]["name"]
    )
    assert MONITORING.scrapers[0] not in plain["spec"]["ingress"][0]["from"]
