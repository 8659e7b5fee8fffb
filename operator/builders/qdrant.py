"""Managed Qdrant (spec.vectorStore.managed): its StatefulSet, the two Services in front, and
the config file that carries its API key and TLS settings (a Secret mounted as a file: Qdrant
reads settings from `--config-path` files or QDRANT__* variables, and a variable would show
the key). With TLS (the default) REST, gRPC and the peer port serve `<name>-qdrant-tls`."""

from __future__ import annotations

import json
from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.common import (
    RESTRICTED_CONTAINER,
    b64,
    container_resources,
    http_probe,
    metadata,
    placement,
    pod_security,
    service_port,
    storage_spec,
    value_env,
)
from memorystore.operator.builders.disruption import spread_over_nodes
from memorystore.operator.builders.model import Images, Keys, Owner
from memorystore.operator.builders.paths import (
    QDRANT_CERT_TTL_SECONDS,
    QDRANT_CONFIG_DIR,
    QDRANT_CONFIG_FILE,
    QDRANT_INIT_DIR,
    QDRANT_INIT_SIZE_LIMIT,
    QDRANT_SNAPSHOTS_DIR,
    QDRANT_STORAGE_DIR,
    QDRANT_TLS_DIR,
    QDRANT_TMP_SIZE_LIMIT,
    QDRANT_UID,
    SECRET_FILE_MODE,
)
from memorystore.spec import DeletionPolicy, MemoryStoreSpec


def _qdrant_start_script(owner: Owner, tls: bool) -> str:
    """Start Qdrant in distributed mode: pod 0 founds the cluster, the others join it.

    Always distributed (as qdrant-helm), even with one replica, so scaling up later joins
    new peers to the existing data instead of starting independent, empty stores. With TLS
    the peers' URIs are https (the peer port serves the store's certificate too).

    A joining peer with no Raft state yet waits (up to 5 minutes) until pod 0's name resolves
    and, where the image has bash, its peer port accepts a connection: Qdrant 1.18 tries its
    bootstrap peer once and panics otherwise, and the pods start together (Parallel), so
    without the wait peers 1 and 2 crash-loop with back-offs until pod 0 is up. A peer with
    state never waits: it rejoins from the peers it knows, pod 0 up or not.
    """
    scheme = "https" if tls else "http"
    peers = f"{names.qdrant_headless_service_name(owner.name)}.{owner.namespace}.svc"
    first_host = f"{names.qdrant_statefulset_name(owner.name)}-0.{peers}"
    port = names.QDRANT_P2P_PORT
    self_uri = f"{scheme}://$HOSTNAME.{peers}:{port}"
    qdrant = f"./qdrant --config-path {QDRANT_CONFIG_FILE}"
    return (
        f'first="{first_host}"\n'
        'if [ "${HOSTNAME##*-}" = "0" ]; then\n'
        f'  exec {qdrant} --uri "{scheme}://$first:{port}"\n'
        "fi\n"
        f'if [ ! -e "{QDRANT_STORAGE_DIR}/raft_state.json" ]; then\n'
        "  n=0\n"
        '  until getent hosts "$first" >/dev/null && { ! command -v bash >/dev/null ||\n'
        f'    timeout 3 bash -c ": </dev/tcp/$first/{port}" 2>/dev/null; }}; do\n'
        '    n=$((n + 1)); [ "$n" -ge 300 ] && break; sleep 1\n'
        "  done\n"
        "fi\n"
        f'exec {qdrant} --bootstrap "{scheme}://$first:{port}" --uri "{self_uri}"\n'
    )


def qdrant_settings(keys: Keys, tls: bool) -> dict[str, Any]:
    """What Qdrant's config file holds: the API key and, with TLS, the certificate files of
    `<name>-qdrant-tls` on REST, gRPC and the peer port (peers verify each other against the
    store's CA, both ways), re-read every QDRANT_CERT_TTL_SECONDS so a renewal needs no
    restart."""
    settings: dict[str, Any] = {"service": {"api_key": keys.qdrant_api_key}}
    if tls:
        settings["service"]["enable_tls"] = True
        settings["cluster"] = {"p2p": {"enable_tls": True}}
        settings["tls"] = {
            "cert": f"{QDRANT_TLS_DIR}/{names.TLS_CERT}",
            "key": f"{QDRANT_TLS_DIR}/{names.TLS_KEY}",
            "ca_cert": f"{QDRANT_TLS_DIR}/{names.CA_CERT}",
            "cert_ttl": QDRANT_CERT_TTL_SECONDS,
        }
    return settings


def qdrant_config_secret(owner: Owner, keys: Keys, spec: MemoryStoreSpec) -> dict[str, Any]:
    """Qdrant's config file (`qdrant_settings`), for `--config-path`.

    Derived from the keys Secret, which never changes, and spec.vectorStore.managed.tls;
    owned by the store in every deletionPolicy (the keys Secret is what holds the data's
    key)."""
    managed = spec.vector_store.managed
    assert managed is not None
    config = json.dumps(qdrant_settings(keys, managed.tls), sort_keys=True)
    return {
        "apiVersion": "v1",
        "data": {names.QDRANT_CONFIG_FILE: b64(config + "\n")},  # JSON is YAML
        "kind": "Secret",
        "metadata": metadata(owner, names.qdrant_config_secret_name(owner.name), names.QDRANT),
        "type": "Opaque",
    }


def qdrant_statefulset(owner: Owner, spec: MemoryStoreSpec, images: Images) -> dict[str, Any]:
    managed = spec.vector_store.managed
    assert managed is not None
    store = owner.name
    selector = names.selector_labels(store, names.QDRANT)
    tls = managed.tls
    container = {
        "args": [_qdrant_start_script(owner, tls)],
        "command": ["/bin/sh", "-c"],
        "env": [
            value_env("QDRANT_INIT_FILE_PATH", f"{QDRANT_INIT_DIR}/.qdrant-initialized"),
            value_env("QDRANT__CLUSTER__ENABLED", "true"),
            value_env("QDRANT__CLUSTER__P2P__PORT", str(names.QDRANT_P2P_PORT)),
            value_env("QDRANT__STORAGE__SNAPSHOTS_PATH", QDRANT_SNAPSHOTS_DIR),
            value_env("QDRANT__STORAGE__STORAGE_PATH", QDRANT_STORAGE_DIR),
            value_env("QDRANT__TELEMETRY_DISABLED", "true"),
        ],
        "image": managed.image or images.qdrant,
        "imagePullPolicy": "IfNotPresent",
        # /readyz and /livez answer without the API key (Qdrant whitelists them).
        "livenessProbe": http_probe("/livez", "http", period=10, timeout=3, failures=6, https=tls),
        "name": "qdrant",
        "ports": [
            {"containerPort": names.QDRANT_HTTP_PORT, "name": "http", "protocol": "TCP"},
            {"containerPort": names.QDRANT_GRPC_PORT, "name": "grpc", "protocol": "TCP"},
            {"containerPort": names.QDRANT_P2P_PORT, "name": "p2p", "protocol": "TCP"},
        ],
        "readinessProbe": http_probe("/readyz", "http", period=5, timeout=3, failures=3, https=tls),
        "resources": container_resources(managed.resources),
        "securityContext": RESTRICTED_CONTAINER,
        # Loading large collections from disk can take minutes: up to 10 before liveness.
        "startupProbe": http_probe("/livez", "http", period=5, timeout=3, failures=120, https=tls),
        "volumeMounts": [
            {"mountPath": QDRANT_STORAGE_DIR, "name": "storage"},
            # Snapshots on the same claim (a directory beside Qdrant's own), so they survive
            # the pod; a second volume claim template cannot be added to a StatefulSet.
            {"mountPath": QDRANT_SNAPSHOTS_DIR, "name": "storage", "subPath": "snapshots"},
            {"mountPath": QDRANT_INIT_DIR, "name": "init"},
            {"mountPath": "/tmp", "name": "tmp"},
            {"mountPath": QDRANT_CONFIG_DIR, "name": "config", "readOnly": True},
            *([{"mountPath": QDRANT_TLS_DIR, "name": "tls", "readOnly": True}] if tls else []),
        ],
    }
    tls_volume = {
        "name": "tls",
        "secret": {
            "defaultMode": SECRET_FILE_MODE,
            "secretName": names.qdrant_tls_secret_name(store),
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(owner, names.qdrant_statefulset_name(store), names.QDRANT),
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
                "metadata": {
                    # Qdrant reads its config file at start only: switching TLS rolls the pods
                    "annotations": {names.QDRANT_TLS_ANNOTATION: str(tls).lower()},
                    "labels": names.labels(store, names.QDRANT),
                },
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
                    "securityContext": pod_security(QDRANT_UID),
                    **placement(managed.node_selector, managed.tolerations),
                    **spread_over_nodes(store, names.QDRANT, managed.replicas),
                    "volumes": [
                        {"emptyDir": {"sizeLimit": QDRANT_INIT_SIZE_LIMIT}, "name": "init"},
                        {"emptyDir": {"sizeLimit": QDRANT_TMP_SIZE_LIMIT}, "name": "tmp"},
                        {
                            "name": "config",
                            "secret": {
                                "defaultMode": SECRET_FILE_MODE,
                                "secretName": names.qdrant_config_secret_name(store),
                            },
                        },
                        *([tls_volume] if tls else []),
                    ],
                },
            },
            "updateStrategy": {"type": "RollingUpdate"},
            # Immutable once created: a size change must be made on the PVCs themselves.
            "volumeClaimTemplates": [
                {
                    "metadata": {"labels": names.labels(store, names.QDRANT), "name": "storage"},
                    "spec": storage_spec(managed.storage),
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
        "metadata": metadata(owner, names.qdrant_headless_service_name(store), names.QDRANT),
        "spec": {
            "clusterIP": "None",
            "ports": [
                service_port("http", names.QDRANT_HTTP_PORT),
                service_port("grpc", names.QDRANT_GRPC_PORT),
                service_port("p2p", names.QDRANT_P2P_PORT),
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
        "metadata": metadata(owner, names.qdrant_service_name(store), names.QDRANT),
        "spec": {
            "ports": [
                service_port("http", names.QDRANT_HTTP_PORT),
                service_port("grpc", names.QDRANT_GRPC_PORT),
            ],
            "selector": names.selector_labels(store, names.QDRANT),
            "type": "ClusterIP",
        },
    }
