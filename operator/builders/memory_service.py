"""The memory service: its rendered config, its data volume, its Deployment and Service."""

from __future__ import annotations

from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.common import (
    RESTRICTED_CONTAINER,
    container_resources,
    http_probe,
    metadata,
    owns_data,
    placement,
    pod_security,
    service_port,
    storage_spec,
    value_env,
)
from memorystore.operator.builders.configs import config_checksum
from memorystore.operator.builders.disruption import spread_over_nodes
from memorystore.operator.builders.model import Images, Owner, Restore
from memorystore.operator.builders.paths import (
    BACKUP_DIR,
    BACKUP_KEY_DIR,
    BACKUP_SIGNING_KEY_FILE,
    CONFIG_DIR,
    DATA_DIR,
    DATA_EMPTY_DIR_SIZE_LIMIT,
    RESTORE_DIR,
    SERVICE_CONFIG_PATH,
    SERVICE_KEY_DIR,
    SERVICE_UID,
    TLS_DIR,
    TLS_FILE_MODE,
    TMP_SIZE_LIMIT,
)
from memorystore.operator.builders.secret_files import (
    secret_mounts,
    secret_volumes,
    service_secret_files,
)
from memorystore.spec import MemoryStoreSpec


def memory_config_map(owner: Owner, config_text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "data": {names.SERVICE_CONFIG_FILE: config_text},
        "kind": "ConfigMap",
        "metadata": metadata(owner, names.memory_config_map_name(owner.name), names.MEMORY_SERVICE),
    }


def memory_data_claim(owner: Owner, spec: MemoryStoreSpec) -> dict[str, Any]:
    """The SQLite history, idempotency keys and, with spec.vectorStore.embedded, the engine's
    files (ReadWriteOnce: one pod at a time). Only with spec.historyDb.sqlite: with
    PostgreSQL the service keeps nothing durable in its data directory."""
    sqlite = spec.history_db.sqlite
    assert sqlite is not None
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(
            owner,
            names.memory_data_claim_name(owner.name),
            names.MEMORY_SERVICE,
            owned=owns_data(spec),
        ),
        "spec": storage_spec(sqlite.storage),
    }


def _memory_env() -> list[dict[str, Any]]:
    """No secret here: every secret is a mounted file (secret_files.py, SERVICE_KEY_DIR)."""
    return [
        value_env("HOME", "/tmp"),  # the root filesystem is read-only
        value_env("MEM0_TELEMETRY", "False"),
    ]


def _data_volume(owner: Owner, spec: MemoryStoreSpec) -> dict[str, Any]:
    """The service's data directory: the claim with a SQLite history. With PostgreSQL an
    emptyDir: what the service still writes there (mem0's own directory) is rebuilt at
    start-up, and the models are in the image."""
    if spec.history_db.postgres is not None:
        return {"emptyDir": {"sizeLimit": DATA_EMPTY_DIR_SIZE_LIMIT}, "name": "data"}
    return {
        "name": "data",
        "persistentVolumeClaim": {"claimName": names.memory_data_claim_name(owner.name)},
    }


def _strategy(spec: MemoryStoreSpec) -> dict[str, Any]:
    """How a new revision replaces the pods.

    SQLite history: Recreate. The data volume is ReadWriteOnce (and an embedded engine locks
    its files): the old pod must let go before the new one starts.

    PostgreSQL history: RollingUpdate, one new pod at a time (maxSurge 1) and none taken away
    before its replacement is ready (maxUnavailable 0), so a config change or an upgrade
    never leaves the store without a ready replica, even with one. One surge pod at a time
    bounds what a rollout adds: one more embedder in memory and one more replica's pooled
    connections to the database. Old and new pods serve side by side meanwhile, through the
    state they share in the database."""
    if spec.history_db.postgres is None:
        return {"type": "Recreate"}
    return {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}, "type": "RollingUpdate"}


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


BACKUP_VOLUME = "backups"
BACKUP_KEY_VOLUME = "backup-key"
RESTORE_VOLUME = "restore"
RESTORE_CONTAINER = "restore"


def _backup_parts(
    store: str, backup_claim: str | None, restore: Restore | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(service mounts, restore-only mounts, volumes) for the backup target and a restore.

    The target is mounted only when its claim exists (`backup_claim`), so a missing claim
    never keeps the service from starting. A backup on the store's own target is read
    through the same volume (a claim mounted once per pod). The backup key (the service
    signs with it, the restore verifies with it) is mounted where it is used."""
    mounts: list[dict[str, Any]] = []
    restore_mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    key_mount = {"mountPath": BACKUP_KEY_DIR, "name": BACKUP_KEY_VOLUME, "readOnly": True}
    if backup_claim is not None or restore is not None:
        volumes.append(
            {
                "name": BACKUP_KEY_VOLUME,
                "secret": {"defaultMode": 0o440, "secretName": names.backup_key_secret_name(store)},
            }
        )
        (mounts if backup_claim is not None else restore_mounts).append(key_mount)
    if backup_claim is not None:
        mounts.append({"mountPath": BACKUP_DIR, "name": BACKUP_VOLUME})
        volumes.append(
            {"name": BACKUP_VOLUME, "persistentVolumeClaim": {"claimName": backup_claim}}
        )
    if restore is not None:
        shared = restore.claim == backup_claim
        name = BACKUP_VOLUME if shared else RESTORE_VOLUME
        restore_mounts.append({"mountPath": RESTORE_DIR, "name": name, "readOnly": True})
        if not shared:
            volumes.append(
                {
                    "name": RESTORE_VOLUME,
                    "persistentVolumeClaim": {"claimName": restore.claim, "readOnly": True},
                }
            )
    return mounts, restore_mounts, volumes


def restore_container(
    service: dict[str, Any],
    restore: Restore,
    mounts: list[dict[str, Any]],
    trust_unsigned: bool = False,
) -> dict[str, Any]:
    """The init container that restores the backup into the store's empty data before the
    service starts: the service's image, env and mounts, plus the backup read-only and the
    backup key it verifies the backup's signature with. The CLI refuses an unsigned (unless
    `trust_unsigned`), corrupt or mismatched backup or a non-empty store before writing
    anything, and re-running it on the store it restored is a no-op, so a restarted pod
    starts normally. Its error output becomes the termination message the operator reports."""
    return {
        "args": [
            "restore",
            "--config",
            SERVICE_CONFIG_PATH,
            "--from",
            f"{RESTORE_DIR}/{restore.path}",
            "--key",
            BACKUP_SIGNING_KEY_FILE,
            *(["--trust-unsigned"] if trust_unsigned else []),
        ],
        "env": service["env"],
        "image": service["image"],
        "imagePullPolicy": service["imagePullPolicy"],
        "name": RESTORE_CONTAINER,
        "resources": service["resources"],
        "securityContext": RESTRICTED_CONTAINER,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [*service["volumeMounts"], *mounts],
    }


def memory_deployment(
    owner: Owner,
    spec: MemoryStoreSpec,
    images: Images,
    config_text: str,
    *,
    backup_claim: str | None = None,
    restore: Restore | None = None,
) -> dict[str, Any]:
    """The memory service. `backup_claim`: spec.backup.volume's claim, when it exists
    (mounted at /backups); `restore`: a backup to restore first (an init container)."""
    store = owner.name
    port, https = _memory_port(spec), spec.tls.enabled
    secret_files = service_secret_files(owner, spec)
    backup_mounts, restore_mounts, backup_volumes = _backup_parts(store, backup_claim, restore)
    container = {
        "args": ["serve", "--config", SERVICE_CONFIG_PATH],
        "env": _memory_env(),
        "image": spec.service.image or images.service,
        "imagePullPolicy": "IfNotPresent",
        "livenessProbe": http_probe(
            "/healthz", port, period=10, timeout=5, failures=6, https=https
        ),
        "name": "memory-service",
        "ports": [{"containerPort": names.SERVICE_PORT, "name": port, "protocol": "TCP"}],
        # /readyz checks Qdrant and the history DB itself, within 5 s.
        "readinessProbe": http_probe(
            "/readyz", port, period=10, timeout=6, failures=3, https=https
        ),
        "resources": container_resources(spec.service.resources),
        "securityContext": RESTRICTED_CONTAINER,
        # The embedder loads before the server listens: allow up to 5 minutes.
        "startupProbe": http_probe("/healthz", port, period=5, timeout=3, failures=60, https=https),
        # A service that cannot start (e.g. its vector store unreachable) says why in its
        # last log line: the termination message the operator reports (readiness.py).
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"mountPath": CONFIG_DIR, "name": "config", "readOnly": True},
            {"mountPath": DATA_DIR, "name": "data"},
            {"mountPath": SERVICE_KEY_DIR, "name": "service-key", "readOnly": True},
            *_tls_mounts(spec),
            *secret_mounts(secret_files),
            {"mountPath": "/tmp", "name": "tmp"},
            *backup_mounts,
        ],
    }
    trust = spec.restore is not None and spec.restore.trust_unsigned
    init = [restore_container(container, restore, restore_mounts, trust)] if restore else []
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(owner, names.memory_deployment_name(store), names.MEMORY_SERVICE),
        "spec": {
            "replicas": 0 if spec.suspend else spec.service.replicas,
            "selector": {"matchLabels": names.selector_labels(store, names.MEMORY_SERVICE)},
            "strategy": _strategy(spec),
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
                    **({"initContainers": init} if init else {}),
                    "securityContext": pod_security(SERVICE_UID),
                    **placement(spec.service.node_selector, spec.service.tolerations),
                    **spread_over_nodes(store, names.MEMORY_SERVICE, spec.service.replicas),
                    "volumes": [
                        {
                            "configMap": {"name": names.memory_config_map_name(store)},
                            "name": "config",
                        },
                        _data_volume(owner, spec),
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
                        *secret_volumes(secret_files),
                        {"emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}, "name": "tmp"},
                        *backup_volumes,
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
        "metadata": metadata(owner, names.memory_service_name(store), names.MEMORY_SERVICE),
        "spec": {
            "ports": [service_port(_memory_port(spec), names.SERVICE_PORT)],
            "selector": names.selector_labels(store, names.MEMORY_SERVICE),
            "type": "ClusterIP",
        },
    }
