"""The two resources' API names (group, versions, kinds, plurals, short names): the CRDs, the
operator's clients and the docs all spell them from here.

`VERSION` is the one the operator, the plugin and the docs speak and the API server stores.
Every version in `SERVED_VERSIONS` has the same schema, so the API server converts between
them by rewriting `apiVersion` (conversion strategy None); a deprecated one answers with a
warning. The operator moves objects stored under an older version onto `VERSION`
(`operator/storage_version.py`).
"""

from __future__ import annotations

__all__ = [
    "BACKUP_KIND",
    "BACKUP_PLURAL",
    "BACKUP_SHORT_NAMES",
    "BACKUP_SINGULAR",
    "DEPRECATED_VERSIONS",
    "GROUP",
    "KIND",
    "PLURAL",
    "SERVED_VERSIONS",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
]


GROUP = "memorystore.dev"
VERSION = "v1beta1"
SERVED_VERSIONS = ("v1alpha1", "v1beta1")
DEPRECATED_VERSIONS = frozenset({"v1alpha1"})
KIND = "MemoryStore"
PLURAL = "memorystores"
SINGULAR = "memorystore"
SHORT_NAMES = ["mstore"]


BACKUP_KIND = "MemoryStoreBackup"
BACKUP_PLURAL = "memorystorebackups"
BACKUP_SINGULAR = "memorystorebackup"
BACKUP_SHORT_NAMES = ["msbackup"]
