"""Deterministic names and labels of a MemoryStore's children.

Every child is named from the store's name alone (never `generateName`), so a retried or
restarted reconcile finds and re-applies the same objects instead of creating twins.
Labels are the recommended `app.kubernetes.io/*` set plus `memorystore.dev/store`, which
lets the operator list everything one store owns with one selector.
"""

from __future__ import annotations

import re

# Components, as in the app.kubernetes.io/component label.
QDRANT = "qdrant"
MEMORY_SERVICE = "memory-service"
CLIENT = "client"
KEYS = "keys"

STORE_LABEL = "memorystore.dev/store"
# The label an agent pod carries to reach one store's memory service (its value: the store).
CLIENT_POD_LABEL = "memorystore.dev/client"
CONFIG_CHECKSUM_ANNOTATION = "memorystore.dev/config-checksum"

# Keys inside the generated keys Secret and the client Secret.
SERVICE_API_KEY = "service-api-key"
QDRANT_API_KEY = "qdrant-api-key"
CLIENT_API_KEY = "api-key"
# Keys inside the service-key Secret (the files the memory service reads) and its annotations.
CURRENT_SERVICE_KEY = "api-key"
PREVIOUS_SERVICE_KEY = "previous-api-key"
SERVICE_KEY_GENERATION_ANNOTATION = "memorystore.dev/service-key-generation"
PREVIOUS_KEY_VALID_UNTIL_ANNOTATION = "memorystore.dev/previous-key-valid-until"

# Keys inside the TLS Secrets (kubernetes.io/tls and cert-manager's names) and the file
# the client ConfigMap carries beside client.yaml.
BACKUP_SIGNING_KEY = "signing-key"  # the key in the backup-key Secret
QDRANT_CONFIG_FILE = "config.yaml"  # the key in the Qdrant config Secret
QDRANT_TLS_ANNOTATION = "memorystore.dev/qdrant-tls"  # on Qdrant's pod template
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
CA_CERT = "ca.crt"
CA_KEY = "ca.key"

# Files inside the ConfigMaps.
SERVICE_CONFIG_FILE = "service.yaml"
CLIENT_CONFIG_FILE = "client.yaml"

SERVICE_PORT = 8765
QDRANT_HTTP_PORT = 6333
QDRANT_GRPC_PORT = 6334
QDRANT_P2P_PORT = 6335

# The longest suffix is "-qdrant-headless" (16), and a Service name is a DNS label of at
# most 63 characters: 47. The StatefulSet `<name>-qdrant` is tighter: its pods carry the
# label controller-revision-hash=`<statefulset>-<hash of up to 10>`, a label value of at
# most 63 characters, so the StatefulSet name may have 52 and the store name 45.
MAX_STORE_NAME_LENGTH = 45
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a store's children (None: it can).

    A MemoryStore name is a DNS subdomain (dots allowed, up to 253 characters), but its
    Services need a DNS-1035 label and its StatefulSet a short name.
    """
    if len(name) > MAX_STORE_NAME_LENGTH:
        return (
            f"is {len(name)} characters long; at most {MAX_STORE_NAME_LENGTH} are allowed, so "
            "that child names such as <name>-qdrant-headless stay valid DNS labels"
        )
    if not _DNS_LABEL.match(name):
        return (
            "must start with a lowercase letter and contain only lowercase letters, digits "
            "and '-' (its Services are named after it)"
        )
    return None


def keys_secret_name(store: str) -> str:
    return f"{store}-keys"


def service_key_secret_name(store: str) -> str:
    return f"{store}-service-key"


def qdrant_config_secret_name(store: str) -> str:
    """Managed Qdrant's config file with its API key (`--config-path`), derived from the keys
    Secret: a file, so the key is in no environment variable."""
    return f"{store}-qdrant-config"


def backup_key_secret_name(store: str) -> str:
    """The key the service signs its backups' manifests with (HMAC), and restores verify."""
    return f"{store}-backup-key"


def ca_secret_name(store: str) -> str:
    """The operator's private CA for this store (never mounted anywhere)."""
    return f"{store}-ca"


def tls_secret_name(store: str) -> str:
    """The memory service's serving certificate (kubernetes.io/tls)."""
    return f"{store}-tls"


def certificate_name(store: str) -> str:
    """The cert-manager Certificate, when spec.tls.issuerRef is set."""
    return f"{store}-tls"


def qdrant_statefulset_name(store: str) -> str:
    return f"{store}-qdrant"


def qdrant_headless_service_name(store: str) -> str:
    return f"{store}-qdrant-headless"


def qdrant_service_name(store: str) -> str:
    return f"{store}-qdrant"


def qdrant_network_policy_name(store: str) -> str:
    return f"{store}-qdrant"


def memory_config_map_name(store: str) -> str:
    return f"{store}-memory-config"


def memory_data_claim_name(store: str) -> str:
    return f"{store}-memory-data"


def memory_deployment_name(store: str) -> str:
    return f"{store}-memory"


def memory_service_name(store: str) -> str:
    return f"{store}-memory"


def memory_network_policy_name(store: str) -> str:
    return f"{store}-memory"


def qdrant_disruption_budget_name(store: str) -> str:
    return f"{store}-qdrant"


def memory_disruption_budget_name(store: str) -> str:
    return f"{store}-memory"


def client_config_map_name(store: str) -> str:
    return f"{store}-client"


def client_secret_name(store: str) -> str:
    return f"{store}-client"


def qdrant_url(store: str, namespace: str, tls: bool = True) -> str:
    """The managed Qdrant's REST endpoint inside the cluster."""
    scheme = "https" if tls else "http"
    return f"{scheme}://{qdrant_service_name(store)}.{namespace}.svc:{QDRANT_HTTP_PORT}"


def qdrant_tls_secret_name(store: str) -> str:
    """The managed Qdrant's certificate (kubernetes.io/tls), from the store's CA."""
    return f"{store}-qdrant-tls"


def qdrant_dns_names(store: str, namespace: str) -> list[str]:
    """The names Qdrant's certificate covers: the Service the memory service calls, and
    every peer behind the headless Service (peers call each other by those names)."""
    service, peers = qdrant_service_name(store), qdrant_headless_service_name(store)
    return [
        service,  # first: the subject's common name (64 characters at most)
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"*.{peers}.{namespace}.svc",
        f"*.{peers}.{namespace}.svc.cluster.local",
    ]


def memory_endpoint(store: str, namespace: str, tls: bool = True) -> str:
    """The memory service's URL inside the cluster (status.endpoint, client.yaml)."""
    scheme = "https" if tls else "http"
    return f"{scheme}://{memory_service_name(store)}.{namespace}.svc:{SERVICE_PORT}"


def memory_dns_names(store: str, namespace: str) -> list[str]:
    """The names the serving certificate covers: every way a pod may spell the Service."""
    service = memory_service_name(store)
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def tenant(store: str, namespace: str) -> str:
    """The tenant name the service logs and reports: unique in the cluster."""
    return f"{namespace}/{store}"


def store_selector(store: str) -> dict[str, str]:
    """Everything one store owns (e.g. to list its PersistentVolumeClaims)."""
    return {STORE_LABEL: store}


def selector_labels(store: str, component: str) -> dict[str, str]:
    """The pods of one component of one store. Workload selectors are immutable: never
    add to this set once released."""
    return {
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/instance": store,
        "app.kubernetes.io/name": "memorystore",
    }


def labels(store: str, component: str) -> dict[str, str]:
    """The full label set every child (and every pod) carries."""
    return {
        **selector_labels(store, component),
        "app.kubernetes.io/managed-by": "memorystore-operator",
        "app.kubernetes.io/part-of": "memorystore",
        STORE_LABEL: store,
    }
