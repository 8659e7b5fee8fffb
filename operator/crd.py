"""The CustomResourceDefinitions (MemoryStore, MemoryStoreBackup), generated from the
pydantic models.

The models (`memorystore/spec/`) are the one source of truth: this module assembles each CRD
from their structural schemas (`crd_schema.py`), what JSON Schema cannot say (the CEL rules:
`crd_rules.py`), the printer columns and the status subresource. The checked-in
`crds/memorystore.yaml` and `crds/memorystorebackup.yaml` are its output; a unit test fails
when they differ.

    PYTHONSAFEPATH=1 .venv/bin/python -m memorystore.operator.crd --write
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from memorystore.operator.crd_rules import BACKUP_RULES, EXTENSIONS, RULES
from memorystore.operator.crd_schema import Schema, node_at, ordered, structural_schema
from memorystore.spec import (
    BACKUP_KIND,
    BACKUP_PLURAL,
    BACKUP_SHORT_NAMES,
    BACKUP_SINGULAR,
    DEPRECATED_VERSIONS,
    GROUP,
    KIND,
    PLURAL,
    SERVED_VERSIONS,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    MemoryStoreBackupSpec,
    MemoryStoreBackupStatus,
    MemoryStoreSpec,
    MemoryStoreStatus,
)

__all__ = [
    "API_VERSION",
    "BACKUP_CRD_NAME",
    "BACKUP_CRD_PATH",
    "BACKUP_PRINTER_COLUMNS",
    "CRD_NAME",
    "CRD_PATH",
    "PRINTER_COLUMNS",
    "REGENERATE_COMMAND",
    "backup_openapi_schema",
    "main",
    "openapi_schema",
    "outputs",
    "render_backup_crd",
    "render_crd",
    "render_yaml",
]

CRD_NAME = f"{PLURAL}.{GROUP}"
BACKUP_CRD_NAME = f"{BACKUP_PLURAL}.{GROUP}"
API_VERSION = f"{GROUP}/{VERSION}"
CRD_DIR = Path(__file__).resolve().parent.parent / "crds"
CRD_PATH = CRD_DIR / "memorystore.yaml"
BACKUP_CRD_PATH = CRD_DIR / "memorystorebackup.yaml"
REGENERATE_COMMAND = "PYTHONSAFEPATH=1 .venv/bin/python -m memorystore.operator.crd --write"
READY_JSONPATH = '.status.conditions[?(@.type=="Ready")].status'


PRINTER_COLUMNS: list[Schema] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Ready", "type": "string", "jsonPath": READY_JSONPATH},
    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
    {"name": "Scope", "type": "string", "jsonPath": ".spec.scope"},
    {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


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
    return ordered({**schema, "required": ["spec"]})


def _object_schema(
    spec: Schema,
    status: Schema,
    rules: dict[str, list[Schema]],
    extensions: dict[str, Schema],
    description: str,
) -> Schema:
    roots = {"spec": spec, "status": status}
    for path, path_rules in rules.items():
        node_at(roots[path.split(".")[0]], path).setdefault("x-kubernetes-validations", []).extend(
            copy.deepcopy(path_rules)
        )
    for path, extension in extensions.items():
        node_at(roots[path.split(".")[0]], path).update(copy.deepcopy(extension))
    return ordered(
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
            # One schema for every version: the API server converts by rewriting apiVersion.
            "conversion": {"strategy": "None"},
            "versions": [_version(name, kind, columns, schema) for name in SERVED_VERSIONS],
        },
    }


def _version(name: str, kind: str, columns: list[Schema], schema: Schema) -> Schema:
    entry: Schema = {"name": name, "served": True, "storage": name == VERSION}
    if name in DEPRECATED_VERSIONS:
        entry["deprecated"] = True
        entry["deprecationWarning"] = (
            f"{GROUP}/{name} {kind} is deprecated; use {GROUP}/{VERSION} (the same schema)"
        )
    entry["subresources"] = {"status": {}}
    entry["additionalPrinterColumns"] = copy.deepcopy(columns)
    entry["schema"] = {"openAPIV3Schema": copy.deepcopy(schema)}
    return entry


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
        "# GENERATED from memorystore/spec/ by memorystore/operator/crd.py; do not edit.\n"
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
