"""The two resources' API names (group, version, kinds, plurals, short names): the CRDs, the
operator's clients and the docs all spell them from here.
"""

from __future__ import annotations

__all__ = [
    "BACKUP_KIND",
    "BACKUP_PLURAL",
    "BACKUP_SHORT_NAMES",
    "BACKUP_SINGULAR",
    "GROUP",
    "KIND",
    "PLURAL",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
]


GROUP = "memorystore.dev"
VERSION = "v1alpha1"
KIND = "MemoryStore"
PLURAL = "memorystores"
SINGULAR = "memorystore"
SHORT_NAMES = ["mstore"]


BACKUP_KIND = "MemoryStoreBackup"
BACKUP_PLURAL = "memorystorebackups"
BACKUP_SINGULAR = "memorystorebackup"
BACKUP_SHORT_NAMES = ["msbackup"]
