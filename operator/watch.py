"""Follow the stores' children, so the operator reacts in seconds rather than on its timer.

One watch per child kind (server-side filtered by the operator's managed-by label) keeps the
ledger up to date and asks for the owning store's reconcile when something it cares about
happens: a child deleted or changed by someone else (drift, repaired at once), or a
workload's or volume claim's status moved (status follows, e.g. Ready within seconds of the
last pod). The operator's own writes come back as events too; those are recognised
(`Ledger.ours`) and ignored, so a reconcile never triggers itself.

Secrets are not watched: that would need list and watch on every Secret of the namespace.
The one Secret child that is applied (the client Secret) is read on each reconcile instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from lightkube import ALL_NS, AsyncClient
from lightkube.core.client import LabelSelector
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.core_v1 import ConfigMap, PersistentVolumeClaim, Service
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import OnErrorAction, OnErrorResult

from memorystore.operator import ledger, names

log = logging.getLogger("memorystore.operator")

MANAGED: LabelSelector = {"app.kubernetes.io/managed-by": "memorystore-operator"}
WATCHED = (
    ConfigMap,
    Service,
    PersistentVolumeClaim,
    NetworkPolicy,
    PodDisruptionBudget,
    Deployment,
    StatefulSet,
)
Schedule = Callable[[str, str], None]  # (namespace, store) -> ask for its reconcile


def status_summary(kind: str, status: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """The part of a child's status the store's status depends on (None: none of it)."""
    status = status or {}
    if kind in ("Deployment", "StatefulSet"):
        fields = ("observedGeneration", "replicas", "readyReplicas", "updatedReplicas")
        return tuple(status.get(f) for f in fields)
    if kind == "PersistentVolumeClaim":
        return (status.get("phase"),)
    return None


class ChildEvents:
    """Turns watch events into ledger updates and reconcile requests (pure but for `schedule`)."""

    def __init__(self, book: ledger.Ledger, schedule: Schedule) -> None:
        self.book = book
        self.schedule = schedule
        self._status: dict[ledger.Key, tuple[Any, ...] | None] = {}

    def handle(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        kind, namespace, name = obj["kind"], meta.get("namespace", ""), meta.get("name", "")
        store = (meta.get("labels") or {}).get(names.STORE_LABEL)
        key = (kind, namespace, name)
        if event == "DELETED":
            self.book.saw(key, None)
            self._status.pop(key, None)
            if store:
                self.schedule(namespace, store)
            return
        fp = ledger.fingerprint(meta)
        summary = status_summary(kind, obj.get("status"))
        moved = key not in self._status or self._status[key] != summary
        self._status[key] = summary
        foreign = not self.book.ours(key, fp)
        self.book.saw(key, fp)
        if store and (foreign or (moved and summary is not None)):
            self.schedule(namespace, store)


async def follow(
    client: AsyncClient, resource: Any, namespaces: list[str] | None, events: ChildEvents
) -> None:
    """Watch one child kind for ever (restarting after errors, with a growing pause)."""
    kind = resource.__name__

    def on_error(exc: Exception, count: int) -> OnErrorResult:
        events.book.forget(kind)  # events may have been missed: re-apply rather than trust
        log.warning("watch of %s failed (%s); restarting", kind, exc)
        return OnErrorResult(OnErrorAction.RETRY, sleep=min(30.0, float(count)))

    async def one(namespace: str) -> None:
        stream = client.watch(resource, namespace=namespace, labels=MANAGED, on_error=on_error)
        async for event, obj in stream:
            events.handle(event, obj.to_dict())

    events.book.watched.add(kind)
    try:
        await asyncio.gather(*(one(ns) for ns in namespaces or [ALL_NS]))
    finally:
        events.book.watched.discard(kind)
        events.book.forget(kind)


async def follow_children(
    client: AsyncClient, namespaces: list[str] | None, events: ChildEvents
) -> None:
    await asyncio.gather(*(follow(client, r, namespaces, events) for r in WATCHED))
