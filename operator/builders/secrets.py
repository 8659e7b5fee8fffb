"""The store's Secrets: the generated keys, the backup signing key, the service key under
rotation, the private CA and the TLS Secret, or the cert-manager Certificate that has
cert-manager write the latter (spec.tls.issuerRef). The apply layer writes these itself
(created once, rotated or re-issued), not with the other children."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.common import b64, canonical, metadata
from memorystore.operator.builders.model import Keys, Owner
from memorystore.operator.keys import ServiceKeyState, format_time
from memorystore.spec import MemoryStoreSpec

__all__ = [
    "backup_key_secret",
    "ca_secret",
    "keys_secret",
    "qdrant_tls_secret",
    "service_key_secret",
    "tls_certificate",
    "tls_secret",
]

# --- the generated keys ---------------------------------------------------------------------


def keys_secret(owner: Owner, keys: Keys, owned: bool) -> dict[str, Any]:
    """`<name>-keys`: the service and Qdrant keys. Created once by the apply layer and never
    overwritten (immutable), so the keys — and the data Qdrant protects with one — survive
    every reconcile and operator restart."""
    return canonical(
        {
            "apiVersion": "v1",
            "data": {
                names.QDRANT_API_KEY: b64(keys.qdrant_api_key),
                names.SERVICE_API_KEY: b64(keys.service_api_key),
            },
            "immutable": True,
            "kind": "Secret",
            "metadata": metadata(
                owner, names.keys_secret_name(owner.name), names.KEYS, owned=owned
            ),
            "type": "Opaque",
        }
    )


def backup_key_secret(owner: Owner, key: str) -> dict[str, Any]:
    """`<name>-backup-key`: the key the memory service signs its backups' manifests with
    (HMAC-SHA256) and a restore verifies them with, mounted as a file in both.

    Never owned, whatever spec.deletionPolicy says: backups outlive their store (they carry
    no owner reference), and the key is what makes them restorable; a store re-created
    with the same name signs with it again. Created once, immutable."""
    return canonical(
        {
            "apiVersion": "v1",
            "data": {names.BACKUP_SIGNING_KEY: b64(key)},
            "immutable": True,
            "kind": "Secret",
            "metadata": metadata(
                owner, names.backup_key_secret_name(owner.name), names.KEYS, owned=False
            ),
            "type": "Opaque",
        }
    )


def service_key_secret(owner: Owner, state: ServiceKeyState, owned: bool) -> dict[str, Any]:
    """`<name>-service-key`: the keys the memory service accepts, mounted as its files.

    Mutable, unlike the keys Secret: a rotation rewrites it in place (kubelet then updates
    the mounted files and the service re-reads them). The annotations are the rotation's
    bookkeeping (`keys.read_state` reads them back); they never hold a key."""
    data = {names.CURRENT_SERVICE_KEY: b64(state.current)}
    annotations = {names.SERVICE_KEY_GENERATION_ANNOTATION: str(state.generation)}
    if state.previous is not None:
        data[names.PREVIOUS_SERVICE_KEY] = b64(state.previous)
        deadline = format_time(state.previous_valid_until)
        if deadline is not None:
            annotations[names.PREVIOUS_KEY_VALID_UNTIL_ANNOTATION] = deadline
    meta = metadata(owner, names.service_key_secret_name(owner.name), names.KEYS, owned)
    meta["annotations"] = annotations
    return canonical(
        {
            "apiVersion": "v1",
            "data": data,
            "kind": "Secret",
            "metadata": meta,
            "type": "Opaque",
        }
    )


# --- TLS ------------------------------------------------------------------------------------


def ca_secret(owner: Owner, data: Mapping[str, str], owned: bool) -> dict[str, Any]:
    """`<name>-ca`: the store's private CA (ca.crt, ca.key). Never mounted anywhere: only the
    operator signs with it. It follows deletionPolicy like the keys, so a store re-created
    under Retain keeps the CA its agents already trust."""
    return canonical(
        {
            "apiVersion": "v1",
            "data": {k: b64(v) for k, v in sorted(data.items())},
            "kind": "Secret",
            "metadata": metadata(owner, names.ca_secret_name(owner.name), names.KEYS, owned=owned),
            "type": "Opaque",
        }
    )


def _certificate_secret(
    owner: Owner, name: str, component: str, data: Mapping[str, str]
) -> dict[str, Any]:
    """A certificate, its key and the CA (kubernetes.io/tls, the layout cert-manager writes
    too). Always owned: it is re-issued from the CA at will."""
    return canonical(
        {
            "apiVersion": "v1",
            "data": {k: b64(v) for k, v in sorted(data.items())},
            "kind": "Secret",
            "metadata": metadata(owner, name, component),
            "type": "kubernetes.io/tls",
        }
    )


def tls_secret(owner: Owner, data: Mapping[str, str]) -> dict[str, Any]:
    """`<name>-tls`: the memory service's serving certificate."""
    return _certificate_secret(owner, names.tls_secret_name(owner.name), names.MEMORY_SERVICE, data)


def qdrant_tls_secret(owner: Owner, data: Mapping[str, str]) -> dict[str, Any]:
    """`<name>-qdrant-tls`: the managed Qdrant's certificate (server and peer client), its key
    and the store's CA, from the operator's private CA whatever spec.tls says (traffic
    between the store's own pods). Mounted whole in the Qdrant pods; the memory service
    mounts its ca.crt only."""
    return _certificate_secret(owner, names.qdrant_tls_secret_name(owner.name), names.QDRANT, data)


def tls_certificate(owner: Owner, spec: MemoryStoreSpec) -> dict[str, Any]:
    """The cert-manager Certificate for the serving certificate (spec.tls.issuerRef set):
    cert-manager writes the same Secret, names and durations the operator would."""
    tls = spec.tls
    assert tls.issuer_ref is not None
    issuer = tls.issuer_ref
    dns_names = names.memory_dns_names(owner.name, owner.namespace)
    return canonical(
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": metadata(owner, names.certificate_name(owner.name), names.MEMORY_SERVICE),
            "spec": {
                "commonName": dns_names[0],
                "dnsNames": dns_names,
                "duration": f"{tls.duration_days * 24}h",
                "issuerRef": {"group": issuer.group, "kind": str(issuer.kind), "name": issuer.name},
                "privateKey": {"algorithm": "ECDSA", "rotationPolicy": "Always", "size": 256},
                "renewBefore": f"{tls.renew_before_days * 24}h",
                "secretName": names.tls_secret_name(owner.name),
                "secretTemplate": {"labels": names.labels(owner.name, names.MEMORY_SERVICE)},
                "usages": ["digital signature", "server auth"],
            },
        }
    )
