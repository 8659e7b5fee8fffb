"""The operator on the real control plane: children, status, drift, update, deletion."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from memorystore.devcluster.cluster import free_port
from memorystore.devcluster.target import Kube
from memorystore.operator import names
from memorystore.operator.crd import CRD_NAME, CRD_PATH


def wait_for(check, timeout: float = 90, every: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"condition not met in {timeout} s (last: {last!r})")


@pytest.fixture
def operator(kube: Kube, namespace: str) -> Iterator[subprocess.Popen]:
    kube.kubectl("apply", "--server-side", "-f", str(CRD_PATH))
    kube.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    env = {
        **os.environ,
        "KUBECONFIG": str(kube.kubeconfig),
        "MEMORYSTORE_OPERATOR_RESYNC_SECONDS": "2",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memorystore",
            "operator",
            "--namespace",
            namespace,
            "--metrics-port",
            "0",
            "--liveness",
            f"http://127.0.0.1:{free_port()}/healthz",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def status(kube: Kube, namespace: str, name: str) -> dict:
    return kube.get("mstore", name, "-n", namespace).get("status") or {}


def test_a_memorystore_becomes_ready_repairs_drift_rolls_on_update_and_retains_data(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    kube.apply(
        "apiVersion: memorystore.dev/v1alpha1\nkind: MemoryStore\n"
        "metadata: {name: demo}\nspec: {}\n",
        "-n",
        namespace,
    )
    ready = wait_for(
        lambda: (
            status(kube, namespace, "demo").get("phase") == "Ready"
            and status(kube, namespace, "demo")
        ),
        timeout=120,
    )
    assert ready["endpoint"] == names.memory_endpoint("demo", namespace)
    assert ready["clientConfigMap"] == names.client_config_map_name("demo")
    conditions = {c["type"]: c["status"] for c in ready["conditions"]}
    assert conditions == {
        "Ready": "True",
        "SpecValid": "True",
        "VectorStoreReady": "True",
        "ServiceReady": "True",
    }
    client_cm = kube.get("configmap", names.client_config_map_name("demo"), "-n", namespace)
    service_key = kube.get("secret", names.keys_secret_name("demo"), "-n", namespace)
    key = base64.b64decode(service_key["data"]["service-api-key"]).decode()
    assert len(key) >= 32 and key not in json.dumps(client_cm)  # secrets never in ConfigMaps

    # drift: a deleted child is restored, a hand edit reverted
    cm = names.memory_config_map_name("demo")
    kube.kubectl("delete", "configmap", cm, "-n", namespace)
    wait_for(
        lambda: kube.kubectl("get", "configmap", cm, "-n", namespace, check=False).returncode == 0,
        timeout=30,
    )

    # update: a spec change rolls the service pods (checksum annotation changes)
    deploy = names.memory_deployment_name("demo")
    annotation = "memorystore.dev/config-checksum"

    def checksum() -> str:
        dep = kube.get("deployment", deploy, "-n", namespace)
        return dep["spec"]["template"]["metadata"]["annotations"][annotation]

    before = checksum()
    kube.kubectl(
        "patch",
        "mstore",
        "demo",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"recall": {"topK": 5}}}',
    )
    wait_for(lambda: checksum() != before, timeout=30)

    # deletion with the default Retain: the data volume and keys stay, the rest goes
    kube.kubectl("delete", "mstore", "demo", "-n", namespace, "--timeout=60s")
    wait_for(
        lambda: (
            kube.kubectl("get", "deployment", deploy, "-n", namespace, check=False).returncode != 0
        ),
        timeout=60,
    )
    kube.kubectl("get", "pvc", names.memory_data_claim_name("demo"), "-n", namespace)
    kube.kubectl("get", "secret", names.keys_secret_name("demo"), "-n", namespace)


def test_an_unrealisable_spec_sets_a_condition_instead_of_children(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    kube.kubectl(
        "create", "secret", "generic", "pg", "--from-literal=dsn=postgres://x", "-n", namespace
    )
    kube.apply(
        "apiVersion: memorystore.dev/v1alpha1\nkind: MemoryStore\nmetadata: {name: pg}\n"
        "spec: {historyDb: {postgres: {dsnSecretRef: {name: pg, key: dsn}}}}\n",
        "-n",
        namespace,
    )
    failed = wait_for(
        lambda: (
            status(kube, namespace, "pg").get("phase") == "Failed" and status(kube, namespace, "pg")
        ),
        timeout=60,
    )
    ready = next(c for c in failed["conditions"] if c["type"] == "Ready")
    assert "spec.historyDb.postgres" in ready["message"]
    assert (
        kube.kubectl(
            "get", "deployment", names.memory_deployment_name("pg"), "-n", namespace, check=False
        ).returncode
        != 0
    )
