"""Moves every stored MemoryStore and MemoryStoreBackup onto the storage version (`VERSION`).

The API server keeps each object in etcd under the version it was last written with. After an
upgrade that makes `VERSION` the storage version, objects written before it stay stored under
the old one until something writes them again, and `status.storedVersions` of the CRD keeps
naming the old version: a later release could not stop serving it. So at start-up the
operator rewrites each object of the namespaces it watches with an empty merge patch (the
API server re-encodes it under the storage version; nothing in it changes, so no handler
runs), as kube-storage-version-migrator does. Only an operator that watches every namespace
has seen every object, so only it then sets `storedVersions` to `[VERSION]`; a namespaced
install leaves the CRD's record as it is (docs/operations/upgrades.md).

Nothing happens while the CRD in the cluster does not yet store `VERSION` (an operator
started before its chart's CRDs were applied), nor when `storedVersions` is already
`[VERSION]`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lightkube import ALL_NS, ApiError, AsyncClient
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.types import PatchType

from memorystore.operator.resources import MemoryStoreBackupResource, MemoryStoreResource
from memorystore.spec import BACKUP_PLURAL, GROUP, PLURAL, VERSION

__all__ = ["RETRY_SECONDS", "Migrated", "keep_migrating", "migrate"]

log = logging.getLogger(__name__)

RESOURCES: tuple[tuple[str, Any], ...] = (
    (f"{PLURAL}.{GROUP}", MemoryStoreResource),
    (f"{BACKUP_PLURAL}.{GROUP}", MemoryStoreBackupResource),
)
RETRY_SECONDS = (5.0, 30.0, 120.0, 300.0)


@dataclass(frozen=True)
class Migrated:
    """What one pass did, per CRD name: objects rewritten, and whether the CRD's record now
    names `VERSION` alone (None: the CRD does not store `VERSION` yet, so nothing was done)."""

    rewritten: dict[str, int]
    recorded: dict[str, bool | None]


async def migrate(client: AsyncClient, namespaces: Sequence[str] | None) -> Migrated:
    """One pass over both CRDs; `namespaces` None means every namespace (and the CRD's
    record is then updated). Raises ApiError when the API server refuses a step."""
    rewritten: dict[str, int] = {}
    recorded: dict[str, bool | None] = {}
    for crd_name, resource in RESOURCES:
        crd = await client.get(CustomResourceDefinition, crd_name)
        storage = next((v.name for v in crd.spec.versions if v.storage), None)
        stored = list((crd.status.storedVersions if crd.status else None) or [])
        if storage != VERSION:
            rewritten[crd_name], recorded[crd_name] = 0, None
            continue
        if stored == [VERSION]:
            rewritten[crd_name], recorded[crd_name] = 0, True
            continue
        count = 0
        for namespace in namespaces or [ALL_NS]:
            async for obj in client.list(resource, namespace=namespace):
                count += await _rewrite(client, resource, obj.metadata.namespace, obj.metadata.name)
        rewritten[crd_name] = count
        if namespaces is None:
            await client.patch(
                CustomResourceDefinition.Status,
                crd_name,
                {"status": {"storedVersions": [VERSION]}},
                patch_type=PatchType.MERGE,
            )
        recorded[crd_name] = namespaces is None
        log.info(
            "%s: %d object(s) rewritten under %s; storedVersions updated: %s",
            crd_name,
            count,
            VERSION,
            namespaces is None,
        )
    return Migrated(rewritten, recorded)


async def _rewrite(client: AsyncClient, resource: Any, namespace: str, name: str) -> int:
    try:
        await client.patch(resource, name, {}, namespace=namespace, patch_type=PatchType.MERGE)
    except ApiError as exc:
        if exc.status.code == 404:  # deleted since the list: nothing left to move
            return 0
        raise
    return 1


async def keep_migrating(client: AsyncClient, namespaces: Sequence[str] | None) -> None:
    """`migrate` until one pass succeeds, backing off on any failure (kept in the log: an
    RBAC gap or an API server restart must not stop the operator; the connection's own
    errors are httpx's, which this module does not otherwise need to know)."""
    attempt = 0
    while True:
        try:
            await migrate(client, namespaces)
            return
        except Exception as exc:
            pause = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
            reason = exc.status.message if isinstance(exc, ApiError) else type(exc).__name__
            log.warning("storage version migration failed (%s); retrying in %.0f s", reason, pause)
            attempt += 1
            await asyncio.sleep(pause)
