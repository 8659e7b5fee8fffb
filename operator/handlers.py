"""kopf handlers: thin. Parse the spec, build the desired children (pure), apply them,
observe, and return the status to write.

kopf reacts to create / update / resume. Drift repair and status refresh run in our own
resync loop instead of a kopf timer: kopf puts a finalizer on every resource with a timer,
and a finalizer blocks namespace deletion whenever the operator is down. With no timer and
no deletion handler, MemoryStores carry no finalizer at all; deletion is garbage
collection, with data-bearing children owned only under `deletionPolicy: Delete`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import logging
import os
from dataclasses import replace
from typing import Any

import kopf
from lightkube import ALL_NS, AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event
from lightkube.types import PatchType
from pydantic import ValidationError

from memorystore.config import format_validation_error
from memorystore.operator import apply, isolation, names
from memorystore.operator.builders import desired_children, expected_workloads
from memorystore.operator.builders.common import owns_data
from memorystore.operator.builders.model import Images, Keys, Owner
from memorystore.operator.builders.validate import SpecError, check_spec
from memorystore.operator.keys import Change, ServiceKeyState, describe
from memorystore.operator.metrics import DURATION, KEY_CHANGES, RECONCILES
from memorystore.operator.status import AGENT_PODS_ISOLATED, Observed, Workload, compute_status
from memorystore.spec import (
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    MemoryStoreSpec,
    MemoryStoreStatus,
    Phase,
)

log = logging.getLogger("memorystore.operator")
# Drift repair and status refresh; tests shorten it.
RESYNC_SECONDS = float(os.environ.get("MEMORYSTORE_OPERATOR_RESYNC_SECONDS", "30"))
RESYNC_CONCURRENCY = 8
IMAGES = Images.from_env(os.environ)
MemoryStoreResource = create_namespaced_resource(GROUP, VERSION, KIND, PLURAL)


# One reconcile per store at a time (kopf's handler and the resync loop run in one event
# loop): each then reads what the previous one wrote, so a stale reconcile can never put
# back a rotated-away key into the client Secret.
_STORE_LOCKS: collections.defaultdict[str, asyncio.Lock] = collections.defaultdict(asyncio.Lock)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def reconcile(body: dict[str, Any], client: AsyncClient) -> dict[str, Any]:
    """Apply the desired state of one MemoryStore; return its new status (camelCase)."""
    with DURATION.time():
        outcome = "error"
        try:
            async with _STORE_LOCKS[body["metadata"]["uid"]]:
                outcome, status = await _reconcile(body, client)
        finally:
            RECONCILES.labels(outcome).inc()
    previous = (body.get("status") or {}).get("phase")
    if status.phase != previous:
        await _event(client, body, status)
    if _newly_shared(body.get("status") or {}, status):
        shared = next(c for c in status.conditions if c.type == AGENT_PODS_ISOLATED)
        await _post_event(client, body, "SharedAgentPods", shared.message, warning=True)
    out = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    if status.service_key is not None:
        # status is merge-patched: an ended grace period must be an explicit null to go
        out["serviceKey"]["previousKeyValidUntil"] = status.service_key.previous_key_valid_until
    return out


async def _reconcile(body: dict[str, Any], client: AsyncClient) -> tuple[str, MemoryStoreStatus]:
    meta = body["metadata"]
    owner = Owner(meta["name"], meta["namespace"], meta["uid"], int(meta.get("generation", 1)))
    previous = MemoryStoreStatus.model_validate(body.get("status") or {})
    try:
        spec = MemoryStoreSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        bad = Observed(owner.generation, False, spec_error=format_validation_error(exc))
        return "invalid_spec", compute_status(bad, previous, _now())
    try:
        # The one check, before anything is written: the builders below cannot refuse the
        # spec, so a rotated service key always reaches the client Secret in this reconcile.
        check_spec(owner, spec)
    except SpecError as exc:
        bad = Observed(owner.generation, spec.suspend, spec_error=str(exc))
        return "invalid_spec", compute_status(bad, previous, _now())
    owned = owns_data(spec)
    keys = await apply.ensure_keys(client, owner, owned)
    service_key = await _ensure_service_key(client, body, owner, spec, keys, previous)
    tls = await apply.ensure_tls(client, owner, spec, owned, dt.datetime.now(dt.UTC))
    children = desired_children(
        owner,
        spec,
        IMAGES,
        replace(keys, service_api_key=service_key.current),
        ca_cert=tls.ca_cert,
    )
    await apply.apply_all(client, children)
    observed = replace(
        await _observe(client, owner, spec),
        service_key=service_key.status(),
        tls_pending=tls.pending,
    )
    return "applied", compute_status(observed, previous, _now())


async def _ensure_service_key(
    client: AsyncClient,
    body: dict[str, Any],
    owner: Owner,
    spec: MemoryStoreSpec,
    keys: Keys,
    previous: MemoryStoreStatus,
) -> ServiceKeyState:
    """Seed, rotate or expire the service key (operator/keys.py); log and post each change."""
    decision = await apply.ensure_service_key(
        client,
        owner,
        spec.service_key,
        owns_data(spec),
        seed=keys.service_api_key,
        known_generation=previous.service_key.generation if previous.service_key else None,
        now=dt.datetime.now(dt.UTC),
    )
    store = f"{owner.namespace}/{owner.name}"
    for change, line in zip(decision.changes, describe(store, decision), strict=True):
        log.info("%s", line)
        KEY_CHANGES.labels(str(change)).inc()
        if change is not Change.SEEDED:  # seeding changes nothing an agent or a user sees
            await _post_event(
                client, body, f"ServiceKey{change}", line, warning=change is Change.RECREATED
            )
    return decision.state


async def _observe(client: AsyncClient, owner: Owner, spec: MemoryStoreSpec) -> Observed:
    workloads = {
        kind: Workload(kind, name, await apply.get_workload(client, kind, name, owner.namespace))
        for kind, name in expected_workloads(owner, spec)
    }
    external = spec.vector_store.external
    return Observed(
        generation=owner.generation,
        suspended=spec.suspend,
        vector_store=workloads.get("StatefulSet"),
        embedded_vector_store=spec.vector_store.embedded is not None,
        external_vector_store=external.url if external else None,
        external_error=await apply.probe_qdrant(external.url) if external else None,
        service=workloads.get("Deployment"),
        pending_claims=await apply.pending_claims(
            client, owner.namespace, names.store_selector(owner.name)
        ),
        missing_secrets=await apply.missing_secrets(client, owner.namespace, secret_refs(spec)),
        endpoint=names.memory_endpoint(owner.name, owner.namespace, tls=spec.tls.enabled),
        client_config_map=names.client_config_map_name(owner.name),
        client_secret=names.client_secret_name(owner.name),
        agent_pod_label=f"{names.CLIENT_POD_LABEL}={owner.name}",
        shared_agent_pods=await _shared_agent_pods(client, owner, spec),
    )


async def _shared_agent_pods(
    client: AsyncClient, owner: Owner, spec: MemoryStoreSpec
) -> str | None:
    """Why another store of the namespace would admit this store's agent pods, or None."""
    others: dict[str, MemoryStoreSpec] = {}
    try:
        async for item in client.list(MemoryStoreResource, namespace=owner.namespace):
            body = item.to_dict()
            if body["metadata"]["name"] == owner.name:
                continue
            with contextlib.suppress(ValidationError):  # its own status reports a bad spec
                others[body["metadata"]["name"]] = MemoryStoreSpec.model_validate(
                    body.get("spec") or {}
                )
    except ApiError as exc:
        log.warning("cannot list MemoryStores in %s: %s", owner.namespace, exc.status.message)
        return None
    found = isolation.overlaps(owner.name, spec, others)
    return isolation.overlap_message(owner.name, found) if found else None


def _newly_shared(previous: dict[str, Any], status: MemoryStoreStatus) -> bool:
    """The AgentPodsIsolated condition has just turned False (one Event, not one per resync)."""
    now = next((c for c in status.conditions if c.type == AGENT_PODS_ISOLATED), None)
    if now is None or now.status != "False":
        return False
    before = next(
        (c for c in previous.get("conditions") or [] if c.get("type") == AGENT_PODS_ISOLATED),
        None,
    )
    return before is None or before.get("status") != "False"


def secret_refs(spec: MemoryStoreSpec) -> dict[str, tuple[str, str]]:
    """Every Secret key the user's spec points at, by the field that names it."""
    refs = {
        "spec.embedder.apiKeySecretRef": spec.embedder.api_key_secret_ref,
        "spec.llm.apiKeySecretRef": spec.llm.api_key_secret_ref if spec.llm else None,
        "spec.vectorStore.external.apiKeySecretRef": (
            spec.vector_store.external.api_key_secret_ref if spec.vector_store.external else None
        ),
    }
    return {field: (ref.name, ref.key) for field, ref in refs.items() if ref is not None}


async def _event(client: AsyncClient, body: dict[str, Any], status: MemoryStoreStatus) -> None:
    """A Kubernetes Event on each phase change, with the Ready condition's reason/message."""
    ready = next((c for c in status.conditions if c.type == "Ready"), None)
    warning = status.phase in (Phase.FAILED, Phase.DEGRADED)
    await _post_event(client, body, str(status.phase), ready.message if ready else "", warning)


async def _post_event(
    client: AsyncClient, body: dict[str, Any], reason: str, message: str, warning: bool
) -> None:
    meta = body["metadata"]
    now = dt.datetime.now(dt.UTC)
    event = Event(
        metadata=ObjectMeta(generateName=f"{meta['name']}.", namespace=meta["namespace"]),
        involvedObject=ObjectReference(
            apiVersion=f"{GROUP}/{VERSION}",
            kind=KIND,
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta["uid"],
        ),
        reason=reason,
        message=message,
        type="Warning" if warning else "Normal",
        source=EventSource(component="memorystore-operator"),
        firstTimestamp=now,
        lastTimestamp=now,
        count=1,
    )
    try:
        await client.create(event)
    except ApiError as exc:  # an event is best effort, never a reason to fail a reconcile
        log.warning("could not post event for %s: %s", meta["name"], exc.status.message)


async def _resync_one(client: AsyncClient, body: dict[str, Any]) -> None:
    name = body["metadata"]["name"]
    try:
        status = await reconcile(body, client)
        await client.patch(
            MemoryStoreResource.Status,
            name,
            {"status": status},
            namespace=body["metadata"]["namespace"],
            patch_type=PatchType.MERGE,
        )
    except ApiError as exc:
        if exc.status.code != 404:  # deleted meanwhile: nothing to do
            log.warning("resync of %s failed: %s", name, exc.status.message)
    except Exception:  # one store's failure must not stop the loop for the others
        log.exception("resync of %s failed", name)


async def resync(client: AsyncClient, namespaces: list[str] | None) -> None:
    """Every RESYNC_SECONDS, reconcile every watched MemoryStore and write its status.

    Stores run a few at a time, so one slow store (an external Qdrant that times out its
    3 s probe) does not delay all the others by that much each round."""
    limit = asyncio.Semaphore(RESYNC_CONCURRENCY)

    async def bounded(body: dict[str, Any]) -> None:
        async with limit:
            await _resync_one(client, body)

    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        for namespace in namespaces or [ALL_NS]:
            try:
                stores = [s async for s in client.list(MemoryStoreResource, namespace=namespace)]
            except ApiError as exc:
                log.warning(
                    "resync: cannot list MemoryStores in %s: %s", namespace, exc.status.message
                )
                continue
            await asyncio.gather(*(bounded(store.to_dict()) for store in stores))


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Our own annotation names, not kopf's defaults (no finalizer is ever needed).
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING
    memo.client = AsyncClient(field_manager=apply.FIELD_MANAGER)
    memo.resync = asyncio.create_task(resync(memo.client, memo.get("namespaces")))


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    memo.resync.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await memo.resync


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
@kopf.on.resume(GROUP, VERSION, PLURAL)
async def on_change(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    patch.status.update(await reconcile(dict(body), memo.client))
