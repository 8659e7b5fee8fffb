"""Backups of a MemoryStore: MemoryStoreBackup objects, the schedule, retention and restore.

The pure decisions come first (which scheduled slot is due, which backups retention prunes,
whether a restore can start), so every case is unit-tested; the thin runtime below them
reads and writes the API and calls the memory service's backup API
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
import os
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
from cronsim import CronSim
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod, Secret
from lightkube.types import PatchType
from pydantic import ValidationError

from memorystore.operator import apply, names
from memorystore.operator.builders.model import Owner, Restore
from memorystore.operator.builders.paths import BACKUP_DIR
from memorystore.operator.builders.validate import POSTGRES_BACKUP_ADVICE, postgres_fields
from memorystore.operator.status import Workload, workload_state
from memorystore.spec import (
    BACKUP_KIND,
    BACKUP_PLURAL,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    BackupPhase,
    ConditionReason,
    MemoryStoreBackupStatus,
    MemoryStoreSpec,
)

log = logging.getLogger("memorystore.operator")

MemoryStoreResource = create_namespaced_resource(GROUP, VERSION, KIND, PLURAL)
MemoryStoreBackupResource = create_namespaced_resource(GROUP, VERSION, BACKUP_KIND, BACKUP_PLURAL)

SCHEDULED_LABEL = "memorystore.dev/scheduled"
# The cron slot a scheduled backup was made for (RFC 3339, UTC): retention orders by it.
SLOT_ANNOTATION = "memorystore.dev/scheduled-for"
RFC3339 = "%Y-%m-%dT%H:%M:%SZ"
# How long a backup waits for the store's service to be ready with the backup volume, and
# how long the service may take to write it (big stores take minutes).
WAIT_SECONDS = float(os.environ.get("MEMORYSTORE_OPERATOR_BACKUP_WAIT_SECONDS", "600"))
POLL_SECONDS = 2.0
BACKUP_TIMEOUT = httpx.Timeout(connect=10.0, read=1800.0, write=30.0, pool=10.0)
SHORT_TIMEOUT = httpx.Timeout(10.0)
CONNECT_ATTEMPTS = 3

R = ConditionReason


def format_time(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime(RFC3339)


def parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.strptime(text, RFC3339).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


# --- the schedule and retention (pure) ------------------------------------------------------


@dataclass(frozen=True)
class Scheduled:
    """A MemoryStoreBackup as retention sees it."""

    name: str
    slot: dt.datetime  # the slot it was made for (or its creation time)
    phase: str | None
    scheduled: bool = True


def slot_name(store: str, slot: dt.datetime) -> str:
    """The scheduled backup of one slot: one name per (store, minute), so two reconciles
    that both find the slot due create one object (the second gets AlreadyExists)."""
    return f"{store}-{slot.astimezone(dt.UTC):%Y%m%d%H%M}"


def latest_slot(schedule: str, now: dt.datetime) -> dt.datetime:
    """The last time the 5-field cron `schedule` (UTC) fired at or before `now`."""
    minute = now.astimezone(dt.UTC).replace(second=0, microsecond=0)
    # cronsim steps backwards strictly before its start: one second past the minute
    # includes the minute itself.
    return next(CronSim(" ".join(schedule.split()), minute + dt.timedelta(seconds=1), reverse=True))


def due_slot(
    schedule: str, now: dt.datetime, since: dt.datetime, existing: Iterable[Scheduled], store: str
) -> dt.datetime | None:
    """The slot a scheduled backup is due for now, or None.

    Only the latest slot at or before `now` is ever due (a missed slot is caught up once,
    never a backlog), only if it is not before `since` (the store's creation: a new store
    does not back up a slot it never lived through), and only if no backup of that slot
    exists in any phase (a failed one is not retried: the next slot is)."""
    slot = latest_slot(schedule, now)
    if slot < since:
        return None
    name = slot_name(store, slot)
    if any(b.name == name or (b.scheduled and b.slot == slot) for b in existing):
        return None
    return slot


def to_prune(backups: Iterable[Scheduled], retention: int) -> list[str]:
    """Scheduled backups retention removes: every Succeeded one but the `retention` newest,
    and every Failed one older than the newest Succeeded (it is superseded). On-demand
    backups and unfinished ones (Pending, Running, no phase yet) are never pruned."""
    scheduled = [b for b in backups if b.scheduled]
    succeeded = sorted(
        (b for b in scheduled if b.phase == BackupPhase.SUCCEEDED),
        key=lambda b: (b.slot, b.name),
        reverse=True,
    )
    prune = [b.name for b in succeeded[retention:]]
    if succeeded:
        newest = succeeded[0].slot
        prune += [b.name for b in scheduled if b.phase == BackupPhase.FAILED and b.slot < newest]
    return sorted(prune)


def scheduled_of(body: dict[str, Any]) -> Scheduled:
    """A MemoryStoreBackup object (as a dict) for retention."""
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    created = parse_time(meta.get("creationTimestamp")) or dt.datetime.min.replace(tzinfo=dt.UTC)
    slot = parse_time((meta.get("annotations") or {}).get(SLOT_ANNOTATION)) or created
    return Scheduled(
        name=meta.get("name", ""),
        slot=slot,
        phase=(body.get("status") or {}).get("phase"),
        scheduled=labels.get(SCHEDULED_LABEL) == "true",
    )


def scheduled_backup(store: str, namespace: str, slot: dt.datetime) -> dict[str, Any]:
    """The MemoryStoreBackup for one slot: labelled for listing, never owned by the store."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": BACKUP_KIND,
        "metadata": {
            "annotations": {SLOT_ANNOTATION: format_time(slot)},
            "labels": {names.STORE_LABEL: store, SCHEDULED_LABEL: "true"},
            "name": slot_name(store, slot),
            "namespace": namespace,
        },
        "spec": {"store": store},
    }


# --- restore (pure) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RestorePlan:
    """What a store with spec.restore gets this reconcile.

    `restore`: the init container's source (None: none). `start_service`: whether the
    Deployment is built. `mismatch`: a SpecValid=False message (nothing is created).
    `waiting`: (reason, message) while the service is held back."""

    restore: Restore | None = None
    start_service: bool = True
    mismatch: str | None = None
    waiting: tuple[ConditionReason, str] | None = None


def _describe(embedder: dict[str, Any]) -> str:
    model = f" model {embedder['model']}" if embedder.get("model") else ""
    return f"{embedder.get('provider')}{model}, {embedder.get('dimensions')} dimensions"


def plan_restore(
    spec: MemoryStoreSpec, backup: dict[str, Any] | None, restored: bool
) -> RestorePlan:
    """Decide a restore from spec.restore, the MemoryStoreBackup it names (None: missing)
    and whether the store already reported Restored.

    Once restored the store runs whatever happens to the backup; the init container stays
    while the backup exists (re-running it on the store it restored is a no-op)."""
    if spec.restore is None:
        return RestorePlan()
    name = spec.restore.from_backup
    status = (backup or {}).get("status") or {}
    usable = (
        backup is not None
        and status.get("phase") == BackupPhase.SUCCEEDED
        and status.get("claimName")
        and status.get("path")
    )
    if restored:
        if usable:
            return RestorePlan(restore=Restore(claim=status["claimName"], path=status["path"]))
        return RestorePlan()
    if backup is None:
        return RestorePlan(
            start_service=False,
            waiting=(
                R.BACKUP_NOT_FOUND,
                f"MemoryStoreBackup {name} (spec.restore.fromBackup) does not exist; the "
                "memory service starts once it does and has succeeded",
            ),
        )
    if not usable:
        phase = status.get("phase") or "Pending"
        return RestorePlan(
            start_service=False,
            waiting=(
                R.BACKUP_NOT_READY,
                f"MemoryStoreBackup {name} (spec.restore.fromBackup) is {phase}, not "
                "Succeeded; the memory service starts once it has succeeded",
            ),
        )
    recorded = status.get("embedder") or {}
    wanted = spec.embedder.identity()
    found = {
        "provider": recorded.get("provider"),
        "model": recorded.get("model") or None,
        "dimensions": recorded.get("dimensions"),
    }
    if found != wanted:
        return RestorePlan(
            start_service=False,
            mismatch=(
                f"spec.restore.fromBackup: MemoryStoreBackup {name} was made with embedder "
                f"{_describe(found)}, but spec.embedder is {_describe(wanted)}: vectors of "
                "another model mean nothing here; restore into a store with the backup's "
                "embedder"
            ),
        )
    return RestorePlan(restore=Restore(claim=status["claimName"], path=status["path"]))


def restore_failure(pods: Iterable[dict[str, Any]], container: str) -> str | None:
    """The termination message of a failed restore init container in the service's pods."""
    for pod in pods:
        for init in (pod.get("status") or {}).get("initContainerStatuses") or []:
            if init.get("name") != container:
                continue
            for state in ("state", "lastState"):
                done = (init.get(state) or {}).get("terminated") or {}
                if done and done.get("exitCode", 0) != 0:
                    text = (done.get("message") or done.get("reason") or "").strip()
                    pod_name = (pod.get("metadata") or {}).get("name", "")
                    return (
                        f"the restore init container of pod {pod_name} failed (exit code "
                        f"{done.get('exitCode')}): {text[-1000:] or 'no message'}"
                    )
    return None


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


def _manifest_time(text: Any) -> dt.datetime:
    """The manifest's ISO 8601 time (microseconds, +00:00), or now when absent or unreadable:
    status times are all RFC 3339 seconds in UTC."""
    try:
        when = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return dt.datetime.now(dt.UTC)
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def manifest_status(manifest: dict[str, Any], claim: str) -> dict[str, Any]:
    """A Succeeded status from the service's backup manifest."""
    embedder = manifest.get("embedder") or {}
    return {
        "phase": str(BackupPhase.SUCCEEDED),
        "finishedAt": format_time(_manifest_time(manifest.get("finished_at"))),
        "memories": manifest.get("memories"),
        "historyEvents": manifest.get("history_events"),
        "sizeBytes": manifest.get("bytes"),
        "claimName": claim,
        "path": manifest.get("path"),
        "collection": manifest.get("collection"),
        "embedder": {
            "provider": embedder.get("provider"),
            "model": embedder.get("model"),
            "dimensions": embedder.get("dimensions"),
        },
        "message": None,
        "error": None,
    }


# --- taking one backup ------------------------------------------------------------------------

_RUNNING: set[tuple[str, str]] = set()


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


def service_state(deployment: dict[str, Any] | None, claim: str) -> str | None:
    """None when the store's service is rolled out with `claim` at /backups and ready;
    otherwise what it is waiting for."""
    if deployment is None:
        return "the memory service's Deployment does not exist yet"
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    volumes = {
        v.get("name"): (v.get("persistentVolumeClaim") or {}).get("claimName")
        for v in pod.get("volumes") or []
    }
    mounted = any(
        m.get("mountPath") == BACKUP_DIR and volumes.get(m.get("name")) == claim
        for c in pod.get("containers") or []
        for m in c.get("volumeMounts") or []
    )
    name = (deployment.get("metadata") or {}).get("name")
    if not mounted:
        return f"Deployment {name} does not mount PersistentVolumeClaim {claim} at {BACKUP_DIR} yet"
    ready, _, message = workload_state(Workload("Deployment", str(name), deployment))
    return None if ready else message


class BackupFailed(Exception):
    """A backup that cannot be taken; the message is safe for status."""


async def run_backup(client: AsyncClient, namespace: str, name: str) -> None:
    """Take the backup `namespace/name` unless it is finished (kopf: create and resume)."""
    key = (namespace, name)
    if key in _RUNNING:
        return
    _RUNNING.add(key)
    try:
        await _run_backup(client, namespace, name)
    finally:
        _RUNNING.discard(key)


async def _run_backup(client: AsyncClient, namespace: str, name: str) -> None:
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
        done = await _take(client, namespace, name, store, spec, claim, resumed)
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
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
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
                f"within {WAIT_SECONDS:.0f} s: {waiting}"
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
    selector = {names.STORE_LABEL: owner.name, SCHEDULED_LABEL: "true"}
    try:
        listed = [
            b.to_dict()
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
    selector = names.selector_labels(store, names.MEMORY_SERVICE)
    return [p.to_dict() async for p in client.list(Pod, namespace=namespace, labels=selector)]


async def claim_exists(client: AsyncClient, namespace: str, name: str) -> bool:
    return await apply.get_or_none(client, PersistentVolumeClaim, name, namespace) is not None
