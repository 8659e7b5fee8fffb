"""The thin I/O layer: apply desired children with server-side apply, read back what exists.

One field manager owns every field the operator sets, so a hand edit to one of those
fields is reverted on the next reconcile while fields others own are left alone.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

import httpx
from lightkube import AsyncClient, codecs
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.core_v1 import PersistentVolumeClaim, Secret
from lightkube.types import PatchType

from memorystore.operator.builders import Keys, Owner, keys_secret
from memorystore.operator.names import QDRANT_API_KEY, SERVICE_API_KEY, keys_secret_name

FIELD_MANAGER = "memorystore-operator"
WORKLOAD_TYPES = {"StatefulSet": StatefulSet, "Deployment": Deployment}


async def apply_all(client: AsyncClient, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        await client.apply(codecs.from_dict(obj), field_manager=FIELD_MANAGER, force=True)


def _decode(secret: Secret, key: str) -> str:
    return base64.b64decode((secret.data or {})[key]).decode()


async def ensure_keys(client: AsyncClient, owner: Owner, owned: bool) -> Keys:
    """Read the generated keys, or create them once; they are never regenerated."""
    name = keys_secret_name(owner.name)
    try:
        existing = await client.get(Secret, name, namespace=owner.namespace)
    except ApiError as exc:
        if exc.status.code != 404:
            raise
        keys = Keys(
            service_api_key=secrets.token_urlsafe(32),
            qdrant_api_key=secrets.token_urlsafe(32),
        )
        await client.create(codecs.from_dict(keys_secret(owner, keys, owned)))
        return keys
    if bool(existing.metadata.ownerReferences) != owned:  # deletionPolicy changed
        refs = keys_secret(owner, Keys("", ""), owned)["metadata"].get("ownerReferences")
        await client.patch(
            Secret,
            existing.metadata.name,
            {"metadata": {"ownerReferences": refs}},
            namespace=owner.namespace,
            patch_type=PatchType.MERGE,
        )
    return Keys(
        service_api_key=_decode(existing, SERVICE_API_KEY),
        qdrant_api_key=_decode(existing, QDRANT_API_KEY),
    )


async def get_workload(client: AsyncClient, kind: str, name: str, namespace: str) -> dict | None:
    try:
        obj = await client.get(WORKLOAD_TYPES[kind], name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    return obj.to_dict()


async def pending_claims(
    client: AsyncClient, namespace: str, selector: dict[str, str]
) -> list[str]:
    """PersistentVolumeClaims of this store that are not Bound (e.g. no StorageClass)."""
    names = []
    async for pvc in client.list(PersistentVolumeClaim, namespace=namespace, labels=selector):
        if (pvc.status and pvc.status.phase) != "Bound":
            names.append(pvc.metadata.name)
    return sorted(names)


async def missing_secrets(
    client: AsyncClient, namespace: str, refs: dict[str, tuple[str, str]]
) -> list[str]:
    """For each `field -> (secret, key)` a user referenced: a message when it is not there."""
    problems = []
    for field, (name, key) in sorted(refs.items()):
        try:
            secret = await client.get(Secret, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            problems.append(f"Secret {name} referenced by {field} does not exist")
            continue
        if key not in (secret.data or {}) and key not in (secret.stringData or {}):
            problems.append(f"Secret {name} has no key {key!r} (referenced by {field})")
    return problems


async def probe_qdrant(url: str, timeout: float = 3.0) -> str | None:
    """None when an external Qdrant answers /readyz with 2xx; otherwise what went wrong."""
    try:
        async with httpx.AsyncClient(timeout=timeout) as http:
            response = await http.get(f"{url.rstrip('/')}/readyz")
    except httpx.HTTPError as exc:
        return f"cannot reach the external Qdrant at {url}: {type(exc).__name__}"
    if response.is_success:
        return None
    return f"the external Qdrant at {url} answered /readyz with HTTP {response.status_code}"
