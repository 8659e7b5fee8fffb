"""Backups of a MemoryStore: MemoryStoreBackup objects, the schedule, retention and restore.

This is the runtime: the pure decisions (which scheduled slot is due, which backups retention
prunes, whether a restore can start) are `backup_plan.py`, so every case is unit-tested; here
the API is read and written and the memory service's backup API is called
(`POST /v1/backups/`, `GET`/`DELETE /v1/backups/{name}/`) with the store's own service key,
verifying its CA, exactly as an agent pod does.

A MemoryStoreBackup is handled by kopf on create and resume only: no deletion handler and
no timer, which would put a finalizer on every backup (see handlers.py). Backups carry no
owner reference: a backup outlives its store, so a new store can restore from it. Scheduled
backups are created, and pruned, by the store's reconcile (the resync loop runs it).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import ssl
from typing import Any

import httpx
import httpx2
from lightkube import AsyncClient
from lightkube.core.client import LabelSelector
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod, Secret
from lightkube.types import PatchType
from pydantic import ValidationError

from memorystore.operator import apply, names
from memorystore.operator.backup_plan import (
    SCHEDULED_LABEL,
    due_slot,
    format_time,
    manifest_status,
    scheduled_backup,
    scheduled_of,
    service_state,
    slot_name,
    to_prune,
)
from memorystore.operator.builders.model import Owner
from memorystore.operator.builders.validate import POSTGRES_BACKUP_ADVICE, postgres_fields
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
    "BackupFailed",
    "BackupRunner",
    "ServiceError",
    "StoreService",
    "claim_exists",
    "get_backup",
    "keep_schedule",
    "service_pods",
]

log = logging.getLogger("memorystore.operator")

# How often a backup looks again at a service it waits for (how long: the settings), and how
# long the service may take to write it (big stores take minutes).
POLL_SECONDS = 2.0
BACKUP_TIMEOUT = httpx.Timeout(connect=10.0, read=1800.0, write=30.0, pool=10.0)
SHORT_TIMEOUT = httpx.Timeout(10.0)
CONNECT_ATTEMPTS = 3


# --- the service's backup API -----------------------------------------------------------------


class ServiceError(Exception):
    """The service refused or could not be reached; the message is safe for status."""


def _decode(secret: Secret | None, key: str) -> str | None:
    raw = ((secret.data or {}) if secret else {}).get(key)
    if not raw:
        return None
    try:
        return base64.b64decode(raw).decode().strip() or None
    except (ValueError, UnicodeDecodeError):
        return None


class StoreService:
    """The memory service of one store, as an agent reaches it: the Service's name, the
    store's current service key, its CA."""

    def __init__(self, endpoint: str, key: str, ca_cert: str | None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._key = key
        self._verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cadata=ca_cert) if ca_cert else True
        )

    @classmethod
    async def of(cls, client: AsyncClient, store: str, namespace: str, tls: bool) -> StoreService:
        async def read(secret: str, key: str) -> str | None:
            return _decode(await apply.get_secret(client, secret, namespace), key)

        key = await read(names.service_key_secret_name(store), names.CURRENT_SERVICE_KEY)
        if key is None:
            raise ServiceError(
                f"the service key of store {store} (Secret "
                f"{names.service_key_secret_name(store)}) does not exist yet"
            )
        ca = None
        if tls:
            ca = await read(names.ca_secret_name(store), names.CA_CERT) or await read(
                names.tls_secret_name(store), names.CA_CERT
            )
        return cls(names.memory_endpoint(store, namespace, tls=tls), key, ca)

    async def call(
        self,
        method: str,
        path: str,
        timeout: httpx.Timeout,
        body: Any = None,
        attempts: int = CONNECT_ATTEMPTS,
    ) -> httpx.Response:
        """One request; a connection that could not be made is retried `attempts` times."""
        url = f"{self.endpoint}{path}"
        headers = {"Authorization": f"Token {self._key}"}
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                async with httpx.AsyncClient(verify=self._verify, timeout=timeout) as http:
                    return await http.request(method, url, json=body, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent
                last = exc
                if attempt + 1 < attempts:
                    await asyncio.sleep(2.0 * (attempt + 1))
            except httpx.HTTPError as exc:
                raise ServiceError(
                    f"the memory service at {self.endpoint} did not answer {method} {path}: "
                    f"{type(exc).__name__}"
                ) from None
        raise ServiceError(
            f"cannot reach the memory service at {self.endpoint}: {type(last).__name__} "
            f"({attempts} attempts)"
        )


def _detail(response: httpx.Response) -> str:
    """The service's error `detail` (never echoes a header, so never the key)."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = detail if isinstance(detail, str) else response.reason_phrase
    return f"HTTP {response.status_code}: {text}"[:2000]


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
    if status.phase in (BackupPhase.SUCCEEDED, BackupPhase.FAILED):
        return
    store = (body.get("spec") or {}).get("store", "")
    scheduled = (meta.get("labels") or {}).get(SCHEDULED_LABEL) == "true"
    started = status.started_at or format_time(dt.datetime.now(dt.UTC))
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
        done = await _take(client, namespace, name, store, spec, claim, resumed, wait_seconds)
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
            },
        )
        await apply.post_event(client, BACKUP_KIND, meta, "BackupFailed", message, warning=True)
        log.warning("backup %s/%s failed: %s", namespace, name, message)
        return
    await _set_status(
        client, namespace, name, {**done, "startedAt": started, "scheduled": scheduled}
    )
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


async def _take(
    client: AsyncClient,
    namespace: str,
    name: str,
    store: str,
    spec: MemoryStoreSpec,
    claim: str,
    resumed: bool,
    wait_seconds: float,
) -> dict[str, Any]:
    """Wait for the service with the volume, then have it write the backup; the status."""
    service = await StoreService.of(client, store, namespace, spec.tls.enabled)
    path = f"/v1/backups/{name}/"
    if resumed:  # Running when the operator restarted: the service may have finished it
        try:
            previous = await service.call("GET", path, SHORT_TIMEOUT, attempts=1)
            if previous.status_code == 200:
                return manifest_status(previous.json(), claim)
        except ServiceError:
            pass  # not reachable now: wait for it below, then take it (again)
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
    response = await service.call("POST", "/v1/backups/", BACKUP_TIMEOUT, {"name": name})
    if response.is_success:
        return manifest_status(response.json(), claim)
    if response.status_code == 409:  # a name that exists: this backup, taken before a restart
        again = await service.call("GET", path, SHORT_TIMEOUT)
        if again.status_code == 200:
            return manifest_status(again.json(), claim)
    raise BackupFailed(f"the memory service refused the backup: {_detail(response)}")


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
    """Delete one backup's files through the service (best effort), then its object."""
    name = body["metadata"]["name"]
    status = body.get("status") or {}
    if status.get("phase") == BackupPhase.SUCCEEDED:
        try:
            service = await StoreService.of(client, owner.name, owner.namespace, spec.tls.enabled)
            response = await service.call(
                "DELETE", f"/v1/backups/{name}/", SHORT_TIMEOUT, attempts=1
            )
            if not response.is_success and response.status_code != 404:
                raise ServiceError(_detail(response))
        except ServiceError as exc:
            message = (
                f"retention: could not delete the files of backup {name} through the memory "
                f"service ({exc}); they stay on PersistentVolumeClaim {status.get('claimName')} "
                f"under {status.get('path')}"
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
