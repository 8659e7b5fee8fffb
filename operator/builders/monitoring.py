"""A store's PodMonitor: how a Prometheus run by the Prometheus Operator scrapes its memory
service (docs/operations/monitoring.md).

A PodMonitor rather than a ServiceMonitor: every pod of the service is scraped, each with its
own `/metrics`, on the port the pods name. The series get `store` (from the pods' instance
label) beside the `namespace` and `pod` Prometheus adds, the labels the chart's dashboard and
alerts group by. With TLS the scraper verifies the service's certificate against the store's
CA, from the client ConfigMap agents mount (public), under the Service's name.
"""

from __future__ import annotations

from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.common import metadata
from memorystore.operator.builders.model import Monitoring, Owner
from memorystore.spec import MemoryStoreSpec

__all__ = ["POD_MONITOR_API", "memory_pod_monitor"]

POD_MONITOR_API = "monitoring.coreos.com/v1"
# the pods' label that names their store (names.selector_labels), as Prometheus sees it
_STORE_SOURCE = "__meta_kubernetes_pod_label_app_kubernetes_io_instance"


def memory_pod_monitor(
    owner: Owner, spec: MemoryStoreSpec, monitoring: Monitoring
) -> dict[str, Any]:
    """The PodMonitor of the store's memory service pods."""
    store = owner.name
    tls = spec.tls.enabled
    endpoint: dict[str, Any] = {
        "interval": monitoring.interval,
        "path": "/metrics",
        "port": "https" if tls else "http",
        "relabelings": [
            {"action": "replace", "sourceLabels": [_STORE_SOURCE], "targetLabel": "store"}
        ],
        "scheme": "https" if tls else "http",
    }
    if tls:
        endpoint["tlsConfig"] = {
            "ca": {
                "configMap": {"key": names.CA_CERT, "name": names.client_config_map_name(store)}
            },
            "serverName": f"{names.memory_service_name(store)}.{owner.namespace}.svc",
        }
    meta = metadata(owner, names.memory_service_name(store), names.MEMORY_SERVICE)
    meta["labels"] = {**meta["labels"], **dict(monitoring.labels)}
    return {
        "apiVersion": POD_MONITOR_API,
        "kind": "PodMonitor",
        "metadata": meta,
        "spec": {
            "namespaceSelector": {"matchNames": [owner.namespace]},
            "podMetricsEndpoints": [endpoint],
            "selector": {"matchLabels": names.selector_labels(store, names.MEMORY_SERVICE)},
        },
    }
