"""What JSON Schema cannot say about a MemoryStore: the CEL rules (x-kubernetes-validations)
and schema extensions, by schema path.

Each rule is a check the API server makes on `kubectl apply`, so a mistake is refused at once
with a message naming the field, instead of surfacing later as a failed reconcile. Transition
rules (on `oldSelf`) keep what cannot change once data exists: a tier, the embedding model,
the collection's shape.
"""

from __future__ import annotations

from typing import Any

from memorystore.operator.crd_schema import Schema
from memorystore.spec import OFFLINE_EMBEDDER_DIMS, EmbedderProvider

__all__ = [
    "BACKUP_RULES",
    "EXTENSIONS",
    "MIGRATION_PAGE",
    "MIGRATION_TITLE",
    "QUANTITY_PATTERN",
    "RULES",
]


_OFFLINE = list(OFFLINE_EMBEDDER_DIMS)
_REMOTE = [str(p) for p in EmbedderProvider if str(p) not in OFFLINE_EMBEDDER_DIMS]


def _cel_list(values: list[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _immutable(path: str, why: str) -> Schema:
    return {
        "rule": "self == oldSelf",
        "message": f"{path} is immutable: {why}; create a new MemoryStore to change it",
    }


# Where an immutable choice says how to move the memories anyway: a page of the docs site,
# by its path in the repository, and that page's title.
MIGRATION_PAGE = "docs/operations/changing-tiers.md"
MIGRATION_TITLE = "Changing tiers or the embedding model"


def _migrate(what: str) -> str:
    return (
        f"To change it, create a new MemoryStore with {what} and copy the memories across "
        "(for now: read them with the mem0 client's get_all and add them to the new store "
        f"with infer=False; see {MIGRATION_PAGE})"
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
                f"to change it (see {MIGRATION_PAGE})",
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
    "spec.vectorStore.external": [
        {
            "rule": "!has(self.caSecretRef) || self.url.startsWith('https://')",
            "fieldPath": ".caSecretRef",
            "message": "spec.vectorStore.external.caSecretRef needs an https:// url: over "
            "http:// the CA would verify nothing",
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
