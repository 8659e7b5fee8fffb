"""Pieces shared by several kinds of child: metadata and ownership, env entries (never a
secret: secrets are mounted files, secret_files.py), probes, pod security and placement,
resources, volume claims, ports, and the canonical form."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, overload

from memorystore.operator import names
from memorystore.operator.builders.model import Owner
from memorystore.spec import (
    GROUP,
    KIND,
    VERSION,
    DeletionPolicy,
    MemoryStoreSpec,
    Resources,
    Storage,
    Toleration,
)

API_VERSION = f"{GROUP}/{VERSION}"

RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "privileged": False,
    "readOnlyRootFilesystem": True,
}


def owner_reference(owner: Owner) -> dict[str, Any]:
    """The controller reference: garbage collection deletes children with their store."""
    return {
        "apiVersion": API_VERSION,
        "blockOwnerDeletion": True,
        "controller": True,
        "kind": KIND,
        "name": owner.name,
        "uid": owner.uid,
    }


def metadata(owner: Owner, name: str, component: str, owned: bool = True) -> dict[str, Any]:
    """A child's labels, name and namespace; not `owned`, it outlives the store."""
    meta: dict[str, Any] = {
        "labels": names.labels(owner.name, component),
        "name": name,
        "namespace": owner.namespace,
    }
    if owned:
        meta["ownerReferences"] = [owner_reference(owner)]
    return meta


def owns_data(spec: MemoryStoreSpec) -> bool:
    """Data-bearing children (history volume, keys) are owned — and so garbage-collected with
    the store — only under deletionPolicy Delete. Under Retain they have no owner reference,
    so deleting the store needs no finalizer to keep them, and a store re-created with the
    same name picks them up again."""
    return spec.deletion_policy == DeletionPolicy.DELETE


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def container_resources(resources: Resources) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if resources.requests:
        out["requests"] = dict(sorted(resources.requests.items()))
    if resources.limits:
        out["limits"] = dict(sorted(resources.limits.items()))
    return out


def value_env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def http_probe(
    path: str, port: str, *, period: int, timeout: int, failures: int, https: bool = False
) -> dict[str, Any]:
    get: dict[str, Any] = {"path": path, "port": port}
    if https:
        get["scheme"] = "HTTPS"  # kubelet does not verify the certificate: no CA needed
    return {
        "failureThreshold": failures,
        "httpGet": get,
        "periodSeconds": period,
        "timeoutSeconds": timeout,
    }


def pod_security(uid: int) -> dict[str, Any]:
    return {
        "fsGroup": uid,
        "fsGroupChangePolicy": "OnRootMismatch",
        "runAsGroup": uid,
        "runAsNonRoot": True,
        "runAsUser": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def placement(node_selector: Mapping[str, str], tolerations: list[Toleration]) -> dict[str, Any]:
    """nodeSelector / tolerations for a pod spec; absent when unset, so a store without
    placement renders (and rolls) exactly as before the fields existed."""
    out: dict[str, Any] = {}
    if node_selector:
        out["nodeSelector"] = dict(sorted(node_selector.items()))
    if tolerations:
        out["tolerations"] = [t.as_pod_toleration() for t in tolerations]
    return out


def storage_spec(storage: Storage) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storage_class_name:
        spec["storageClassName"] = storage.storage_class_name
    return spec


def service_port(name: str, port: int) -> dict[str, Any]:
    return {"name": name, "port": port, "protocol": "TCP", "targetPort": name}


@overload
def canonical(value: dict[str, Any]) -> dict[str, Any]: ...
@overload
def canonical(value: Any) -> Any: ...
def canonical(value: Any) -> Any:
    """Sorted keys at every level (list order is meaningful and kept), and no shared
    sub-dicts between children, so callers may mutate what they get."""
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value
