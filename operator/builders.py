"""Pure builders: a MemoryStore spec in, the desired Kubernetes children out, as plain dicts.

No I/O, no clock, no randomness: the same input gives byte-identical objects, so the apply
layer can server-side-apply them on every reconcile and any difference is a real change.
The generated keys come in as `Keys` (the apply layer creates them once and keeps them)
and the service key's rotation state as `keys.ServiceKeyState`; secret values appear only
in the Secrets built here. Everything else refers to secrets (`secretKeyRef` and Secret
volumes in pod specs, `{env: VAR}` / `{file: PATH}` in the config files), so no secret is
ever copied into a ConfigMap.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import yaml
from pydantic import ValidationError

from memorystore.config import ClientConfig, ServiceConfig, ServiceEmbedder, ServiceLLM
from memorystore.operator import names
from memorystore.operator.isolation import admitted_selectors
from memorystore.operator.keys import ServiceKeyState, format_time
from memorystore.spec import (
    GROUP,
    KIND,
    VERSION,
    DeletionPolicy,
    MemoryStoreSpec,
    Model,
    Resources,
    SecretKeyRef,
    Storage,
    Toleration,
)

API_VERSION = f"{GROUP}/{VERSION}"

# --- inside the memory-service pod ----------------------------------------------------------
CONFIG_DIR = "/etc/memorystore"
SERVICE_CONFIG_PATH = f"{CONFIG_DIR}/{names.SERVICE_CONFIG_FILE}"
DATA_DIR = "/data"
HISTORY_PATH = f"{DATA_DIR}/history.db"
# spec.vectorStore.embedded: the engine's files on the same volume as the history.
EMBEDDED_QDRANT_PATH = f"{DATA_DIR}/qdrant"
SERVICE_UID = 10001
# The service-key Secret, mounted read-only: kubelet updates the files in place on a
# rotation and the service re-reads them (no restart). Not under CONFIG_DIR: a volume
# mounted inside another volume's mount is fragile.
SERVICE_KEY_DIR = "/var/run/secrets/memorystore/service-key"
SERVICE_KEY_FILE = f"{SERVICE_KEY_DIR}/{names.CURRENT_SERVICE_KEY}"
PREVIOUS_SERVICE_KEY_FILE = f"{SERVICE_KEY_DIR}/{names.PREVIOUS_SERVICE_KEY}"
# The serving certificate (Secret <store>-tls: tls.crt, tls.key), mounted read-only. Kubelet
# updates it in place on renewal and the service reloads it (no restart, so it is not in the
# pod template's checksum).
TLS_DIR = "/var/run/secrets/memorystore/tls"
TLS_CERT_FILE = f"{TLS_DIR}/{names.TLS_CERT}"
TLS_KEY_FILE = f"{TLS_DIR}/{names.TLS_KEY}"
TLS_FILE_MODE = 0o440  # root:fsGroup, readable by the service's group only
# The config file names these variables; the Deployment fills them from Secrets.
ENV_QDRANT_KEY = "QDRANT_API_KEY"
ENV_EMBEDDER_KEY = "EMBEDDER_API_KEY"
ENV_LLM_KEY = "LLM_API_KEY"

# --- inside agent pods ----------------------------------------------------------------------
# Agents mount the client Secret here; client.yaml points at the key file. (Mount the client
# ConfigMap beside it, e.g. /etc/memorystore/client, not at a parent of this directory.)
CLIENT_SECRET_DIR = "/etc/memorystore/secrets"
CLIENT_KEY_FILE = f"{CLIENT_SECRET_DIR}/{names.CLIENT_API_KEY}"
# The client ConfigMap's mount (the middleware's default config path is client.yaml in it);
# its ca.crt is the CA the service's certificate chains to.
CLIENT_CONFIG_DIR = "/etc/memorystore/client"
CLIENT_CA_FILE = f"{CLIENT_CONFIG_DIR}/{names.CA_CERT}"

# --- inside Qdrant pods ---------------------------------------------------------------------
QDRANT_UID = 1000
QDRANT_STORAGE_DIR = "/qdrant/storage"
QDRANT_SNAPSHOTS_DIR = "/qdrant/snapshots"
QDRANT_INIT_DIR = "/qdrant/init"  # Qdrant writes an "initialized" marker at start

RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "privileged": False,
    "readOnlyRootFilesystem": True,
}


@dataclass(frozen=True)
class Owner:
    """The MemoryStore being reconciled."""

    name: str
    namespace: str
    uid: str
    generation: int


@dataclass(frozen=True)
class Images:
    """Default images, from the operator's settings (the Helm chart sets them)."""

    service: str = "ghcr.io/memorystore/memory-service:0.1.0"
    qdrant: str = "qdrant/qdrant:v1.16.1"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Images:
        """MEMORYSTORE_SERVICE_IMAGE / MEMORYSTORE_QDRANT_IMAGE (the chart's values) win."""
        return cls(
            service=env.get("MEMORYSTORE_SERVICE_IMAGE") or cls.service,
            qdrant=env.get("MEMORYSTORE_QDRANT_IMAGE") or cls.qdrant,
        )


@dataclass(frozen=True)
class Keys:
    """The generated keys, created once by the apply layer and kept in the keys Secret.

    For the children, `service_api_key` is the key agents are given: the current key of the
    service-key Secret (`keys.py`), which starts as the keys Secret's and rotates."""

    service_api_key: str
    qdrant_api_key: str


class SpecError(ValueError):
    """A spec the operator cannot realise; the message names the field (a status condition)."""


# --- checks the schema may not have made ----------------------------------------------------

# Kubernetes quantity grammar without a sign: a number, then a binary or decimal SI suffix
# or an exponent ("1Gi", "500m", "1.5", "1e3").
_QUANTITY = re.compile(r"^(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")


def check_spec(owner: Owner, spec: MemoryStoreSpec) -> None:
    """Refuse what cannot be built, naming the field.

    The CRD's CEL rules catch most of this at `kubectl apply`; the builders check again so
    that an older CRD, a direct API write or a unit test can never produce broken children.
    """
    problem = names.name_problem(owner.name)
    if problem:
        raise SpecError(f"metadata.name {problem}")
    vs = spec.vector_store
    if sum(tier is not None for tier in (vs.managed, vs.external, vs.embedded)) != 1:
        raise SpecError(
            "spec.vectorStore: set exactly one of spec.vectorStore.managed, "
            "spec.vectorStore.external or spec.vectorStore.embedded"
        )
    if vs.external is not None:
        _check_url(vs.external.url, "spec.vectorStore.external.url")
    history = spec.history_db
    if history.postgres is not None:
        raise SpecError(
            "spec.historyDb.postgres is not supported yet: the memory service keeps its "
            "history in mem0's SQLite database (a single-writer file on a volume); use "
            "spec.historyDb.sqlite"
        )
    if history.sqlite is None:
        raise SpecError("spec.historyDb: set spec.historyDb.sqlite")
    if vs.embedded is not None and spec.service.replicas > 1:
        raise SpecError(
            f"spec.service.replicas is {spec.service.replicas}, but spec.vectorStore.embedded "
            "runs the engine in the service's process and it holds a single-process lock on "
            "its files: use 0 or 1"
        )
    if spec.service.replicas > 1:
        raise SpecError(
            f"spec.service.replicas is {spec.service.replicas}, but a SQLite history "
            "(spec.historyDb.sqlite) is one writer on a ReadWriteOnce volume: use 0 or 1"
        )
    _check_storage(history.sqlite.storage, "spec.historyDb.sqlite.storage")
    _check_resources(spec.service.resources, "spec.service.resources")
    if vs.managed is not None:
        _check_storage(vs.managed.storage, "spec.vectorStore.managed.storage")
        _check_resources(vs.managed.resources, "spec.vectorStore.managed.resources")


def _check_url(url: str, field: str) -> None:
    parts = urlsplit(url)
    if parts.username or parts.password:
        # It would be written into a ConfigMap (and this message into status): never echo it.
        raise SpecError(
            f"{field} must not contain credentials; put the key in a Secret and name it in "
            "spec.vectorStore.external.apiKeySecretRef"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(f"{field} must be an http:// or https:// URL with a host, not {url!r}")


def _check_quantity(value: str, field: str) -> None:
    if not _QUANTITY.match(value):
        raise SpecError(f"{field} must be a Kubernetes quantity such as 1Gi or 500m, not {value!r}")


def _check_storage(storage: Storage, field: str) -> None:
    _check_quantity(storage.size, f"{field}.size")


def _check_resources(resources: Resources, field: str) -> None:
    for kind, values in (("requests", resources.requests), ("limits", resources.limits)):
        for name, value in values.items():
            _check_quantity(value, f"{field}.{kind}.{name}")


M = TypeVar("M", bound=Model)


def _validated(model: type[M], data: dict[str, Any], field: str) -> M:
    """Validate `data` as `model`; problems become one SpecError naming spec fields."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join([field, *(str(p) for p in err["loc"])])
            problems.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
        raise SpecError("; ".join(problems)) from None


# --- the two config files -------------------------------------------------------------------


def service_config(owner: Owner, spec: MemoryStoreSpec) -> ServiceConfig:
    """The config the memory service runs with: every secret an `{env: VAR}` reference."""
    check_spec(owner, spec)
    vs = spec.vector_store
    vector_store: dict[str, Any] = {"collection": vs.collection}
    if vs.embedded is not None:
        vector_store["embedded"] = {"path": EMBEDDED_QDRANT_PATH}
    elif vs.managed is not None:
        vector_store["server"] = {
            "url": names.qdrant_url(owner.name, owner.namespace),
            "apiKey": {"env": ENV_QDRANT_KEY},
        }
    else:
        assert vs.external is not None
        vector_store["server"] = {"url": vs.external.url}
        if vs.external.api_key_secret_ref is not None:
            vector_store["server"]["apiKey"] = {"env": ENV_QDRANT_KEY}
    embedder = spec.embedder.model_dump(
        by_alias=True, exclude_none=True, mode="json", exclude={"api_key_secret_ref"}
    )
    if spec.embedder.api_key_secret_ref is not None:
        embedder["apiKey"] = {"env": ENV_EMBEDDER_KEY}
    data: dict[str, Any] = {
        "tenant": names.tenant(owner.name, owner.namespace),
        "listen": {"host": "0.0.0.0", "port": names.SERVICE_PORT},
        "dataDir": DATA_DIR,
        "apiKey": {"file": SERVICE_KEY_FILE},
        "previousApiKey": {"file": PREVIOUS_SERVICE_KEY_FILE, "optional": True},
        "vectorStore": vector_store,
        "history": {"path": HISTORY_PATH},
        "embedder": _validated(ServiceEmbedder, embedder, "spec.embedder"),
        "recall": spec.recall,
        "retrieval": spec.retrieval,
    }
    if spec.llm is not None:
        llm = spec.llm.model_dump(
            by_alias=True, exclude_none=True, mode="json", exclude={"api_key_secret_ref"}
        )
        if spec.llm.api_key_secret_ref is not None:
            llm["apiKey"] = {"env": ENV_LLM_KEY}
        data["llm"] = _validated(ServiceLLM, llm, "spec.llm")
    if spec.tls.enabled:
        data["tls"] = {"certFile": TLS_CERT_FILE, "keyFile": TLS_KEY_FILE}
    return _validated(ServiceConfig, data, "spec")


def client_config(owner: Owner, spec: MemoryStoreSpec, ca_cert: str | None = None) -> ClientConfig:
    """What agent pods mount: where the service is and where its key file is, never the key.

    With TLS and a known CA (`ca_cert`, which the client ConfigMap carries as ca.crt) the
    agents verify the service against that CA; with TLS and no CA known (a cert-manager
    issuer whose Secret has no ca.crt) against the system's trusted CAs."""
    check_spec(owner, spec)
    tls = spec.tls.enabled
    return ClientConfig(
        endpoint=names.memory_endpoint(owner.name, owner.namespace, tls=tls),
        tenant=names.tenant(owner.name, owner.namespace),
        api_key={"file": CLIENT_KEY_FILE},
        scope=spec.scope,
        mode=spec.mode,
        recall=spec.recall,
        tls={"caFile": CLIENT_CA_FILE if tls and ca_cert else None},
    )


def _header(owner: Owner) -> str:
    return (
        f"# Rendered by memorystore-operator from MemoryStore {owner.namespace}/{owner.name}.\n"
        "# Edit the MemoryStore, not this file: the operator restores it.\n"
    )


def _yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, allow_unicode=True)


# Left out of the rendered service.yaml: `limits` (the service's own defaults, which the spec
# does not set), `generate` (the operator generates keys, the service never does) and
# `optional` where it is false (the default; only previousApiKey is optional).
_SERVICE_EXCLUDE: dict[str, Any] = {
    "limits": True,
    "api_key": {"generate", "optional"},
    "previous_api_key": {"generate"},
    "vector_store": {"server": {"api_key": {"generate", "optional"}}},
    "embedder": {"api_key": {"generate", "optional"}},
    "llm": {"api_key": {"generate", "optional"}},
}
# The rendered client.yaml holds what the spec decides; agent-side knobs (timeouts,
# fail-open, capture, write permission) keep the middleware's defaults and env toggles.
_CLIENT_INCLUDE = {"endpoint", "tenant", "api_key", "scope", "mode", "recall", "tls"}


def render_service_config(owner: Owner, cfg: ServiceConfig) -> str:
    """service.yaml, by alias, without None; its sha256 rolls the service's pods."""
    data = cfg.model_dump(by_alias=True, exclude_none=True, mode="json", exclude=_SERVICE_EXCLUDE)
    return _header(owner) + _yaml(data)


def render_client_config(owner: Owner, cfg: ClientConfig) -> str:
    """client.yaml, by alias, without None."""
    data = cfg.model_dump(
        by_alias=True,
        exclude_none=True,
        mode="json",
        include=_CLIENT_INCLUDE,
        # `verify` is the agent's own choice (MEMORYSTORE_VERIFY_TLS), never the operator's
        exclude={"api_key": {"generate", "optional"}, "tls": {"verify"}},
    )
    if not data.get("tls"):
        data.pop("tls", None)
    return _header(owner) + _yaml(data)


def config_checksum(text: str) -> str:
    """sha256 of a rendered file: a pod-template annotation, so a config change rolls pods."""
    return hashlib.sha256(text.encode()).hexdigest()


# --- metadata -------------------------------------------------------------------------------


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


def _metadata(owner: Owner, name: str, component: str, owned: bool = True) -> dict[str, Any]:
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


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _resources(resources: Resources) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if resources.requests:
        out["requests"] = dict(sorted(resources.requests.items()))
    if resources.limits:
        out["limits"] = dict(sorted(resources.limits.items()))
    return out


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"key": key, "name": secret}}}


def _ref_env(name: str, ref: SecretKeyRef) -> dict[str, Any]:
    return _secret_env(name, ref.name, ref.key)


def _value_env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _http_probe(
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


def _pod_security(uid: int) -> dict[str, Any]:
    return {
        "fsGroup": uid,
        "fsGroupChangePolicy": "OnRootMismatch",
        "runAsGroup": uid,
        "runAsNonRoot": True,
        "runAsUser": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _placement(node_selector: Mapping[str, str], tolerations: list[Toleration]) -> dict[str, Any]:
    """nodeSelector / tolerations for a pod spec; absent when unset, so a store without
    placement renders (and rolls) exactly as before the fields existed."""
    out: dict[str, Any] = {}
    if node_selector:
        out["nodeSelector"] = dict(sorted(node_selector.items()))
    if tolerations:
        out["tolerations"] = [t.as_pod_toleration() for t in tolerations]
    return out


def _storage_spec(storage: Storage) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storage_class_name:
        spec["storageClassName"] = storage.storage_class_name
    return spec


# --- the generated keys ---------------------------------------------------------------------


def keys_secret(owner: Owner, keys: Keys, owned: bool) -> dict[str, Any]:
    """`<name>-keys`: the service and Qdrant keys. Created once by the apply layer and never
    overwritten (immutable), so the keys — and the data Qdrant protects with one — survive
    every reconcile and operator restart."""
    return _canonical(
        {
            "apiVersion": "v1",
            "data": {
                names.QDRANT_API_KEY: _b64(keys.qdrant_api_key),
                names.SERVICE_API_KEY: _b64(keys.service_api_key),
            },
            "immutable": True,
            "kind": "Secret",
            "metadata": _metadata(
                owner, names.keys_secret_name(owner.name), names.KEYS, owned=owned
            ),
            "type": "Opaque",
        }
    )


def service_key_secret(owner: Owner, state: ServiceKeyState, owned: bool) -> dict[str, Any]:
    """`<name>-service-key`: the keys the memory service accepts, mounted as its files.

    Mutable, unlike the keys Secret: a rotation rewrites it in place (kubelet then updates
    the mounted files and the service re-reads them). The annotations are the rotation's
    bookkeeping (`keys.read_state` reads them back); they never hold a key."""
    data = {names.CURRENT_SERVICE_KEY: _b64(state.current)}
    annotations = {names.SERVICE_KEY_GENERATION_ANNOTATION: str(state.generation)}
    if state.previous is not None:
        data[names.PREVIOUS_SERVICE_KEY] = _b64(state.previous)
        deadline = format_time(state.previous_valid_until)
        if deadline is not None:
            annotations[names.PREVIOUS_KEY_VALID_UNTIL_ANNOTATION] = deadline
    metadata = _metadata(owner, names.service_key_secret_name(owner.name), names.KEYS, owned)
    metadata["annotations"] = annotations
    return _canonical(
        {
            "apiVersion": "v1",
            "data": data,
            "kind": "Secret",
            "metadata": metadata,
            "type": "Opaque",
        }
    )


# --- TLS ------------------------------------------------------------------------------------


def ca_secret(owner: Owner, data: Mapping[str, str], owned: bool) -> dict[str, Any]:
    """`<name>-ca`: the store's private CA (ca.crt, ca.key). Never mounted anywhere: only the
    operator signs with it. It follows deletionPolicy like the keys, so a store re-created
    under Retain keeps the CA its agents already trust."""
    return _canonical(
        {
            "apiVersion": "v1",
            "data": {k: _b64(v) for k, v in sorted(data.items())},
            "kind": "Secret",
            "metadata": _metadata(owner, names.ca_secret_name(owner.name), names.KEYS, owned=owned),
            "type": "Opaque",
        }
    )


def tls_secret(owner: Owner, data: Mapping[str, str]) -> dict[str, Any]:
    """`<name>-tls`: the serving certificate, its key and the CA (kubernetes.io/tls, the
    layout cert-manager writes too). Always owned: it is re-issued from the CA at will."""
    return _canonical(
        {
            "apiVersion": "v1",
            "data": {k: _b64(v) for k, v in sorted(data.items())},
            "kind": "Secret",
            "metadata": _metadata(owner, names.tls_secret_name(owner.name), names.MEMORY_SERVICE),
            "type": "kubernetes.io/tls",
        }
    )


def tls_certificate(owner: Owner, spec: MemoryStoreSpec) -> dict[str, Any]:
    """The cert-manager Certificate for the serving certificate (spec.tls.issuerRef set):
    cert-manager writes the same Secret, names and durations the operator would."""
    tls = spec.tls
    assert tls.issuer_ref is not None
    issuer = tls.issuer_ref
    dns_names = names.memory_dns_names(owner.name, owner.namespace)
    return _canonical(
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": _metadata(owner, names.certificate_name(owner.name), names.MEMORY_SERVICE),
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


# --- managed Qdrant -------------------------------------------------------------------------


def _qdrant_start_script(owner: Owner) -> str:
    """Start Qdrant in distributed mode: pod 0 founds the cluster, the others join it.

    Always distributed (as qdrant-helm), even with one replica, so scaling up later joins
    new peers to the existing data instead of starting independent, empty stores.
    """
    peers = f"{names.qdrant_headless_service_name(owner.name)}.{owner.namespace}.svc"
    first = f"http://{names.qdrant_statefulset_name(owner.name)}-0.{peers}:{names.QDRANT_P2P_PORT}"
    return (
        f'first="{first}"\n'
        'if [ "${HOSTNAME##*-}" = "0" ]; then\n'
        '  exec ./qdrant --uri "$first"\n'
        "fi\n"
        f'exec ./qdrant --bootstrap "$first" --uri "http://$HOSTNAME.{peers}:{names.QDRANT_P2P_PORT}"\n'
    )


def qdrant_statefulset(owner: Owner, spec: MemoryStoreSpec, images: Images) -> dict[str, Any]:
    managed = spec.vector_store.managed
    assert managed is not None
    store = owner.name
    selector = names.selector_labels(store, names.QDRANT)
    container = {
        "args": [_qdrant_start_script(owner)],
        "command": ["/bin/sh", "-c"],
        "env": [
            _value_env("QDRANT_INIT_FILE_PATH", f"{QDRANT_INIT_DIR}/.qdrant-initialized"),
            _value_env("QDRANT__CLUSTER__ENABLED", "true"),
            _value_env("QDRANT__CLUSTER__P2P__PORT", str(names.QDRANT_P2P_PORT)),
            _secret_env(
                "QDRANT__SERVICE__API_KEY", names.keys_secret_name(store), names.QDRANT_API_KEY
            ),
            _value_env("QDRANT__STORAGE__SNAPSHOTS_PATH", QDRANT_SNAPSHOTS_DIR),
            _value_env("QDRANT__STORAGE__STORAGE_PATH", QDRANT_STORAGE_DIR),
            _value_env("QDRANT__TELEMETRY_DISABLED", "true"),
        ],
        "image": managed.image or images.qdrant,
        "imagePullPolicy": "IfNotPresent",
        # /readyz and /livez answer without the API key (Qdrant whitelists them).
        "livenessProbe": _http_probe("/livez", "http", period=10, timeout=3, failures=6),
        "name": "qdrant",
        "ports": [
            {"containerPort": names.QDRANT_HTTP_PORT, "name": "http", "protocol": "TCP"},
            {"containerPort": names.QDRANT_GRPC_PORT, "name": "grpc", "protocol": "TCP"},
            {"containerPort": names.QDRANT_P2P_PORT, "name": "p2p", "protocol": "TCP"},
        ],
        "readinessProbe": _http_probe("/readyz", "http", period=5, timeout=3, failures=3),
        "resources": _resources(managed.resources),
        "securityContext": RESTRICTED_CONTAINER,
        # Loading large collections from disk can take minutes: up to 10 before liveness.
        "startupProbe": _http_probe("/livez", "http", period=5, timeout=3, failures=120),
        "volumeMounts": [
            {"mountPath": QDRANT_STORAGE_DIR, "name": "storage"},
            {"mountPath": QDRANT_SNAPSHOTS_DIR, "name": "snapshots"},
            {"mountPath": QDRANT_INIT_DIR, "name": "init"},
            {"mountPath": "/tmp", "name": "tmp"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(owner, names.qdrant_statefulset_name(store), names.QDRANT),
        "spec": {
            # Distributed Qdrant is ready only with its peers: start them together.
            "podManagementPolicy": "Parallel",
            # The volumes follow deletionPolicy when the StatefulSet goes; never on scale-down.
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Delete"
                if spec.deletion_policy == DeletionPolicy.DELETE
                else "Retain",
                "whenScaled": "Retain",
            },
            "replicas": 0 if spec.suspend else managed.replicas,
            "selector": {"matchLabels": selector},
            "serviceName": names.qdrant_headless_service_name(store),
            "template": {
                "metadata": {"labels": names.labels(store, names.QDRANT)},
                "spec": {
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "podAffinityTerm": {
                                        "labelSelector": {"matchLabels": selector},
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                    "weight": 100,
                                }
                            ]
                        }
                    },
                    "automountServiceAccountToken": False,
                    "containers": [container],
                    "enableServiceLinks": False,
                    "securityContext": _pod_security(QDRANT_UID),
                    **_placement(managed.node_selector, managed.tolerations),
                    "volumes": [
                        {"emptyDir": {}, "name": "snapshots"},
                        {"emptyDir": {}, "name": "init"},
                        {"emptyDir": {}, "name": "tmp"},
                    ],
                },
            },
            "updateStrategy": {"type": "RollingUpdate"},
            # Immutable once created: a size change must be made on the PVCs themselves.
            "volumeClaimTemplates": [
                {
                    "metadata": {"labels": names.labels(store, names.QDRANT), "name": "storage"},
                    "spec": _storage_spec(managed.storage),
                }
            ],
        },
    }


def qdrant_headless_service(owner: Owner) -> dict[str, Any]:
    """Stable per-pod DNS for the peers; not-ready pods are published so they can join."""
    store = owner.name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, names.qdrant_headless_service_name(store), names.QDRANT),
        "spec": {
            "clusterIP": "None",
            "ports": [
                _service_port("http", names.QDRANT_HTTP_PORT),
                _service_port("grpc", names.QDRANT_GRPC_PORT),
                _service_port("p2p", names.QDRANT_P2P_PORT),
            ],
            "publishNotReadyAddresses": True,
            "selector": names.selector_labels(store, names.QDRANT),
        },
    }


def qdrant_service(owner: Owner) -> dict[str, Any]:
    """The address the memory service uses (ready pods only)."""
    store = owner.name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, names.qdrant_service_name(store), names.QDRANT),
        "spec": {
            "ports": [
                _service_port("http", names.QDRANT_HTTP_PORT),
                _service_port("grpc", names.QDRANT_GRPC_PORT),
            ],
            "selector": names.selector_labels(store, names.QDRANT),
            "type": "ClusterIP",
        },
    }


def _service_port(name: str, port: int) -> dict[str, Any]:
    return {"name": name, "port": port, "protocol": "TCP", "targetPort": name}


# --- the memory service ---------------------------------------------------------------------


def memory_config_map(owner: Owner, config_text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "data": {names.SERVICE_CONFIG_FILE: config_text},
        "kind": "ConfigMap",
        "metadata": _metadata(
            owner, names.memory_config_map_name(owner.name), names.MEMORY_SERVICE
        ),
    }


def memory_data_claim(owner: Owner, spec: MemoryStoreSpec) -> dict[str, Any]:
    """The SQLite history, idempotency keys and, with spec.vectorStore.embedded, the engine's
    files (ReadWriteOnce: one pod at a time)."""
    sqlite = spec.history_db.sqlite
    assert sqlite is not None
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(
            owner,
            names.memory_data_claim_name(owner.name),
            names.MEMORY_SERVICE,
            owned=owns_data(spec),
        ),
        "spec": _storage_spec(sqlite.storage),
    }


def _memory_env(owner: Owner, spec: MemoryStoreSpec) -> list[dict[str, Any]]:
    keys = names.keys_secret_name(owner.name)
    env = [  # the service key is a mounted file (SERVICE_KEY_DIR), so it can rotate
        _value_env("HOME", "/tmp"),  # the root filesystem is read-only
        _value_env("MEM0_TELEMETRY", "False"),
    ]
    vs = spec.vector_store
    if vs.managed is not None:
        env.append(_secret_env(ENV_QDRANT_KEY, keys, names.QDRANT_API_KEY))
    elif vs.external is not None and vs.external.api_key_secret_ref is not None:
        env.append(_ref_env(ENV_QDRANT_KEY, vs.external.api_key_secret_ref))
    if spec.embedder.api_key_secret_ref is not None:
        env.append(_ref_env(ENV_EMBEDDER_KEY, spec.embedder.api_key_secret_ref))
    if spec.llm is not None and spec.llm.api_key_secret_ref is not None:
        env.append(_ref_env(ENV_LLM_KEY, spec.llm.api_key_secret_ref))
    return sorted(env, key=lambda e: e["name"])


def _memory_port(spec: MemoryStoreSpec) -> str:
    """The service's port name: what it speaks, for people and for appProtocol-aware tools."""
    return "https" if spec.tls.enabled else "http"


def _tls_mounts(spec: MemoryStoreSpec) -> list[dict[str, Any]]:
    return [{"mountPath": TLS_DIR, "name": "tls", "readOnly": True}] if spec.tls.enabled else []


def _tls_volumes(owner: Owner, spec: MemoryStoreSpec) -> list[dict[str, Any]]:
    """The serving certificate and key only (ca.crt is for agents). Whole files, no subPath:
    kubelet then replaces them in place on renewal and the service reloads them."""
    if not spec.tls.enabled:
        return []
    return [
        {
            "name": "tls",
            "secret": {
                "defaultMode": TLS_FILE_MODE,
                "items": [
                    {"key": names.TLS_CERT, "path": names.TLS_CERT},
                    {"key": names.TLS_KEY, "path": names.TLS_KEY},
                ],
                "secretName": names.tls_secret_name(owner.name),
            },
        }
    ]


def memory_deployment(
    owner: Owner, spec: MemoryStoreSpec, images: Images, config_text: str
) -> dict[str, Any]:
    store = owner.name
    port, https = _memory_port(spec), spec.tls.enabled
    container = {
        "args": ["serve", "--config", SERVICE_CONFIG_PATH],
        "env": _memory_env(owner, spec),
        "image": spec.service.image or images.service,
        "imagePullPolicy": "IfNotPresent",
        "livenessProbe": _http_probe(
            "/healthz", port, period=10, timeout=5, failures=6, https=https
        ),
        "name": "memory-service",
        "ports": [{"containerPort": names.SERVICE_PORT, "name": port, "protocol": "TCP"}],
        # /readyz checks Qdrant and the history DB itself, within 5 s.
        "readinessProbe": _http_probe(
            "/readyz", port, period=10, timeout=6, failures=3, https=https
        ),
        "resources": _resources(spec.service.resources),
        "securityContext": RESTRICTED_CONTAINER,
        # The embedder loads before the server listens: allow up to 5 minutes.
        "startupProbe": _http_probe(
            "/healthz", port, period=5, timeout=3, failures=60, https=https
        ),
        "volumeMounts": [
            {"mountPath": CONFIG_DIR, "name": "config", "readOnly": True},
            {"mountPath": DATA_DIR, "name": "data"},
            {"mountPath": SERVICE_KEY_DIR, "name": "service-key", "readOnly": True},
            *_tls_mounts(spec),
            {"mountPath": "/tmp", "name": "tmp"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(owner, names.memory_deployment_name(store), names.MEMORY_SERVICE),
        "spec": {
            "replicas": 0 if spec.suspend else spec.service.replicas,
            "selector": {"matchLabels": names.selector_labels(store, names.MEMORY_SERVICE)},
            # The data volume is ReadWriteOnce (and an embedded engine locks its files): the
            # old pod must let go before the new starts.
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {
                    # Only the rendered config: the keys Secret never changes after creation,
                    # and a rotated service key or a renewed certificate is re-read from its
                    # volume (no restart).
                    "annotations": {names.CONFIG_CHECKSUM_ANNOTATION: config_checksum(config_text)},
                    "labels": names.labels(store, names.MEMORY_SERVICE),
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "containers": [container],
                    "enableServiceLinks": False,
                    "securityContext": _pod_security(SERVICE_UID),
                    **_placement(spec.service.node_selector, spec.service.tolerations),
                    "volumes": [
                        {
                            "configMap": {"name": names.memory_config_map_name(store)},
                            "name": "config",
                        },
                        {
                            "name": "data",
                            "persistentVolumeClaim": {
                                "claimName": names.memory_data_claim_name(store)
                            },
                        },
                        {
                            "name": "service-key",
                            # Whole Secret, no subPath: kubelet then updates the files in
                            # place; previous-api-key exists only during a grace period.
                            "secret": {
                                "defaultMode": 0o440,
                                "secretName": names.service_key_secret_name(store),
                            },
                        },
                        *_tls_volumes(owner, spec),
                        {"emptyDir": {}, "name": "tmp"},
                    ],
                },
            },
        },
    }


def memory_service(owner: Owner, spec: MemoryStoreSpec) -> dict[str, Any]:
    store = owner.name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, names.memory_service_name(store), names.MEMORY_SERVICE),
        "spec": {
            "ports": [_service_port(_memory_port(spec), names.SERVICE_PORT)],
            "selector": names.selector_labels(store, names.MEMORY_SERVICE),
            "type": "ClusterIP",
        },
    }


# --- what agent pods mount ------------------------------------------------------------------


def client_config_map(owner: Owner, config_text: str, ca_cert: str | None = None) -> dict[str, Any]:
    """client.yaml, and the CA that signs the service's certificate (public: ca.crt)."""
    data = {names.CLIENT_CONFIG_FILE: config_text}
    if ca_cert:
        data[names.CA_CERT] = ca_cert
    return {
        "apiVersion": "v1",
        "data": data,
        "kind": "ConfigMap",
        "metadata": _metadata(owner, names.client_config_map_name(owner.name), names.CLIENT),
    }


def client_secret(owner: Owner, keys: Keys) -> dict[str, Any]:
    """The current service key alone: agent pods mount this, never the keys Secret (Qdrant's
    key). After a rotation it holds the new key; agents re-read the mounted file."""
    return {
        "apiVersion": "v1",
        "data": {names.CLIENT_API_KEY: _b64(keys.service_api_key)},
        "kind": "Secret",
        "metadata": _metadata(owner, names.client_secret_name(owner.name), names.CLIENT),
        "type": "Opaque",
    }


# --- network policies -----------------------------------------------------------------------


def _tcp(port: int) -> dict[str, Any]:
    return {"port": port, "protocol": "TCP"}


def qdrant_network_policy(owner: Owner) -> dict[str, Any]:
    """Only this store's memory service reaches Qdrant's API; only its peers reach p2p."""
    store = owner.name
    qdrant = {"matchLabels": names.selector_labels(store, names.QDRANT)}
    service = {"matchLabels": names.selector_labels(store, names.MEMORY_SERVICE)}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(owner, names.qdrant_network_policy_name(store), names.QDRANT),
        "spec": {
            "ingress": [
                {
                    "from": [{"podSelector": service}],
                    "ports": [_tcp(names.QDRANT_HTTP_PORT), _tcp(names.QDRANT_GRPC_PORT)],
                },
                {"from": [{"podSelector": qdrant}], "ports": [_tcp(names.QDRANT_P2P_PORT)]},
            ],
            "podSelector": qdrant,
            "policyTypes": ["Ingress"],
        },
    }


def memory_network_policy(owner: Owner, spec: MemoryStoreSpec) -> dict[str, Any]:
    """Only this store's agent pods reach the memory service, on its one port.

    Admitted: pods labelled `memorystore.dev/client: <store>` (unique to the store), plus
    the pods `spec.allowedAgentPods` matches. A podSelector without a namespaceSelector
    matches pods of this namespace only, so no pod of another namespace is ever admitted.
    """
    store = owner.name
    peers = [{"podSelector": {"matchLabels": s}} for s in admitted_selectors(store, spec)]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(owner, names.memory_network_policy_name(store), names.MEMORY_SERVICE),
        "spec": {
            "ingress": [{"from": peers, "ports": [_tcp(names.SERVICE_PORT)]}],
            "podSelector": {"matchLabels": names.selector_labels(store, names.MEMORY_SERVICE)},
            "policyTypes": ["Ingress"],
        },
    }


# --- everything -----------------------------------------------------------------------------


def desired_children(
    owner: Owner, spec: MemoryStoreSpec, images: Images, keys: Keys, *, ca_cert: str | None = None
) -> list[dict[str, Any]]:
    """Every child but the keys Secret, in apply order: network policies before the pods
    they protect, Services before the StatefulSet that names one, config and volume before
    the Deployment that mounts them. Raises SpecError for a spec that cannot be built.

    `ca_cert` is the CA agents must trust (the apply layer reads it from the TLS Secrets);
    the certificate Secrets themselves are written by the apply layer, not applied here."""
    service_text = render_service_config(owner, service_config(owner, spec))
    client_text = render_client_config(owner, client_config(owner, spec, ca_cert))
    managed = spec.vector_store.managed is not None
    children: list[dict[str, Any]] = []
    if managed:
        children.append(qdrant_network_policy(owner))
    children.append(memory_network_policy(owner, spec))
    if managed:
        children += [
            qdrant_headless_service(owner),
            qdrant_service(owner),
            qdrant_statefulset(owner, spec, images),
        ]
    children += [
        memory_config_map(owner, service_text),
        memory_data_claim(owner, spec),
        memory_deployment(owner, spec, images, service_text),
        memory_service(owner, spec),
        client_config_map(owner, client_text, ca_cert if spec.tls.enabled else None),
        client_secret(owner, keys),
    ]
    return [_canonical(child) for child in children]


def expected_workloads(owner: Owner, spec: MemoryStoreSpec) -> list[tuple[str, str]]:
    """(kind, name) of the workloads that must report ready replicas for Ready."""
    check_spec(owner, spec)
    workloads = []
    if spec.vector_store.managed is not None:
        workloads.append(("StatefulSet", names.qdrant_statefulset_name(owner.name)))
    workloads.append(("Deployment", names.memory_deployment_name(owner.name)))
    return workloads


def _canonical(value: Any) -> Any:
    """Sorted keys at every level (list order is meaningful and kept), and no shared
    sub-dicts between children, so callers may mutate what they get."""
    if isinstance(value, dict):
        return {k: _canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value
