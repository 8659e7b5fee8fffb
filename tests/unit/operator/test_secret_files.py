"""No secret in an environment variable of any container the operator creates.

Checked on every golden manifest (what the operator applies for the sample stores) and, with
generated specs (every tier, every combination of user Secrets, random key values), on
every builder output: no env var takes a value from a Secret (`secretKeyRef`, `envFrom`),
no env value holds a key, every Secret key a spec names reaches the service as a read-only
file of its own that the rendered config names, and the key values appear in Secrets only.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.config import ServiceConfig
from memorystore.operator.builders import desired_children
from memorystore.operator.builders.model import Images, Keys, Owner
from memorystore.operator.builders.paths import SECRETS_DIR
from memorystore.operator.builders.secret_files import service_secret_files
from memorystore.operator.builders.validate import check_spec
from memorystore.spec import MemoryStoreSpec

GOLDEN = Path(__file__).parent / "golden"
OWNER = Owner("acme", "tenants", "0b6f1c9e-0000-4000-8000-3a1f0c2d7e11", 1)
# What an env value may look like: short words, paths, numbers and JSON of label maps; a
# secret would be a long random token (the generated keys are 43 characters of base64url).
_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=]{24,}")


def _pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] in ("Deployment", "StatefulSet"):
        return [obj["spec"]["template"]["spec"]]
    return [obj["spec"]] if obj["kind"] == "Pod" else []


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        container
        for pod in _pod_specs(obj)
        for container in [*pod.get("initContainers", []), *pod["containers"]]
    ]


def assert_no_secret_in_env(obj: dict[str, Any]) -> None:
    for container in _containers(obj):
        where = f"{obj['kind']}/{obj['metadata']['name']} container {container['name']}"
        assert "envFrom" not in container, where
        for var in container.get("env", []):
            source = var.get("valueFrom", {})
            assert "secretKeyRef" not in source, f"{where}: {var['name']} from a Secret"
            assert not _TOKEN.search(var.get("value", "")), f"{where}: {var['name']} = a token?"
            assert not re.search(r"KEY|TOKEN|PASSWORD|DSN|SECRET", var["name"]), where


def golden_objects() -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(GOLDEN.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def test_the_golden_manifests_are_many_and_have_containers():
    objects = golden_objects()
    assert len({p.stem for p in GOLDEN.glob("*.yaml")}) >= 9
    assert sum(len(_containers(o)) for o in objects) >= 12  # services, restores, Qdrants


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_no_golden_container_has_a_secret_in_its_environment(path: Path):
    for obj in yaml.safe_load_all(path.read_text()):
        if obj:
            assert_no_secret_in_env(obj)


def test_the_check_catches_each_way_a_secret_could_reach_the_environment():
    base = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}

    def pod(**container: Any) -> dict[str, Any]:
        return {**base, "spec": {"containers": [{"name": "c", **container}]}}

    ref = {"secretKeyRef": {"name": "s", "key": "k"}}
    for bad in (
        pod(env=[{"name": "X", "valueFrom": ref}]),
        pod(envFrom=[{"secretRef": {"name": "s"}}]),
        pod(env=[{"name": "X", "value": "Zr1p3Jm4kQx8vB2nT6yL0wEaSdFgHj"}]),
        pod(env=[{"name": "DATABASE_DSN", "value": "x"}]),
    ):
        with pytest.raises(AssertionError):
            assert_no_secret_in_env(bad)
    assert_no_secret_in_env(pod(env=[{"name": "HOME", "value": "/tmp"}]))


# --- generated specs ---------------------------------------------------------------------------

refs = st.builds(
    lambda name, key: {"name": name, "key": key},
    st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True),
)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    tier = draw(st.sampled_from(["managed", "external", "embedded", "postgres"]))
    history = "sqlite" if tier == "embedded" else draw(st.sampled_from(["sqlite", "postgres"]))
    raw: dict[str, Any] = {}
    if history == "postgres":
        raw["historyDb"] = {"postgres": {"dsnSecretRef": draw(refs)}}
    if tier == "external":
        external: dict[str, Any] = {"url": "https://qdrant.example.com:6333"}
        if draw(st.booleans()):
            external["apiKeySecretRef"] = draw(refs)
        if draw(st.booleans()):
            external["caSecretRef"] = draw(refs)
        raw["vectorStore"] = {"external": external}
    elif tier == "managed" and draw(st.booleans()):
        raw["vectorStore"] = {"managed": {"tls": False}}
    elif tier == "postgres":
        vectors: dict[str, Any] = {}
        if history == "sqlite" or draw(st.booleans()):
            vectors["dsnSecretRef"] = draw(refs)
        raw["vectorStore"] = {"postgres": vectors}
    elif tier == "embedded":
        raw["vectorStore"] = {"embedded": {}}
    if draw(st.booleans()):
        raw["embedder"] = {
            "provider": "openai",
            "model": "text-embedding-3-small",
            "dimensions": 1536,
            "apiKeySecretRef": draw(refs),
        }
    if draw(st.booleans()):
        raw["llm"] = {"provider": "openai", "model": "gpt-4.1-mini", "apiKeySecretRef": draw(refs)}
    raw["tls"] = {"enabled": draw(st.booleans())}
    return raw


keys = st.builds(
    Keys,
    st.from_regex(r"[A-Za-z0-9_-]{43}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9_-]{43}", fullmatch=True),
)


def _named_refs(raw: dict[str, Any]) -> set[tuple[str, str]]:
    found = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k.endswith("SecretRef"):
                    found.add((v["name"], v["key"]))
                else:
                    walk(v)

    walk(raw)
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), keys)
def test_every_builder_output_keeps_secrets_in_files_only(raw: dict[str, Any], generated: Keys):
    spec = MemoryStoreSpec.model_validate(raw)
    check_spec(OWNER, spec)
    children = desired_children(OWNER, spec, Images(), generated)
    for obj in children:
        assert_no_secret_in_env(obj)
        if obj["kind"] != "Secret":  # the generated keys live in Secrets only
            text = yaml.safe_dump(obj)
            for value in (generated.service_api_key, generated.qdrant_api_key):
                assert value not in text, obj["kind"]
    (deployment,) = [o for o in children if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    mounted: dict[str, tuple[str, str]] = {}
    for volume in pod["volumes"]:
        secret = volume.get("secret") or {}
        for item in secret.get("items", []):
            mount = mounts[volume["name"]]
            assert mount["readOnly"] is True and secret["defaultMode"] == 0o440
            mounted[f"{mount['mountPath']}/{item['path']}"] = (secret["secretName"], item["key"])
    # every Secret key the spec names is one mounted file, under the secrets directory
    user = {pair for path, pair in mounted.items() if path.startswith(SECRETS_DIR + "/")}
    assert _named_refs(raw) <= user
    files = {f.path: (f.secret, f.key) for f in service_secret_files(OWNER, spec)}
    assert files.items() <= mounted.items()
    # ... and the config names exactly those files, never a variable
    (config_map,) = [o for o in children if o["metadata"]["name"] == "acme-memory-config"]
    text = config_map["data"]["service.yaml"]
    config = ServiceConfig.model_validate(yaml.safe_load(text))
    assert "env:" not in text
    sources = [
        config.vector_store.server.api_key if config.vector_store.server else None,
        config.vector_store.server.ca if config.vector_store.server else None,
        config.embedder.api_key,
        config.llm.api_key if config.llm else None,
        config.history.postgres.dsn if config.history.postgres else None,
        (
            config.vector_store.postgres.database.dsn
            if config.vector_store.postgres and config.vector_store.postgres.database
            else None
        ),
    ]
    assert {s.file for s in sources if s is not None} == set(files)


def test_the_qdrant_config_secret_holds_the_key_and_nothing_reads_it_from_the_environment():
    generated = Keys("s" * 43, "q" * 43)
    children = desired_children(OWNER, MemoryStoreSpec.model_validate({}), Images(), generated)
    (secret,) = [o for o in children if o["metadata"]["name"] == "acme-qdrant-config"]
    config = yaml.safe_load(base64.b64decode(secret["data"]["config.yaml"]))
    assert config["service"] == {"api_key": "q" * 43, "enable_tls": True}
    assert set(config) == {"service", "cluster", "tls"}  # TLS: file paths, no key material
    (sts,) = [o for o in children if o["kind"] == "StatefulSet"]
    assert_no_secret_in_env(sts)
