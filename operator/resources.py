"""The operator's own custom resources as lightkube classes, made once.

Every module that reads or writes a MemoryStore or a MemoryStoreBackup (the reconcile, the
resync, the store index, backups) uses these two classes, so they all name the same resource
(and its status subresource) the chart's RBAC grants.
"""

from __future__ import annotations

from typing import Any

from lightkube.generic_resource import create_namespaced_resource

from memorystore.spec import BACKUP_KIND, BACKUP_PLURAL, GROUP, KIND, PLURAL, VERSION

__all__ = ["MemoryStoreBackupResource", "MemoryStoreResource", "as_body"]

MemoryStoreResource = create_namespaced_resource(GROUP, VERSION, KIND, PLURAL)
MemoryStoreBackupResource = create_namespaced_resource(GROUP, VERSION, BACKUP_KIND, BACKUP_PLURAL)


def as_body(obj: Any) -> dict[str, Any]:
    """One of them as the plain dict the operator reads (lightkube leaves `to_dict` untyped)."""
    body: dict[str, Any] = obj.to_dict()
    return body
