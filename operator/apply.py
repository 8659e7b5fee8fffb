"""The thin I/O layer: apply desired children with server-side apply, read back what exists.

One field manager owns every field the operator sets, so a hand edit to one of those
fields is reverted on the next reconcile while fields others own are left alone.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import secrets
from dataclasses import dataclass
from typing import Any

import httpx2
from lightkube import AsyncClient, codecs
from lightkube.core.client import LabelSelector
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.core_v1 import Event, PersistentVolumeClaim, Secret
from lightkube.types import PatchType

from memorystore.operator import keys, ledger, names, tls
from memorystore.operator.backup_plan import KEY_WAITS, backup_key_source
from memorystore.operator.builders.model import Keys, Owner
from memorystore.operator.builders.secrets import (
    backup_key_secret,
    ca_secret,
    keys_secret,
    qdrant_tls_secret,
    service_key_secret,
    tls_certificate,
    tls_secret,
)
from memorystore.operator.names import QDRANT_API_KEY, SERVICE_API_KEY, keys_secret_name
from memorystore.spec import GROUP, VERSION, MemoryStoreSpec, ServiceKeySpec

FIELD_MANAGER = "memorystore-operator"
WORKLOAD_TYPES = {"StatefulSet": StatefulSet, "Deployment": Deployment}


async def apply_all(client: AsyncClient, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        await client.apply(codecs.from_dict(obj), field_manager=FIELD_MANAGER, force=True)


def _metadata(obj: Secret) -> ObjectMeta:
    """A Secret's metadata: one read from the API server always has it (lightkube's models
    type it optional)."""
    if obj.metadata is None:
        raise ValueError("a Secret read from the API server has no metadata")
    return obj.metadata


def _meta(obj: Any) -> dict[str, Any]:
    """The fields of a lightkube object's metadata that `ledger.fingerprint` reads."""
    meta = obj.metadata
    return {
        "generation": meta.generation,
        "labels": meta.labels,
        "resourceVersion": meta.resourceVersion,
    }


async def apply_changed(
    client: AsyncClient, objects: list[dict[str, Any]], book: ledger.Ledger
) -> int:
    """Server-side apply each child the ledger does not know to be current; the writes made.

    A child of a kind the watch does not follow (the client Secret: the operator does not
    list Secrets) is read first, so a hand edit or a deletion is still seen."""
    writes = 0
    for obj in objects:
        key, desired = ledger.child_key(obj), ledger.digest(obj)
        resource: Any = codecs.from_dict(obj)
        if key[0] not in book.watched:
            try:
                live = await client.get(type(resource), key[2], namespace=key[1])
                book.saw(key, ledger.fingerprint(_meta(live)))
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
                book.saw(key, None)
        if book.current(key, desired):
            continue
        applied = await client.apply(resource, field_manager=FIELD_MANAGER, force=True)
        book.applied(key, desired, ledger.fingerprint(_meta(applied)))
        writes += 1
    return writes


# A kind another project's CRD defines (the Prometheus Operator's PodMonitor), registered so
# lightkube can apply it.
PodMonitor = create_namespaced_resource("monitoring.coreos.com", "v1", "PodMonitor", "podmonitors")


async def apply_if_served(client: AsyncClient, obj: dict[str, Any], book: ledger.Ledger) -> int:
    """`apply_changed` for one child of a kind that may not be served (its CRD not installed:
    the API server answers a plain-text 404, not an ApiError); 0 writes then, and the next
    reconcile tries again, so a CRD installed later is used without a restart."""
    try:
        return await apply_changed(client, [obj], book)
    except httpx2.HTTPStatusError as exc:
        if exc.response.status_code == 404 and not isinstance(exc, ApiError):
            return 0
        raise


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
    if bool(_metadata(existing).ownerReferences) != owned:  # deletionPolicy changed
        refs = keys_secret(owner, Keys("", ""), owned)["metadata"].get("ownerReferences")
        await client.patch(
            Secret,
            name,
            {"metadata": {"ownerReferences": refs}},
            namespace=owner.namespace,
            patch_type=PatchType.MERGE,
        )
    return Keys(
        service_api_key=_decode(existing, SERVICE_API_KEY),
        qdrant_api_key=_decode(existing, QDRANT_API_KEY),
    )


async def ensure_backup_key(
    client: AsyncClient,
    owner: Owner,
    spec: MemoryStoreSpec,
    restore_from: dict[str, Any] | None,
) -> bool:
    """Create `<store>-backup-key` once (`secrets.backup_key_secret`): a random key, or for a
    store restored from a backup the key of the store that took it (`restore_from`: the
    MemoryStoreBackup spec.restore names, None while it does not exist). An existing Secret
    is never changed. False while the key cannot be decided yet (the backup is missing).
    The key is never logged; when the source store's key is gone the restore will say the
    backup was signed with another key (spec.restore.trustUnsigned then restores it)."""
    name = names.backup_key_secret_name(owner.name)
    if await get_secret(client, name, owner.namespace) is not None:
        return True
    source = backup_key_source(spec, restore_from)
    if source == KEY_WAITS:
        return False
    key = None
    if source is not None and source != owner.name:
        found = await get_secret(client, names.backup_key_secret_name(source), owner.namespace)
        raw = ((found.data or {}) if found else {}).get(names.BACKUP_SIGNING_KEY)
        key = base64.b64decode(raw).decode() if raw else None
        if key is None:
            log.warning(
                "%s/%s: store %s's backup key (Secret %s) is gone: the restore cannot verify "
                "its backup unless spec.restore.trustUnsigned is set",
                owner.namespace,
                owner.name,
                source,
                names.backup_key_secret_name(source),
            )
    secret = backup_key_secret(owner, key or secrets.token_urlsafe(32))
    try:
        await client.create(codecs.from_dict(secret))
    except ApiError as exc:
        if exc.status.code != 409:  # 409: another reconcile created it just now
            raise
    return True


async def get_or_none(client: AsyncClient, resource: Any, name: str, namespace: str) -> Any:
    """The object, or None when it does not exist, nor when the API server does not serve
    its kind at all (a CRD not installed answers a plain-text 404, which lightkube raises as
    its HTTP library's HTTPStatusError, ApiError's base)."""
    try:
        return await client.get(resource, name, namespace=namespace)
    except httpx2.HTTPStatusError as exc:
        if exc.response.status_code == 404:
            return None
        raise


async def get_secret(client: AsyncClient, name: str, namespace: str) -> Secret | None:
    secret: Secret | None = await get_or_none(client, Secret, name, namespace)
    return secret


async def ensure_service_key(
    client: AsyncClient,
    owner: Owner,
    spec: ServiceKeySpec,
    owned: bool,
    *,
    seed: str,
    known_generation: int | None,
    now: dt.datetime,
) -> keys.Decision:
    """Read `<store>-service-key`, decide its next state (`keys.decide`), write what changed.

    A write is conditional on the resourceVersion read: when two reconciles of one store race
    (kopf's handler and the resync loop), both may decide to rotate, but only one write
    lands; the other fails with 409 Conflict before its key reaches the client Secret, and
    its reconcile is retried."""
    name = names.service_key_secret_name(owner.name)
    existing = await get_secret(client, name, owner.namespace)
    stored = keys.read_state(existing.data, _metadata(existing).annotations) if existing else None
    in_use = None
    if stored is None and known_generation is not None:  # lost after seeding: see keys.decide
        agents = await get_secret(client, names.client_secret_name(owner.name), owner.namespace)
        if agents is not None:
            in_use = keys.decode_key((agents.data or {}).get(names.CLIENT_API_KEY))
    decision = keys.decide(
        stored,
        seed=seed,
        known_generation=known_generation,
        in_use=in_use,
        spec=spec,
        now=now,
        new_key=lambda: secrets.token_urlsafe(32),
    )
    desired = service_key_secret(owner, decision.state, owned)
    if existing is None:
        await client.create(codecs.from_dict(desired))
    elif decision.changed or bool(_metadata(existing).ownerReferences) != owned:
        await client.patch(
            Secret,
            name,
            _replacement(desired, existing),
            namespace=owner.namespace,
            patch_type=PatchType.MERGE,
        )
    return decision


def _replacement(desired: dict[str, Any], existing: Secret) -> dict[str, Any]:
    """A merge patch making `existing` hold exactly what `desired` says of the keys and
    annotations the operator manages (null deletes one), on the resourceVersion read."""
    patch = {k: v for k, v in desired.items() if k in ("data", "metadata")}
    meta = patch["metadata"] = dict(patch["metadata"])
    meta["resourceVersion"] = _metadata(existing).resourceVersion
    meta.setdefault("ownerReferences", None)
    annotations = meta["annotations"] = dict(meta["annotations"])
    annotations.setdefault(names.PREVIOUS_KEY_VALID_UNTIL_ANNOTATION, None)
    data = patch["data"] = dict(patch["data"])
    data.setdefault(names.PREVIOUS_SERVICE_KEY, None)
    return patch


# --- TLS --------------------------------------------------------------------------------------

# cert-manager's Certificate (spec.tls.issuerRef): registered so that lightkube can apply it.
Certificate = create_namespaced_resource("cert-manager.io", "v1", "Certificate", "certificates")
CERT_MANAGER_ANNOTATION_PREFIX = "cert-manager.io/"
log = logging.getLogger("memorystore.operator")


@dataclass(frozen=True)
class TLSState:
    """What the reconcile learnt about the serving certificate.

    `ca_cert`: the CA agents must trust (None: TLS off, or a cert-manager issuer whose
    Secret carries no ca.crt, so the system's CAs). `pending`: (reason, message) while the
    service cannot start for want of its certificate."""

    ca_cert: str | None = None
    pending: tuple[str, str] | None = None


def _secret_text(secret: Secret | None) -> dict[str, str] | None:
    """A Secret's data as text; a value that is not UTF-8 reads as empty (so: re-issued)."""
    if secret is None:
        return None
    out = {}
    for key, value in (secret.data or {}).items():
        try:
            out[key] = base64.b64decode(value).decode()
        except (ValueError, UnicodeDecodeError):
            out[key] = ""
    return out


async def _write_secret(
    client: AsyncClient, desired: dict[str, Any], existing: Secret | None, owned: bool
) -> None:
    """Create `desired`, or merge-patch its data (and ownership) onto `existing`, on the
    resourceVersion read: two racing reconciles cannot interleave a CA and a certificate."""
    if existing is None:
        await client.create(codecs.from_dict(desired))
        return
    existing_meta = _metadata(existing)
    meta: dict[str, Any] = {
        "resourceVersion": existing_meta.resourceVersion,
        "ownerReferences": desired["metadata"].get("ownerReferences") if owned else None,
    }
    stale = {
        k: None
        for k in (existing_meta.annotations or {})
        if k.startswith(CERT_MANAGER_ANNOTATION_PREFIX)
    }
    if stale:  # the Secret was cert-manager's: it is the operator's now
        meta["annotations"] = stale
    data = {k: None for k in (existing.data or {}) if k not in desired["data"]}
    await client.patch(
        Secret,
        desired["metadata"]["name"],
        {"data": {**data, **desired["data"]}, "metadata": meta},
        namespace=desired["metadata"]["namespace"],
        patch_type=PatchType.MERGE,
    )


async def _retire_certificate(client: AsyncClient, owner: Owner, secret: Secret | None) -> None:
    """Delete this store's cert-manager Certificate once spec.tls.issuerRef is gone, so
    cert-manager stops rewriting the Secret the operator now issues (only when the Secret
    says cert-manager wrote it, and only a Certificate this store owns)."""
    annotations = (_metadata(secret).annotations or {}) if secret is not None else {}
    name = names.certificate_name(owner.name)
    if annotations.get(f"{CERT_MANAGER_ANNOTATION_PREFIX}certificate-name") != name:
        return
    cert = await get_or_none(client, Certificate, name, owner.namespace)
    if cert is None:  # no such Certificate, or no cert-manager at all
        return
    if any(ref.uid == owner.uid for ref in cert.metadata.ownerReferences or []):
        await client.delete(Certificate, name, namespace=owner.namespace)
        log.info("%s/%s: deleted Certificate %s", owner.namespace, owner.name, name)


async def ensure_tls(
    client: AsyncClient, owner: Owner, spec: MemoryStoreSpec, owned: bool, now: dt.datetime
) -> TLSState:
    """Make sure the serving certificate exists and is fresh; return the CA agents trust.

    Operator-issued: read `<store>-ca` and `<store>-tls`, let `tls.plan` decide, write only
    what changed (so an unchanged store costs two GETs). cert-manager: apply the Certificate
    and read back what cert-manager issued."""
    tls_spec = spec.tls
    if not tls_spec.enabled:
        return TLSState()
    ns = owner.namespace
    tls_name = names.tls_secret_name(owner.name)
    if tls_spec.issuer_ref is not None:
        return await _ensure_certificate(client, owner, spec)
    ca_name = names.ca_secret_name(owner.name)
    ca_existing = await get_secret(client, ca_name, ns)
    tls_existing = await get_secret(client, tls_name, ns)
    await _retire_certificate(client, owner, tls_existing)
    plan = tls.plan(
        _secret_text(ca_existing),
        _secret_text(tls_existing),
        store=owner.name,
        dns_names=names.memory_dns_names(owner.name, ns),
        now=now,
        duration_days=tls_spec.duration_days,
        renew_before_days=tls_spec.renew_before_days,
    )
    where = f"{ns}/{owner.name}"
    if plan.ca_data is not None:
        # replacing a CA agents already trust is worth a warning: they must reload ca.crt
        level = logging.WARNING if ca_existing is not None else logging.INFO
        log.log(level, "%s: issuing a new CA: %s", where, plan.ca_reason)
        await _write_secret(client, ca_secret(owner, plan.ca_data, owned), ca_existing, owned)
    elif ca_existing is not None and bool(_metadata(ca_existing).ownerReferences) != owned:
        refs = ca_secret(owner, {}, owned)["metadata"].get("ownerReferences")
        await client.patch(
            Secret,
            ca_name,
            {"metadata": {"ownerReferences": refs}},
            namespace=ns,
            patch_type=PatchType.MERGE,
        )
    if plan.tls_data is not None:
        log.info("%s: writing the serving certificate: %s", where, plan.tls_reason)
        await _write_secret(client, tls_secret(owner, plan.tls_data), tls_existing, True)
    return TLSState(ca_cert=plan.ca_cert)


async def ensure_qdrant_tls(
    client: AsyncClient, owner: Owner, spec: MemoryStoreSpec, owned: bool, now: dt.datetime
) -> None:
    """The managed Qdrant's certificate (`<store>-qdrant-tls`), from the store's private CA
    (`<store>-ca`, created here when the memory service's certificate does not need it),
    renewed as the memory service's is. Called after `ensure_tls`, which may have just
    replaced the CA: the CA is read again here."""
    managed = spec.vector_store.managed
    if managed is None or not managed.tls:
        return
    ns, where = owner.namespace, f"{owner.namespace}/{owner.name}"
    ca_existing = await get_secret(client, names.ca_secret_name(owner.name), ns)
    existing = await get_secret(client, names.qdrant_tls_secret_name(owner.name), ns)
    plan = tls.plan(
        _secret_text(ca_existing),
        _secret_text(existing),
        store=owner.name,
        dns_names=names.qdrant_dns_names(owner.name, ns),
        now=now,
        duration_days=spec.tls.duration_days,
        renew_before_days=spec.tls.renew_before_days,
        client_auth=True,
    )
    if plan.ca_data is not None:
        log.info("%s: issuing the store's CA for Qdrant: %s", where, plan.ca_reason)
        await _write_secret(client, ca_secret(owner, plan.ca_data, owned), ca_existing, owned)
    if plan.tls_data is not None:
        log.info("%s: writing Qdrant's certificate: %s", where, plan.tls_reason)
        await _write_secret(client, qdrant_tls_secret(owner, plan.tls_data), existing, True)


async def _ensure_certificate(client: AsyncClient, owner: Owner, spec: MemoryStoreSpec) -> TLSState:
    issuer = spec.tls.issuer_ref
    assert issuer is not None
    try:
        await apply_all(client, [tls_certificate(owner, spec)])
    except httpx2.HTTPStatusError as exc:
        # An API group the server does not serve answers a plain-text 404, which lightkube
        # raises as its HTTP library's HTTPStatusError (ApiError's base), not as ApiError.
        if exc.response.status_code != 404:
            raise
        return TLSState(
            pending=(
                "CertManagerMissing",
                f"spec.tls.issuerRef names {issuer.kind} {issuer.name}, but cert-manager is "
                "not installed (the API server serves no certificates.cert-manager.io): "
                "install cert-manager, or remove spec.tls.issuerRef to let the operator "
                "issue the certificate",
            )
        )
    issued = _secret_text(
        await get_secret(client, names.tls_secret_name(owner.name), owner.namespace)
    )
    if not issued or not issued.get(names.TLS_CERT):
        return TLSState(
            pending=(
                "CertificatePending",
                f"waiting for cert-manager to issue Secret {names.tls_secret_name(owner.name)} "
                f"(Certificate {names.certificate_name(owner.name)}, spec.tls.issuerRef "
                f"{issuer.kind} {issuer.name})",
            )
        )
    return TLSState(ca_cert=issued.get(names.CA_CERT) or None)


async def get_workload(
    client: AsyncClient, kind: str, name: str, namespace: str
) -> dict[str, Any] | None:
    obj = await get_or_none(client, WORKLOAD_TYPES[kind], name, namespace)
    return None if obj is None else obj.to_dict()


async def pending_claims(
    client: AsyncClient, namespace: str, selector: dict[str, str]
) -> list[str]:
    """PersistentVolumeClaims of this store that are not Bound (e.g. no StorageClass)."""
    labels: LabelSelector = {**selector}
    names = []
    async for pvc in client.list(PersistentVolumeClaim, namespace=namespace, labels=labels):
        if (pvc.status and pvc.status.phase) != "Bound" and pvc.metadata and pvc.metadata.name:
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


async def post_event(
    client: AsyncClient,
    kind: str,
    meta: dict[str, Any],
    reason: str,
    message: str,
    warning: bool = False,
) -> None:
    """A Kubernetes Event on a MemoryStore or MemoryStoreBackup (best effort)."""
    now = dt.datetime.now(dt.UTC)
    event = Event(
        metadata=ObjectMeta(generateName=f"{meta['name']}.", namespace=meta["namespace"]),
        involvedObject=ObjectReference(
            apiVersion=f"{GROUP}/{VERSION}",
            kind=kind,
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta.get("uid"),
        ),
        reason=reason,
        message=message[:1024],
        type="Warning" if warning else "Normal",
        source=EventSource(component="memorystore-operator"),
        firstTimestamp=now,
        lastTimestamp=now,
        count=1,
    )
    try:
        await client.create(event)
    except ApiError as exc:  # an event is best effort, never a reason to fail
        log.warning("could not post event for %s: %s", meta["name"], exc.status.message)
