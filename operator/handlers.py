"""kopf handlers: thin. Parse the spec, build the desired children (pure), apply them,
observe, and write the status; a timer repeats it so drift is repaired and status stays
current even when nothing in the spec changed.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from typing import Any

import kopf
from lightkube import AsyncClient
from pydantic import ValidationError

from memorystore.config import format_validation_error
from memorystore.operator import apply, names
from memorystore.operator.builders import (
    Images,
    Owner,
    SpecError,
    check_spec,
    desired_children,
    expected_workloads,
    owns_data,
)
from memorystore.operator.metrics import DURATION, RECONCILES
from memorystore.operator.status import Observed, Workload, compute_status
from memorystore.spec import GROUP, PLURAL, VERSION, MemoryStoreSpec, MemoryStoreStatus

log = logging.getLogger("memorystore.operator")
# Drift repair and status refresh; tests shorten it.
RESYNC_SECONDS = float(os.environ.get("MEMORYSTORE_OPERATOR_RESYNC_SECONDS", "30"))
IMAGES = Images()


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def reconcile(body: kopf.Body, patch: kopf.Patch, client: AsyncClient) -> None:
    with DURATION.time():
        outcome = "error"
        try:
            outcome = await _reconcile(body, patch, client)
        finally:
            RECONCILES.labels(outcome).inc()


async def _reconcile(body: kopf.Body, patch: kopf.Patch, client: AsyncClient) -> str:
    meta = body["metadata"]
    owner = Owner(meta["name"], meta["namespace"], meta["uid"], int(meta.get("generation", 1)))
    previous = MemoryStoreStatus.model_validate(body.get("status") or {})
    try:
        spec = MemoryStoreSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        _write_status(
            patch,
            Observed(owner.generation, False, spec_error=format_validation_error(exc)),
            previous,
        )
        return "invalid_spec"
    try:
        check_spec(owner, spec)  # before anything is written
        keys = await apply.ensure_keys(client, owner, owns_data(spec))
        children = desired_children(owner, spec, IMAGES, keys)
    except SpecError as exc:
        _write_status(
            patch, Observed(owner.generation, spec.suspend, spec_error=str(exc)), previous
        )
        return "invalid_spec"
    await apply.apply_all(client, children)
    observed = await _observe(client, owner, spec)
    _write_status(patch, observed, previous)
    return "applied"


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
        external_vector_store=external.url if external else None,
        service=workloads.get("Deployment"),
        pending_claims=await apply.pending_claims(
            client, owner.namespace, names.store_selector(owner.name)
        ),
        endpoint=names.memory_endpoint(owner.name, owner.namespace),
        client_config_map=names.client_config_map_name(owner.name),
        client_secret=names.client_secret_name(owner.name),
    )


def _write_status(patch: kopf.Patch, observed: Observed, previous: MemoryStoreStatus) -> None:
    status = compute_status(observed, previous, _now())
    patch.status.update(status.model_dump(by_alias=True, exclude_none=True, mode="json"))


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Our own annotation and finalizer names, not kopf's defaults.
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING
    memo.client = AsyncClient(field_manager=apply.FIELD_MANAGER)


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
@kopf.on.resume(GROUP, VERSION, PLURAL)
async def on_change(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    await reconcile(body, patch, memo.client)


@kopf.timer(GROUP, VERSION, PLURAL, interval=RESYNC_SECONDS, initial_delay=5)
async def resync(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    await reconcile(body, patch, memo.client)
