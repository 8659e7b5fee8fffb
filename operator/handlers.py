"""kopf handlers: thin. They only register with kopf and hand each event to the parts that
act on it: the reconciler (`reconcile.py`), the resync loop (`resync.py`), the children watch
(`watch.py`) and the backup runner (`backups.py`), all made once at start-up from the
operator's settings (`settings.py`, read from the environment then and only then), and
the storage version migration (`storage_version.py`), once per start.

No kopf timer and no deletion handler: kopf puts a finalizer on every resource with a timer,
and a finalizer blocks namespace deletion whenever the operator is down. MemoryStores carry
no finalizer at all; deletion is garbage collection, with data-bearing children owned only
under `deletionPolicy: Delete`. MemoryStoreBackups likewise: kopf handles them on create
and resume only (`on_backup`); scheduled ones are created and pruned by the store's
reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

import kopf
from lightkube import AsyncClient

from memorystore.operator import apply, storage_version, watch
from memorystore.operator.backups import BackupRunner
from memorystore.operator.reconcile import Reconciler
from memorystore.operator.resync import resync
from memorystore.operator.settings import OperatorSettings, SettingsError
from memorystore.spec import BACKUP_PLURAL, GROUP, PLURAL, VERSION

__all__ = ["configure", "on_backup", "on_change", "stop"]


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Our settings from the environment (a bad value stops the operator, naming the
    variable), kopf's settings, then the long-lived parts, kept in kopf's memo."""
    try:
        config = OperatorSettings.from_env(os.environ)
    except SettingsError as exc:
        raise kopf.PermanentError(f"invalid operator settings: {exc}") from None
    # Our own annotation names, not kopf's defaults (no finalizer is ever needed).
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING
    client = AsyncClient(field_manager=apply.FIELD_MANAGER)
    memo.reconciler = reconciler = Reconciler(client, config)
    memo.backups = BackupRunner(client, config)
    namespaces = memo.get("namespaces")
    events = watch.ChildEvents(reconciler.book, reconciler.request)
    memo.background = [
        asyncio.create_task(resync(reconciler, namespaces)),
        asyncio.create_task(watch.follow_children(client, namespaces, events)),
        asyncio.create_task(storage_version.keep_migrating(client, namespaces)),
    ]


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    """Stop the resync loop and the children watch, and wait for them to end."""
    for task in memo.background:
        task.cancel()
    for task in memo.background:
        with contextlib.suppress(asyncio.CancelledError):
            await task


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
@kopf.on.resume(GROUP, VERSION, PLURAL)
async def on_change(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Reconcile the live object (not kopf's copy of the event) and write its status; kopf
    retries when this raises."""
    await memo.reconciler.run(body["metadata"]["namespace"], body["metadata"]["name"])


@kopf.on.create(GROUP, VERSION, BACKUP_PLURAL)
@kopf.on.resume(GROUP, VERSION, BACKUP_PLURAL)
async def on_backup(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Take a MemoryStoreBackup (`BackupRunner.run`): from the live object, once; a finished
    one is left alone. Its outcome is its status, so this never raises for it."""
    meta = body["metadata"]
    await memo.backups.run(meta["namespace"], meta["name"])
