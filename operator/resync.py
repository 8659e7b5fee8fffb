"""The resync loop: every store reconciled again on a timer, the safety net behind kopf's
events and the children watch.

It repairs drift an event never announced and moves what only time changes (a certificate's
renewal, a grace period's end, a scheduled backup's slot). No kopf timer does this: kopf
puts a finalizer on every resource with a timer, and a finalizer blocks namespace deletion
whenever the operator is down (`handlers.py`). An unchanged store costs reads only (the
ledger).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lightkube import ALL_NS
from lightkube.core.exceptions import ApiError

from memorystore.operator.metrics import forget_stores
from memorystore.operator.reconcile import Reconciler
from memorystore.operator.resources import MemoryStoreResource, as_body

__all__ = ["resync"]

log = logging.getLogger("memorystore.operator")


async def resync(reconciler: Reconciler, namespaces: list[str] | None) -> None:
    """Every `settings.resync_seconds`, reconcile every MemoryStore of `namespaces` (None:
    all), and refresh the store index from the same lists."""
    client = reconciler.client
    while True:
        await asyncio.sleep(reconciler.settings.resync_seconds)
        for namespace in namespaces or [ALL_NS]:
            try:
                stores = [
                    as_body(s) async for s in client.list(MemoryStoreResource, namespace=namespace)
                ]
            except ApiError as exc:
                log.warning(
                    "resync: cannot list MemoryStores in %s: %s", namespace, exc.status.message
                )
                continue
            by_namespace: dict[str, list[dict[str, Any]]] = {}
            for body in stores:
                by_namespace.setdefault(body["metadata"]["namespace"], []).append(body)
            forget_stores(
                None if namespace == ALL_NS else namespace,
                ((b["metadata"]["namespace"], b["metadata"]["name"]) for b in stores),
            )
            listed = reconciler.index.namespaces() if namespace == ALL_NS else {namespace}
            for ns in listed | set(by_namespace):
                reconciler.index.replace(ns, by_namespace.get(ns, []))
            await asyncio.gather(
                *(
                    reconciler.run_logged(b["metadata"]["namespace"], b["metadata"]["name"])
                    for b in stores
                )
            )
