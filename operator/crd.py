"""The CustomResourceDefinitions (MemoryStore, MemoryStoreBackup), generated from the
pydantic models.

`memorystore/spec.py` is the one source of truth: this module turns their JSON Schema into
Kubernetes *structural* OpenAPI v3 schemas and adds what JSON Schema cannot say (CEL rules,
printer columns, the status subresource). The checked-in `crds/memorystore.yaml` and
`crds/memorystorebackup.yaml` are its output; a unit test fails when they differ.

    PYTHONSAFEPATH=1 .venv/bin/python -m memorystore.operator.crd --write
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from memorystore.spec import (
    BACKUP_KIND,
    BACKUP_PLURAL,
    BACKUP_SHORT_NAMES,
    BACKUP_SINGULAR,
    GROUP,
    KIND,
    OFFLINE_EMBEDDER_DIMS,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    EmbedderProvider,
    MemoryStoreBackupSpec,
    MemoryStoreBackupStatus,
    MemoryStoreSpec,
    MemoryStoreStatus,
)

CRD_NAME = f"{PLURAL}.{GROUP}"
BACKUP_CRD_NAME = f"{BACKUP_PLURAL}.{GROUP}"
API_VERSION = f"{GROUP}/{VERSION}"
CRD_DIR = Path(__file__).resolve().parent.parent / "crds"
CRD_PATH = CRD_DIR / "memorystore.yaml"
BACKUP_CRD_PATH = CRD_DIR / "memorystorebackup.yaml"
REGENERATE_COMMAND = "PYTHONSAFEPATH=1 .venv/bin/python -m memorystore.operator.crd --write"
READY_JSONPATH = '.status.conditions[?(@.type=="Ready")].status'

Schema = dict[str, Any]

# Keywords a structural schema may carry that pydantic emits; anything else fails the render,
# so a model change that Kubernetes cannot express is caught here, not by the API server.
_KEPT = (
    "type",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "format",
    "required",
)
_DROPPED = ("title", "$defs", "examples")

_OFFLINE = list(OFFLINE_EMBEDDER_DIMS)
_REMOTE = [str(p) for p in EmbedderProvider if str(p) not in OFFLINE_EMBEDDER_DIMS]


def _cel_list(values: list[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _immutable(path: str, why: str) -> Schema:
    return {
        "rule": "self == oldSelf",
        "message": f"{path} is immutable: {why}; create a new MemoryStore to change it",
    }


# Where an immutable choice says how to move the memories anyway (a README section).
MIGRATION_SECTION = "Changing tiers or the embedding model"


def _migrate(what: str) -> str:
    return (
        f"To change it, create a new MemoryStore with {what} and copy the memories across "
        "(for now: read them with the mem0 client's get_all and add them to the new store "
        f"with infer=False; see README: {MIGRATION_SECTION})"
    )


def _unchanged(parent: str, field: str, why: str, default: Any = None) -> Schema:
    """A transition rule on `parent` that `field` keeps its value, and is neither added nor
    removed (a rule on the field itself runs only when it exists before and after). With a
    `default`, an absent field counts as that value (a store created before the field)."""
    if default is None:
        rule = (
            f"has(self.{field}) == has(oldSelf.{field}) "
            f"&& (!has(self.{field}) || self.{field} == oldSelf.{field})"
        )
        changed = "changed, added or removed"
    else:
        rule = (
            f"(has(self.{field}) ? self.{field} : {default}) "
            f"== (has(oldSelf.{field}) ? oldSelf.{field} : {default})"
        )
        changed = "changed"
    return {
        "rule": rule,
        "fieldPath": f".{field}",
        "reason": "FieldValueForbidden",
        "message": f"{parent}.{field} cannot be {changed}: {why}",
    }


_QUANTITY = "must be a Kubernetes quantity such as 500m, 256Mi or 1Gi"
_OFFLINE_DIMS_MAP = "{" + ", ".join(f"'{k}': {v}" for k, v in OFFLINE_EMBEDDER_DIMS.items()) + "}"

# CEL rules (x-kubernetes-validations) by schema path. Each message names the field, since
# it is what `kubectl apply` prints. On a request every defaulted field is present, but the
# API server also checks each rule against the bare `default: {}` of its object, so rules
# guard defaulted fields with has().
_HISTORY_POSTGRES = "has(self.historyDb) && has(self.historyDb.postgres)"
_VECTORS_POSTGRES = "has(self.vectorStore) && has(self.vectorStore.postgres)"
_IN_POSTGRES = "spec.historyDb.postgres or spec.vectorStore.postgres"

RULES: dict[str, list[Schema]] = {
    "spec": [
        # Several replicas need the state (historyDb.postgres) and the vectors (managed,
        # external or postgres) shared: these two rules together allow exactly that.
        {
            "rule": "!has(self.historyDb) || !has(self.historyDb.sqlite) || !has(self.service) "
            "|| !has(self.service.replicas) || self.service.replicas <= 1",
            "fieldPath": ".service.replicas",
            "reason": "FieldValueForbidden",
            "message": "spec.service.replicas must be 1 with spec.historyDb.sqlite "
            "(one writer per SQLite file on a ReadWriteOnce volume); for more replicas the "
            "store needs spec.historyDb.postgres",
        },
        {
            "rule": "!has(self.vectorStore) || !has(self.vectorStore.embedded) "
            "|| !has(self.service) || !has(self.service.replicas) || self.service.replicas <= 1",
            "fieldPath": ".service.replicas",
            "reason": "FieldValueForbidden",
            "message": "spec.service.replicas must be 1 with spec.vectorStore.embedded: "
            "the engine holds a single-process lock on its files; for more replicas the store "
            "needs spec.vectorStore.postgres, managed or external (and spec.historyDb.postgres)",
        },
        {
            "rule": "!has(self.vectorStore) || !has(self.vectorStore.embedded) "
            "|| !has(self.historyDb) || has(self.historyDb.sqlite)",
            "fieldPath": ".historyDb.sqlite",
            "reason": "FieldValueRequired",
            "message": "spec.historyDb.sqlite is required with spec.vectorStore.embedded: the "
            "engine's files live on its volume",
        },
        {
            "rule": "!has(self.vectorStore) || !has(self.vectorStore.postgres) "
            f"|| has(self.vectorStore.postgres.dsnSecretRef) || ({_HISTORY_POSTGRES})",
            "fieldPath": ".vectorStore.postgres.dsnSecretRef",
            "reason": "FieldValueRequired",
            "message": "spec.vectorStore.postgres.dsnSecretRef is required unless "
            "spec.historyDb.postgres is set: unset, the vectors live in the history's database",
        },
        # The service's backups are files on a volume; a database has its own tools.
        {
            "rule": f"!has(self.backup) || !(({_HISTORY_POSTGRES}) || ({_VECTORS_POSTGRES}))",
            "fieldPath": ".backup",
            "reason": "FieldValueForbidden",
            "message": f"spec.backup must not be set with {_IN_POSTGRES}: the memories are in "
            "PostgreSQL, so back the database up with its own tools (pg_dump, CloudNativePG "
            "backups)",
        },
        {
            "rule": f"!has(self.restore) || !(({_HISTORY_POSTGRES}) || ({_VECTORS_POSTGRES}))",
            "fieldPath": ".restore",
            "reason": "FieldValueForbidden",
            "message": f"spec.restore must not be set with {_IN_POSTGRES}: a backup restores "
            "into the service's data volume, not a database; restore the database with its "
            "own tools (pg_restore, a CloudNativePG recovery)",
        },
        # Transition rule (updates only): a store is restored into its empty data once, at
        # creation.
        _unchanged(
            "spec",
            "restore",
            why="a store is restored from a backup only when it is created; create a new "
            "MemoryStore with spec.restore.fromBackup to restore one",
        ),
    ],
    "spec.vectorStore": [
        {
            "rule": "(has(self.managed) ? 1 : 0) + (has(self.external) ? 1 : 0) "
            "+ (has(self.embedded) ? 1 : 0) + (has(self.postgres) ? 1 : 0) == 1",
            "message": "exactly one of spec.vectorStore.managed, spec.vectorStore.external, "
            "spec.vectorStore.embedded or spec.vectorStore.postgres must be set",
        },
        {
            # Transition rule (updates only): the memories stay where they were written.
            "rule": "has(self.managed) == has(oldSelf.managed) "
            "&& has(self.external) == has(oldSelf.external) "
            "&& has(self.embedded) == has(oldSelf.embedded) "
            "&& has(self.postgres) == has(oldSelf.postgres)",
            "reason": "FieldValueForbidden",
            "message": "the tier of spec.vectorStore (managed, external, embedded or postgres) "
            "cannot be changed: the stored memories stay where they were written. "
            + _migrate("the other tier"),
        },
    ],
    "spec.vectorStore.managed": [
        {
            "rule": "!has(self.replicationFactor) || !has(self.replicas) "
            "|| self.replicationFactor <= self.replicas",
            "fieldPath": ".replicationFactor",
            "reason": "FieldValueInvalid",
            "message": "spec.vectorStore.managed.replicationFactor must be at most "
            "spec.vectorStore.managed.replicas: each copy of a shard lives on a different "
            "Qdrant replica",
        },
        *(
            _unchanged(
                "spec.vectorStore.managed",
                field,
                default=1,
                why=f"the collection was created with {what}; create a new MemoryStore "
                f"to change it (see README: {MIGRATION_SECTION})",
            )
            for field, what in (
                ("shards", "this many shards"),
                ("replicationFactor", "this replication factor"),
            )
        ),
    ],
    "spec.vectorStore.collection": [
        _immutable("spec.vectorStore.collection", "the stored memories live in this collection")
    ],
    "spec.vectorStore.managed.storage": [
        _immutable(
            "spec.vectorStore.managed.storage",
            "a StatefulSet's volume claim template cannot change (resize the "
            "PersistentVolumeClaims directly)",
        )
    ],
    "spec.vectorStore.external.url": [
        {
            "rule": "self.startsWith('http://') || self.startsWith('https://')",
            "message": "spec.vectorStore.external.url must start with http:// or https://",
        }
    ],
    "spec.historyDb": [
        {
            "rule": "has(self.sqlite) != has(self.postgres)",
            "message": "exactly one of spec.historyDb.sqlite or spec.historyDb.postgres "
            "must be set",
        },
        {
            # Transition rule (updates only): the service does not move its state from one
            # to the other; switching would start from an empty history and session journal.
            "rule": "has(self.sqlite) == has(oldSelf.sqlite) "
            "&& has(self.postgres) == has(oldSelf.postgres)",
            "reason": "FieldValueForbidden",
            "message": "the tier of spec.historyDb (sqlite or postgres) cannot be changed: the "
            "change history, session journal and idempotency records stay where they were "
            "written. " + _migrate("the other tier"),
        },
    ],
    "spec.embedder": [
        {
            "rule": f"!has(self.provider) || !(self.provider in {_cel_list(_REMOTE)}) "
            "|| (has(self.model) && self.model != '')",
            "fieldPath": ".model",
            "reason": "FieldValueRequired",
            "message": f"spec.embedder.model is required for remote providers "
            f"({', '.join(_REMOTE)})",
        },
        {
            "rule": f"!has(self.provider) || !(self.provider in {_cel_list(_REMOTE)}) "
            "|| has(self.dimensions)",
            "fieldPath": ".dimensions",
            "reason": "FieldValueRequired",
            "message": f"spec.embedder.dimensions is required for remote providers "
            f"({', '.join(_REMOTE)})",
        },
        {
            "rule": f"!has(self.provider) || !(self.provider in {_cel_list(_OFFLINE)}) "
            "|| (!has(self.model) && !has(self.baseUrl))",
            "reason": "FieldValueForbidden",
            "message": f"spec.embedder.model and spec.embedder.baseUrl must not be set for "
            f"offline providers ({', '.join(_OFFLINE)}): their model ships in the package",
        },
        {
            "rule": f"!has(self.dimensions) || !has(self.provider) "
            f"|| !(self.provider in {_OFFLINE_DIMS_MAP}) "
            f"|| {_OFFLINE_DIMS_MAP}[self.provider] == self.dimensions",
            "fieldPath": ".dimensions",
            "message": "spec.embedder.dimensions is fixed for offline providers ("
            + ", ".join(f"{k}: {v}" for k, v in OFFLINE_EMBEDDER_DIMS.items())
            + "); leave it unset",
        },
        # Transition rules (updates only): the stored vectors were made by this model.
        *(
            _unchanged(
                "spec.embedder",
                field,
                why=f"the stored vectors were made {how}. " + _migrate(f"the new {field}"),
            )
            for field, how in (
                ("model", "by this model"),
                ("baseUrl", "by the model behind this endpoint"),
                ("dimensions", "with this size"),
            )
        ),
    ],
    "spec.embedder.provider": [
        {
            "rule": "self == oldSelf",
            "message": "spec.embedder.provider is immutable: the stored vectors were made by "
            f"this provider. {_migrate('the new provider')}",
        }
    ],
    "spec.vectorStore.managed.storage.size": [
        {
            "rule": "isQuantity(self)",
            "message": f"spec.vectorStore.managed.storage.size {_QUANTITY}",
        }
    ],
    "spec.historyDb.sqlite.storage.size": [
        {"rule": "isQuantity(self)", "message": f"spec.historyDb.sqlite.storage.size {_QUANTITY}"}
    ],
    "spec.serviceKey.rotation": [
        {
            "rule": "self >= oldSelf",
            "message": "spec.serviceKey.rotation can only grow: to rotate the service key, "
            "set it above status.serviceKey.generation",
        }
    ],
    "spec.tls": [
        {
            "rule": "!has(self.renewBeforeDays) || !has(self.durationDays) "
            "|| self.renewBeforeDays < self.durationDays",
            "fieldPath": ".renewBeforeDays",
            "reason": "FieldValueInvalid",
            "message": "spec.tls.renewBeforeDays must be less than spec.tls.durationDays",
        }
    ],
}


def _toleration_rules(pods: str) -> list[Schema]:
    """What the API server checks in a pod's toleration and a schema cannot say."""
    field = f"{pods}.tolerations[]"
    return [
        {
            "rule": "(has(self.key) && self.key != '') "
            "|| (has(self.operator) && self.operator == 'Exists')",
            "fieldPath": ".operator",
            "reason": "FieldValueInvalid",
            "message": f"{field}.operator must be Exists when key is empty (a toleration "
            "without a key tolerates every taint)",
        },
        {
            "rule": "!has(self.operator) || self.operator != 'Exists' "
            "|| !has(self.value) || self.value == ''",
            "fieldPath": ".value",
            "reason": "FieldValueForbidden",
            "message": f"{field}.value must be empty when operator is Exists",
        },
        {
            "rule": "!has(self.tolerationSeconds) "
            "|| (has(self.effect) && self.effect == 'NoExecute')",
            "fieldPath": ".tolerationSeconds",
            "reason": "FieldValueForbidden",
            "message": f"{field}.tolerationSeconds is only allowed with effect NoExecute",
        },
    ]


for _pods in ("spec.service", "spec.vectorStore.managed"):
    RULES[f"{_pods}.tolerations[]"] = _toleration_rules(_pods)

# The quantity syntax as a pattern (what controller-gen emits for resource.Quantity): a CEL
# isQuantity() on every value of an unbounded map exceeds the API server's cost budget.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

# Schema keywords added at a path: Kubernetes list semantics for conditions (a map keyed by
# type, so server-side apply of status merges one condition without replacing the others),
# and the quantity syntax for resource values.
EXTENSIONS: dict[str, Schema] = {
    "status.conditions": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
}
for _owner in ("spec.vectorStore.managed", "spec.service"):
    for _kind in ("requests", "limits"):
        EXTENSIONS[f"{_owner}.resources.{_kind}.*"] = {"pattern": QUANTITY_PATTERN}

PRINTER_COLUMNS: list[Schema] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Ready", "type": "string", "jsonPath": READY_JSONPATH},
    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
    {"name": "Scope", "type": "string", "jsonPath": ".spec.scope"},
    {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


class _WithFactoryDefaults(GenerateJsonSchema):
    """Also emit defaults made by `default_factory`, so the API server applies them too.

    A model default is dumped with `exclude_defaults`: `{"managed": {}}` rather than every
    nested value, because the server fills nested defaults in from their own schemas.
    """

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is None or schema.get("default_factory_takes_data"):
            return super().get_default_value(schema)
        value = factory()
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return value if value is not None else NoDefault


def pydantic_schema(model: type[BaseModel]) -> Schema:
    """The model's JSON Schema as pydantic makes it (validation mode, camelCase)."""
    return model.model_json_schema(
        by_alias=True, mode="validation", schema_generator=_WithFactoryDefaults
    )


def _resolve(node: Schema, defs: dict[str, Schema], path: str) -> Schema:
    """Inline `$ref` and Optional's `anyOf: [X, null]`; the referring node's keys win."""
    while True:
        if "$ref" in node:
            target = dict(defs[node["$ref"].rsplit("/", 1)[-1]])
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **rest}
        elif "anyOf" in node or "allOf" in node or "oneOf" in node:
            key = next(k for k in ("anyOf", "allOf", "oneOf") if k in node)
            variants = [v for v in node[key] if v != {"type": "null"}]
            if len(variants) != 1:
                raise ValueError(f"{path}: a union of {len(variants)} types has no structural form")
            rest = {k: v for k, v in node.items() if k != key}
            if rest.get("default", ...) is None:
                del rest["default"]  # Optional's None: absent, not null
            node = {**_resolve(variants[0], defs, path), **rest}
        else:
            return node


def _structural(node: Schema, defs: dict[str, Schema], path: str) -> Schema:
    """One pydantic JSON Schema node as a Kubernetes structural schema node."""
    node = _resolve(node, defs, path)
    out: Schema = {}
    if node.get("description"):
        out["description"] = node["description"]
    for key, value in node.items():
        if key in _DROPPED or key == "description":
            continue
        if key == "properties":
            props: Schema = {}
            for name, sub in value.items():
                sub_path = f"{path}.{name}"
                converted = _structural(sub, defs, sub_path)
                if not converted.get("description"):
                    raise ValueError(
                        f"{sub_path} has no description: give the pydantic field a "
                        "description (`kubectl explain` and the docs are generated from it)"
                    )
                props[name] = converted
            out["properties"] = props
        elif key == "additionalProperties":
            if value is False:
                continue  # pruning and strict field validation refuse unknown fields
            if "properties" in node:
                raise ValueError(f"{path}: properties and additionalProperties together")
            out["additionalProperties"] = _structural(value, defs, f"{path}.*")
        elif key == "items":
            out["items"] = _structural(value, defs, f"{path}[]")
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            # JSON Schema 2020-12 bound → OpenAPI v3.0 bound plus a flag.
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key in _KEPT:
            out[key] = copy.deepcopy(value)
        else:
            raise ValueError(f"{path}: JSON Schema keyword {key!r} has no structural form")
    if "type" not in out:
        raise ValueError(f"{path}: no type (a structural schema needs one on every node)")
    return out


_ORDER = (
    "description",
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
)


def structural_schema(model: type[BaseModel], path: str) -> Schema:
    """A model as a structural schema; `path` (e.g. `spec`) prefixes the paths in errors."""
    json_schema = pydantic_schema(model)
    return _structural(json_schema, json_schema.get("$defs", {}), path)


def _ordered(node: Schema) -> Schema:
    """Keys in one fixed order, so the checked-in YAML reads the same way at every level."""
    out = {key: node[key] for key in _ORDER if key in node}
    out.update({key: value for key, value in node.items() if key not in out})
    if "properties" in out:
        out["properties"] = {name: _ordered(sub) for name, sub in out["properties"].items()}
    for key in ("additionalProperties", "items"):
        if isinstance(out.get(key), dict):
            out[key] = _ordered(out[key])
    return out


def _node(schema: Schema, path: str) -> Schema:
    """The node at a dotted schema path (`*` is a map's value schema, `name[]` the item
    schema of the list `name`)."""
    node = schema
    for part in path.split(".")[1:]:
        if part == "*":
            node = node["additionalProperties"]
        else:
            try:
                node = node["properties"][part.removesuffix("[]")]
                if part.endswith("[]"):
                    node = node["items"]
            except KeyError:
                raise ValueError(f"{path}: no such field in the spec model") from None
    return node


# The MemoryStoreBackup's rules and columns.
BACKUP_RULES: dict[str, list[Schema]] = {
    "spec.store": [
        {
            "rule": "self == oldSelf",
            "message": "spec.store is immutable: a backup belongs to the store it was taken "
            "of; create a new MemoryStoreBackup to back up another store",
        }
    ],
}
BACKUP_PRINTER_COLUMNS: list[Schema] = [
    {"name": "Store", "type": "string", "jsonPath": ".spec.store"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Memories", "type": "integer", "jsonPath": ".status.memories"},
    {"name": "Size", "type": "integer", "jsonPath": ".status.sizeBytes"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def openapi_schema() -> Schema:
    """The MemoryStore's `openAPIV3Schema`: spec and status from the models, plus CEL rules."""
    spec = structural_schema(MemoryStoreSpec, "spec")
    # Default the whole spec, so `spec: {}` or no spec at all still gets every default and
    # the rules on spec can rely on them.
    spec["default"] = {}
    return _object_schema(
        spec,
        structural_schema(MemoryStoreStatus, "status"),
        RULES,
        EXTENSIONS,
        f"A {KIND} is one tenant's long-term memory for its AgentScope agents (mem0 over "
        "Qdrant); the operator provisions it and reports its state in status.",
    )


def backup_openapi_schema() -> Schema:
    """The MemoryStoreBackup's `openAPIV3Schema`."""
    spec = structural_schema(MemoryStoreBackupSpec, "spec")
    schema = _object_schema(
        spec,
        structural_schema(MemoryStoreBackupStatus, "status"),
        BACKUP_RULES,
        {},
        f"A {BACKUP_KIND} is one backup of a {KIND} (spec.store) onto the store's backup "
        "volume (its spec.backup.volume), taken by the memory service; status says where "
        "the files are and what they hold. It is not owned by the store, so it outlives it "
        "and a new store can restore from it (spec.restore.fromBackup).",
    )
    return _ordered({**schema, "required": ["spec"]})


def _object_schema(
    spec: Schema,
    status: Schema,
    rules: dict[str, list[Schema]],
    extensions: dict[str, Schema],
    description: str,
) -> Schema:
    roots = {"spec": spec, "status": status}
    for path, path_rules in rules.items():
        _node(roots[path.split(".")[0]], path).setdefault("x-kubernetes-validations", []).extend(
            copy.deepcopy(path_rules)
        )
    for path, extension in extensions.items():
        _node(roots[path.split(".")[0]], path).update(copy.deepcopy(extension))
    return _ordered(
        {
            "description": description,
            "type": "object",
            "properties": {
                "apiVersion": {
                    "description": "APIVersion defines the versioned schema of this representation "
                    "of an object.",
                    "type": "string",
                },
                "kind": {
                    "description": "Kind is a string value representing the REST resource this "
                    "object represents.",
                    "type": "string",
                },
                "metadata": {"type": "object"},
                "spec": spec,
                "status": status,
            },
        }
    )


def _crd(
    plural: str,
    kind: str,
    singular: str,
    short_names: list[str],
    columns: list[Schema],
    schema: Schema,
) -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": list(short_names),
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": copy.deepcopy(columns),
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def render_crd() -> Schema:
    """The MemoryStore CustomResourceDefinition as a dict (pure: same model, same result)."""
    return _crd(PLURAL, KIND, SINGULAR, SHORT_NAMES, PRINTER_COLUMNS, openapi_schema())


def render_backup_crd() -> Schema:
    """The MemoryStoreBackup CustomResourceDefinition as a dict (pure)."""
    return _crd(
        BACKUP_PLURAL,
        BACKUP_KIND,
        BACKUP_SINGULAR,
        BACKUP_SHORT_NAMES,
        BACKUP_PRINTER_COLUMNS,
        backup_openapi_schema(),
    )


def render_yaml(render: Any = render_crd) -> str:
    """A checked-in file's exact text: a header saying how it is made, then the CRD."""
    header = (
        "# GENERATED from memorystore/spec.py by memorystore/operator/crd.py; do not edit.\n"
        f"# Regenerate: {REGENERATE_COMMAND}\n"
    )
    body = yaml.safe_dump(render(), sort_keys=False, allow_unicode=True, width=100)
    return header + body


def outputs() -> dict[Path, str]:
    """Every checked-in CRD file and its fresh text."""
    return {CRD_PATH: render_yaml(render_crd), BACKUP_CRD_PATH: render_yaml(render_backup_crd)}


def main(argv: list[str] | None = None) -> int:
    """Print the CRDs, write them to crds/ (`--write`), or fail when a file is stale."""
    parser = argparse.ArgumentParser(prog="python -m memorystore.operator.crd", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write the CRD files in crds/")
    group.add_argument("--check", action="store_true", help="exit 1 if a checked-in is stale")
    args = parser.parse_args(argv)
    files = outputs()
    if args.write:
        for path, text in files.items():
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}", file=sys.stderr)
    elif args.check:
        stale = False
        for path, text in files.items():
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current != text:
                print(f"{path} is stale; regenerate: {REGENERATE_COMMAND}", file=sys.stderr)
                stale = True
        return 1 if stale else 0
    else:
        sys.stdout.write("---\n".join(files.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
