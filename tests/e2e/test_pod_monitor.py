"""A PodMonitor per store, on the real API server with the simulated node: none while the
Prometheus Operator's CRD is not served (and the store is Ready all the same), one per store
as soon as it is (no operator restart), owned by its store and gone with it.

The CRD here is a stand-in, named as such: the Prometheus Operator's own manifests come from
no registry this project may use, so a CRD of the same group, version and kind with an open
schema takes its place. What is checked is the operator's side: when it applies, what it
applies (the builder's output, tests/unit/operator/test_builders.py) and with what owner.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator

import pytest

from memorystore.operator import names
from memorystore.operator.settings import POD_MONITOR_LABELS, POD_MONITORS
from memorystore_dev.devcluster.target import Kube
from support.stores import create_store
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

RunOperator = Callable[..., subprocess.Popen[bytes]]
CRD_NAME = "podmonitors.monitoring.coreos.com"
STAND_IN_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {"kind": "PodMonitor", "listKind": "PodMonitorList", "plural": "podmonitors",
                  "singular": "podmonitor"},
        "scope": "Namespaced",
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}  # fmt: skip


@pytest.fixture
def stand_in_crd(kube: Kube) -> Iterator[Callable[[], None]]:
    def install() -> None:
        kube.apply(json.dumps(STAND_IN_CRD))
        kube.wait_established(CRD_NAME)

    yield install
    kube.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=false")


def pod_monitor(kube: Kube, namespace: str, store: str) -> dict | None:
    found = kube.kubectl(
        "get", "podmonitors.monitoring.coreos.com", names.memory_service_name(store),
        "-n", namespace, "-o", "json", check=False,
    )  # fmt: skip
    return json.loads(found.stdout) if found.returncode == 0 else None


def test_a_pod_monitor_per_store_once_the_crd_is_served(
    kube: Kube,
    namespace: str,
    run_operator: RunOperator,
    stand_in_crd: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv(POD_MONITORS, "true")
    monkeypatch.setenv(POD_MONITOR_LABELS, '{"release": "prom"}')
    run_operator()
    create_store(kube, namespace, "m", "{vectorStore: {embedded: {}}}")
    ready = wait_for(
        lambda: (
            (kube.get("mstore", "m", "-n", namespace).get("status") or {}).get("phase") == "Ready"
        ),
        timeout=90,
    )
    assert ready
    assert pod_monitor(kube, namespace, "m") is None  # the kind is not served: nothing, no error

    stand_in_crd()
    monitor = wait_for(lambda: pod_monitor(kube, namespace, "m"), timeout=60)
    store = kube.get("mstore", "m", "-n", namespace)
    assert monitor["metadata"]["labels"]["release"] == "prom"
    (owner,) = monitor["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "MemoryStore",
        "m",
        store["metadata"]["uid"],
    )
    assert monitor["spec"]["selector"]["matchLabels"] == names.selector_labels(
        "m", names.MEMORY_SERVICE
    )
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
    assert store["status"]["phase"] == "Ready"

    kube.kubectl("delete", "mstore", "m", "-n", namespace, "--wait=true")
    wait_for(lambda: pod_monitor(kube, namespace, "m") is None, timeout=60)  # garbage-collected
