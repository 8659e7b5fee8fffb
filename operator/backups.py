"""Backups of a MemoryStore: MemoryStoreBackup objects, the schedule, retention and restore.

This is the runtime: the pure decisions (which scheduled slot is due, which backups retention
prunes, whether a restore can start) are `backup_plan.py`, so every case is unit-tested; here
the API is read and written and the memory service's backup API is called
(`POST /v1/backups/`, `GET`/`DELETE /v1/backups/{name}/`, through `backup_service.py`) with
the store's own service key, verifying its CA, exactly as an agent pod does.

A MemoryStoreBackup is handled by kopf on create and resume only: no deletion handler and
no timer, which would put a finalizer on every backup (see handlers.py). Backups carry no
owner reference: a backup outlives its store, so a new store can restore from it. Scheduled
backups are created, and pruned, by the store's reconcile (the resync loop runs it).

A connection that drops after the backup was asked for (the service restarted, a network
fault) does not fail the backup at once: the operator asks the service whether the backup
finished or is still being written (`GET`: 200, or 409 while it runs), waits for it, and asks
again for one that is not there, up to BACKUP_ATTEMPTS times in all (status.attempts). The
service removes a killed backup's partial files when it starts, and retention deletes the
files of failed backups as well as those of succeeded ones.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

import httpx2
from lightkube import AsyncClient
from lightkube.core.client import LabelSelector
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod
from lightkube.types import PatchType
from pydantic import ValidationError

from memorystore.operator import apply, names
from memorystore.operator.backup_plan import (
    SCHEDULED_LABEL,
    due_slot,
    format_time,
    manifest_status,
    parse_time,
    scheduled_backup,
    scheduled_of,
    service_state,
    slot_name,
    to_prune,
)
from memorystore.operator.backup_service import (
    BACKUP_TIMEOUT,
    SHORT_TIMEOUT,
    ConnectionDropped,
    ServiceError,
    StoreService,
    detail,
)
from memorystore.operator.builders.model import Owner
from memorystore.operator.builders.validate import POSTGRES_BACKUP_ADVICE, postgres_fields
from memorystore.operator.metrics import BACKUPS, record_backup_success
from memorystore.operator.resources import (
    MemoryStoreBackupResource,
    MemoryStoreResource,
    as_body,
)
from memorystore.operator.settings import OperatorSettings
from memorystore.spec import (
    BACKUP_KIND,
    KIND,
    BackupPhase,
    MemoryStoreBackupStatus,
    MemoryStoreSpec,
)

__all__ = [
    "BACKUP_ATTEMPTS",
    "BackupFailed",
    "BackupRunner",
    "ConnectionDropped",
    "ServiceError",
    "StoreService",
    "claim_exists",
    "get_backup",
    "keep_schedule",
    "service_pods",
]

log = logging.getLogger("memorystore.operator")

# How often a backup looks again at a service it waits for (how long: the settings).
POLL_SECONDS = 2.0
BACKUP_ATTEMPTS = 3  # backups asked for, at most, when the connection drops before the answer


# --- taking one backup ------------------------------------------------------------------------


class BackupRunner:
    """Takes MemoryStoreBackups (kopf: create and resume), at most one run of each at a time;
    made once at start-up with the operator's settings (how long a backup waits)."""

    def __init__(self, client: AsyncClient, settings: OperatorSettings) -> None:
        self.client = client
        self.settings = settings
        self._running: set[tuple[str, str]] = set()

    async def run(self, namespace: str, name: str) -> None:
        """Take the backup `namespace/name` unless it is finished or already being taken."""
        key = (namespace, name)
        if key in self._running:
            return
        self._running.add(key)
        try:
            await _run_backup(self.client, namespace, name, self.settings.backup_wait_seconds)
        finally:
            self._running.discard(key)


async def _set_status(
    client: AsyncClient, namespace: str, name: str, status: dict[str, Any]
) -> None:
    await client.patch(
        MemoryStoreBackupResource.Status,
        name,
        {"status": status},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )


class BackupFailed(Exception):
    """A backup that cannot be taken; the message is safe for status."""


async def _run_backup(client: AsyncClient, namespace: str, name: str, wait_seconds: float) -> None:
    live = await apply.get_or_none(client, MemoryStoreBackupResource, name, namespace)
    if live is None:
        return
    body = live.to_dict()
    meta = body["metadata"]
    status = MemoryStoreBackupStatus.model_validate(body.get("status") or {})
    store = (body.get("spec") or {}).get("store", "")
    if status.phase in (BackupPhase.SUCCEEDED, BackupPhase.FAILED):
        finished = parse_time(status.finished_at)
        if status.phase == BackupPhase.SUCCEEDED and finished is not None:
            record_backup_success(namespace, store, finished.timestamp())
        return
    scheduled = (meta.get("labels") or {}).get(SCHEDULED_LABEL) == "true"
    started = status.started_at or format_time(dt.datetime.now(dt.UTC))
    attempts = _Attempts(status.attempts or 0)
    try:
        spec, claim = await _preconditions(client, namespace, store)
        if status.phase != BackupPhase.RUNNING:
            await _set_status(
                client,
                namespace,
                name,
                {"phase": "Running", "startedAt": started, "scheduled": scheduled},
            )
            await apply.post_event(
                client,
                BACKUP_KIND,
                meta,
                "BackupStarted",
                f"backing up store {store} onto PersistentVolumeClaim {claim}",
            )
        resumed = status.phase == BackupPhase.RUNNING
        done = await _take(
            client, namespace, name, store, spec, claim, resumed, wait_seconds, attempts
        )
    except (BackupFailed, ServiceError) as exc:
        message = str(exc)
        await _set_status(
            client,
            namespace,
            name,
            {
                "phase": "Failed",
                "startedAt": started,
                "finishedAt": format_time(dt.datetime.now(dt.UTC)),
                "scheduled": scheduled,
                "message": None,
                "error": message,
                **attempts.status(),
            },
        )
        await apply.post_event(client, BACKUP_KIND, meta, "BackupFailed", message, warning=True)
        log.warning("backup %s/%s failed: %s", namespace, name, message)
        BACKUPS.labels(namespace, store, "failed").inc()
        return
    await _set_status(
        client,
        namespace,
        name,
        {**done, "startedAt": started, "scheduled": scheduled, **attempts.status()},
    )
    BACKUPS.labels(namespace, store, "succeeded").inc()
    finished = parse_time(done.get("finishedAt")) or dt.datetime.now(dt.UTC)
    record_backup_success(namespace, store, finished.timestamp())
    await apply.post_event(
        client,
        BACKUP_KIND,
        meta,
        "BackupSucceeded",
        f"{done.get('memories')} memories, {done.get('sizeBytes')} bytes in {done.get('path')} "
        f"on PersistentVolumeClaim {claim}",
    )


async def _preconditions(
    client: AsyncClient, namespace: str, store: str
) -> tuple[MemoryStoreSpec, str]:
    found = await apply.get_or_none(client, MemoryStoreResource, store, namespace)
    if found is None:
        raise BackupFailed(f"MemoryStore {store} does not exist in namespace {namespace}")
    try:
        spec = MemoryStoreSpec.model_validate(found.to_dict().get("spec") or {})
    except ValidationError:
        raise BackupFailed(f"store {store}'s spec is not valid (see its status)") from None
    in_postgres = postgres_fields(spec)
    if in_postgres:  # before spec.backup: setting it would not help
        raise BackupFailed(
            f"store {store} keeps its memories in PostgreSQL ({' and '.join(in_postgres)}): "
            f"{POSTGRES_BACKUP_ADVICE}"
        )
    if spec.backup is None:
        raise BackupFailed(
            f"store {store} has no spec.backup.volume: set spec.backup.volume.claimName to a "
            "PersistentVolumeClaim for its backups"
        )
    if spec.suspend:
        raise BackupFailed(
            f"store {store} is suspended (spec.suspend): no memory service runs to take the backup"
        )
    claim = spec.backup.volume.claim_name
    if await apply.get_or_none(client, PersistentVolumeClaim, claim, namespace) is None:
        raise BackupFailed(
            f"PersistentVolumeClaim {claim} (spec.backup.volume of store {store}) does not "
            f"exist in namespace {namespace}"
        )
    return spec, claim


class _Attempts:
    """How many times this backup was asked of the service (status.attempts)."""

    def __init__(self, made: int) -> None:
        self.made = made

    def status(self) -> dict[str, Any]:
        return {"attempts": self.made} if self.made else {}


async def _take(
    client: AsyncClient,
    namespace: str,
    name: str,
    store: str,
    spec: MemoryStoreSpec,
    claim: str,
    resumed: bool,
    wait_seconds: float,
    attempts: _Attempts,
) -> dict[str, Any]:
    """Wait for the service with the volume, then have it write the backup; the status."""
    service = await StoreService.of(client, store, namespace, spec.tls.enabled)
    path = f"/v1/backups/{name}/"
    if resumed:  # Running when the operator restarted: the service may have finished it
        try:
            previous = await service.call("GET", path, SHORT_TIMEOUT, attempts=1)
        except ServiceError:
            previous = None  # not reachable now: wait for it below, then take it (again)
        if previous is not None and previous.status_code == 200:
            return manifest_status(previous.json(), claim)
        if previous is not None and previous.status_code == 409:  # still being written
            found = await _settled(service, path, wait_seconds)
            if found is not None:
                return manifest_status(found, claim)
    deadline = asyncio.get_running_loop().time() + wait_seconds
    said = None
    while True:
        deployment = await apply.get_or_none(
            client, Deployment, names.memory_deployment_name(store), namespace
        )
        waiting = service_state(deployment.to_dict() if deployment else None, claim)
        if waiting is None:
            break
        if asyncio.get_running_loop().time() > deadline:
            raise BackupFailed(
                f"the memory service of store {store} was not ready with the backup volume "
                f"within {wait_seconds:.0f} s: {waiting}"
            )
        if waiting != said:
            await _set_status(client, namespace, name, {"message": f"waiting: {waiting}"})
            said = waiting
        await asyncio.sleep(POLL_SECONDS)
    if said is not None:
        await _set_status(client, namespace, name, {"message": None})
    while True:
        attempts.made += 1
        await _set_status(client, namespace, name, {"attempts": attempts.made})
        try:
            response = await service.call("POST", "/v1/backups/", BACKUP_TIMEOUT, {"name": name})
        except ConnectionDropped as exc:
            log.warning("backup %s/%s: %s; asking whether it finished", namespace, name, exc)
            found = await _settled(service, path, wait_seconds)
            if found is not None:
                return manifest_status(found, claim)
            if attempts.made >= BACKUP_ATTEMPTS:
                raise BackupFailed(
                    f"the connection to the memory service dropped before it answered, "
                    f"{attempts.made} times (last: {exc})"
                ) from None
            continue
        if response.is_success:
            return manifest_status(response.json(), claim)
        if response.status_code == 409:  # taken before a restart, or being taken right now
            found = await _settled(service, path, wait_seconds)
            if found is not None:
                return manifest_status(found, claim)
        raise BackupFailed(f"the memory service refused the backup: {detail(response)}")


async def _settled(service: StoreService, path: str, wait_seconds: float) -> dict[str, Any] | None:
    """The backup's manifest once the service has finished it; None when the service has
    no such backup (ask for it again). While it is being written (409) or the service cannot
    be reached (restarting), ask again, for up to `wait_seconds`."""
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while True:
        try:
            response = await service.call("GET", path, SHORT_TIMEOUT)
        except ServiceError:
            response = None
        if response is not None:
            if response.status_code == 200:
                manifest: dict[str, Any] = response.json()
                return manifest
            if response.status_code == 404:
                return None
            if response.status_code != 409:
                raise BackupFailed(f"the memory service answered {path}: {detail(response)}")
        if asyncio.get_running_loop().time() > deadline:
            what = "still being written" if response is not None else "unreachable"
            raise BackupFailed(
                f"the backup was {what} after {wait_seconds:.0f} s of waiting for it to finish"
            )
        await asyncio.sleep(POLL_SECONDS)


# --- scheduled backups and retention (the store's reconcile) ----------------------------------


async def keep_schedule(
    client: AsyncClient,
    owner: Owner,
    spec: MemoryStoreSpec,
    created: dt.datetime,
    now: dt.datetime,
) -> None:
    """Create the scheduled backup that is due and prune past retention (store reconcile)."""
    backup = spec.backup
    if backup is None or backup.schedule is None or spec.suspend:
        return
    selector: LabelSelector = {names.STORE_LABEL: owner.name, SCHEDULED_LABEL: "true"}
    try:
        listed = [
            as_body(b)
            async for b in client.list(
                MemoryStoreBackupResource, namespace=owner.namespace, labels=selector
            )
        ]
    except httpx2.HTTPStatusError as exc:
        log.warning(
            "%s/%s: cannot list MemoryStoreBackups (is their CRD installed?): HTTP %s",
            owner.namespace,
            owner.name,
            exc.response.status_code,
        )
        return
    existing = [scheduled_of(b) for b in listed]
    slot = due_slot(backup.schedule, now, created, existing, owner.name)
    if slot is not None:
        try:
            await client.create(
                MemoryStoreBackupResource.from_dict(
                    scheduled_backup(owner.name, owner.namespace, slot)
                )
            )
            log.info(
                "%s/%s: scheduled backup %s",
                owner.namespace,
                owner.name,
                slot_name(owner.name, slot),
            )
        except ApiError as exc:
            if exc.status.code != 409:  # 409: another reconcile made it
                raise
    by_name = {b["metadata"]["name"]: b for b in listed}
    for name in to_prune(existing, backup.retention):
        await _prune(client, owner, spec, by_name[name])


async def _prune(
    client: AsyncClient, owner: Owner, spec: MemoryStoreSpec, body: dict[str, Any]
) -> None:
    """Delete one backup's files through the service (best effort), then its object. A
    failed backup's files go too: whatever a failed attempt left (its partial directory, or
    a backup finished after the operator gave up on it)."""
    name = body["metadata"]["name"]
    status = body.get("status") or {}
    if status.get("phase") in (BackupPhase.SUCCEEDED, BackupPhase.FAILED):
        try:
            service = await StoreService.of(client, owner.name, owner.namespace, spec.tls.enabled)
            response = await service.call(
                "DELETE", f"/v1/backups/{name}/", SHORT_TIMEOUT, attempts=1
            )
            if not response.is_success and response.status_code != 404:
                raise ServiceError(detail(response))
        except ServiceError as exc:
            target = spec.backup.volume.claim_name if spec.backup else None
            claim = status.get("claimName") or target
            message = (
                f"retention: could not delete the files of backup {name} through the memory "
                f"service ({exc}); they stay on PersistentVolumeClaim {claim} under "
                f"{status.get('path') or name}"
            )
            log.warning("%s/%s: %s", owner.namespace, owner.name, message)
            await apply.post_event(
                client,
                KIND,
                {"name": owner.name, "namespace": owner.namespace, "uid": owner.uid},
                "BackupPruneIncomplete",
                message,
                warning=True,
            )
    try:
        await client.delete(MemoryStoreBackupResource, name, namespace=owner.namespace)
        log.info("%s/%s: retention deleted backup %s", owner.namespace, owner.name, name)
    except ApiError as exc:
        if exc.status.code != 404:
            raise


# --- what the store's reconcile reads ---------------------------------------------------------


async def get_backup(client: AsyncClient, namespace: str, name: str) -> dict[str, Any] | None:
    """A MemoryStoreBackup as a dict; None when it (or its CRD) does not exist."""
    found = await apply.get_or_none(client, MemoryStoreBackupResource, name, namespace)
    return None if found is None else found.to_dict()


async def service_pods(client: AsyncClient, namespace: str, store: str) -> list[dict[str, Any]]:
    """The memory service's pods (to read a restore init container's termination)."""
    selector: LabelSelector = {**names.selector_labels(store, names.MEMORY_SERVICE)}
    return [p.to_dict() async for p in client.list(Pod, namespace=namespace, labels=selector)]


async def claim_exists(client: AsyncClient, namespace: str, name: str) -> bool:
    return await apply.get_or_none(client, PersistentVolumeClaim, name, namespace) is not None
