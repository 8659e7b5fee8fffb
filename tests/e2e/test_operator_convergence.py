"""The operator converges under concurrent change and deletion (real API server, real operator
process): rapid spec updates racing the resync, foreground deletion, status that follows the
children without the timer, and no writes for stores that did not change."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml
from lightkube import Client, KubeConfig
from lightkube.types import PatchType

from memorystore.operator import names
from memorystore.operator.builders.configs import config_checksum
from memorystore.operator.resources import MemoryStoreResource
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.devcluster.target import Kube
from memorystore_dev.metrics_text import sample_sum
from support.stores import create_store
from support.waiting import wait_for

CHILD_KINDS = "configmaps,services,deployments,statefulsets,persistentvolumeclaims,networkpolicies"


def store(kube: Kube, namespace: str, name: str) -> dict:
    return kube.get("mstore", name, "-n", namespace)


def phase(kube: Kube, namespace: str, name: str) -> str | None:
    return (store(kube, namespace, name).get("status") or {}).get("phase")


@contextmanager
def recorded_versions(kube: Kube, namespace: str, name: str) -> Iterator[list[dict]]:
    """Every version of one store the API server sends to a watch while the block runs."""
    out = Path(kube.kubeconfig).parent / f"watch-{namespace}-{name}.json"
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [
                str(kube.tools["kubectl"]),
                f"--kubeconfig={kube.kubeconfig}",
                "get",
                "mstore",
                name,
                "-n",
                namespace,
                "--watch",
                "-o",
                "json",
            ],
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )
    versions: list[dict] = []
    try:
        yield versions
        time.sleep(1)  # the last writes reach the watch
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        text, decoder, at = out.read_text(), json.JSONDecoder(), 0
        while at < len(text.rstrip()):
            obj, end = decoder.raw_decode(text, at)
            versions.append(obj)
            at = end + (len(text[end:]) - len(text[end:].lstrip()))
        out.unlink(missing_ok=True)


def children_versions(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    """The store's owned children. Its backup key is left out: it is never owned, so the
    backups that outlive the store stay verifiable (operator/builders/secrets.py)."""
    items = kube.get(CHILD_KINDS + ",secrets", "-n", namespace, "-l", f"{names.STORE_LABEL}={name}")
    kept = f"Secret/{names.backup_key_secret_name(name)}"
    return {
        f"{i['kind']}/{i['metadata']['name']}": i["metadata"]["resourceVersion"]
        for i in items["items"]
        if f"{i['kind']}/{i['metadata']['name']}" != kept
    }


def operator_writes(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sample_sum(text, "memorystore_operator_api_writes_total")


def test_100_rapid_spec_updates_racing_the_resync_converge_on_the_last(
    kube: Kube, namespace: str, run_operator: Callable[..., subprocess.Popen[bytes]]
):
    run_operator(resync_seconds=0.3)  # the resync races every update
    create_store(kube, namespace, "race")
    wait_for(lambda: phase(kube, namespace, "race") == "Ready", timeout=120)
    api = Client(config=KubeConfig.from_file(kube.kubeconfig), field_manager="race-test")
    with recorded_versions(kube, namespace, "race") as versions:
        for i in range(100):
            api.patch(
                MemoryStoreResource,
                "race",
                {"spec": {"retrieval": {"candidates": 100 + i}, "recall": {"topK": 1 + i % 50}}},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
        final = store(kube, namespace, "race")["metadata"]["generation"]
        wait_for(
            lambda: (
                (store(kube, namespace, "race").get("status") or {}).get("observedGeneration")
                == final
            ),
            timeout=120,
        )
        wait_for(lambda: phase(kube, namespace, "race") == "Ready", timeout=120)
    observed = [
        v["status"]["observedGeneration"]
        for v in versions
        if (v.get("status") or {}).get("observedGeneration") is not None
    ]
    print(
        f"100 updates: generation {final}, {len(versions)} versions watched, "
        f"{len(observed)} with a status, {len(set(observed))} distinct observedGenerations"
    )
    assert observed == sorted(observed), f"observedGeneration went backwards: {observed}"
    assert observed[-1] == final
    # The children are those of the last spec: the service config and the pod template's
    # checksum of it, and the client config.
    config = kube.get("configmap", names.memory_config_map_name("race"), "-n", namespace)
    text = config["data"][names.SERVICE_CONFIG_FILE]
    assert yaml.safe_load(text)["retrieval"]["candidates"] == 199
    deploy = kube.get("deployment", names.memory_deployment_name("race"), "-n", namespace)
    annotations = deploy["spec"]["template"]["metadata"]["annotations"]
    assert annotations[names.CONFIG_CHECKSUM_ANNOTATION] == config_checksum(text)
    client = kube.get("configmap", names.client_config_map_name("race"), "-n", namespace)
    assert yaml.safe_load(client["data"][names.CLIENT_CONFIG_FILE])["recall"]["topK"] == 50


def test_foreground_deletion_re_creates_nothing_and_shows_deleting(
    kube: Kube, namespace: str, run_operator: Callable[..., subprocess.Popen[bytes]]
):
    run_operator(resync_seconds=0.5)
    create_store(kube, namespace, "bye", "{deletionPolicy: Delete}")
    wait_for(lambda: phase(kube, namespace, "bye") == "Ready", timeout=120)
    # A finalizer of the test's own keeps the store in its deleting state after garbage
    # collection has removed the children, so a re-apply would have time to show.
    hold = "test.memorystore.dev/hold"
    kube.kubectl(
        "patch", "mstore", "bye", "-n", namespace, "--type=merge", "-p",
        json.dumps({"metadata": {"finalizers": [hold]}}),
    )  # fmt: skip
    kube.kubectl("delete", "mstore", "bye", "-n", namespace, "--cascade=foreground", "--wait=false")
    wait_for(lambda: phase(kube, namespace, "bye") == "Deleting", timeout=30)
    ready = next(
        c for c in store(kube, namespace, "bye")["status"]["conditions"] if c["type"] == "Ready"
    )
    assert ready["status"] == "False" and ready["reason"] == "Deleting"
    wait_for(lambda: not children_versions(kube, namespace, "bye"), timeout=60)
    time.sleep(5)  # ten resync rounds and the children watch's events
    assert children_versions(kube, namespace, "bye") == {}
    key = names.backup_key_secret_name("bye")
    assert kube.kubectl("get", "secret", key, "-n", namespace, check=False).returncode == 0
    kube.kubectl(
        "patch", "mstore", "bye", "-n", namespace, "--type=json", "-p",
        '[{"op": "remove", "path": "/metadata/finalizers"}]',
    )  # fmt: skip
    wait_for(
        lambda: kube.kubectl("get", "mstore", "bye", "-n", namespace, check=False).returncode,
        timeout=30,
    )


def test_status_follows_the_children_without_the_resync_timer(
    kube: Kube, namespace: str, run_operator: Callable[..., subprocess.Popen[bytes]]
):
    run_operator(resync_seconds=3600)  # only kopf's create event and the children watch
    create_store(kube, namespace, "quick")
    wait_for(lambda: phase(kube, namespace, "quick") == "Ready", timeout=60)
    # A deleted child comes back at once too (its watch event), not on the timer.
    cm = names.memory_config_map_name("quick")
    kube.kubectl("delete", "configmap", cm, "-n", namespace)
    wait_for(
        lambda: kube.kubectl("get", "configmap", cm, "-n", namespace, check=False).returncode == 0,
        timeout=30,
    )


def test_unchanged_stores_cost_no_write_per_resync_round(
    kube: Kube, namespace: str, run_operator: Callable[..., subprocess.Popen[bytes]]
):
    port = free_port()
    run_operator(resync_seconds=0.5, metrics_port=port)
    stores = [f"calm{i}" for i in range(5)]
    for name in stores:
        create_store(kube, namespace, name)
    for name in stores:
        wait_for(lambda n=name: phase(kube, namespace, n) == "Ready", timeout=120)
    time.sleep(2)  # the last status writes and watch echoes settle
    before_writes = operator_writes(port)
    before = {n: children_versions(kube, namespace, n) for n in stores}
    before_status = {n: store(kube, namespace, n)["metadata"]["resourceVersion"] for n in stores}
    time.sleep(5)  # ten resync rounds
    assert operator_writes(port) == before_writes
    assert {n: children_versions(kube, namespace, n) for n in stores} == before
    assert {n: store(kube, namespace, n)["metadata"]["resourceVersion"] for n in stores} == (
        before_status
    )
    # ... and a hand edit is still repaired: the ledger is not blind.
    cm = names.memory_config_map_name("calm0")
    kube.kubectl(
        "patch", "configmap", cm, "-n", namespace, "--type=merge", "-p",
        json.dumps({"data": {names.SERVICE_CONFIG_FILE: "tampered: true\n"}}),
    )  # fmt: skip
    wait_for(
        lambda: (
            "tampered"
            not in kube.get("configmap", cm, "-n", namespace)["data"][names.SERVICE_CONFIG_FILE]
        ),
        timeout=30,
    )
    # counted once the reconcile's children are all applied, a moment after the repair shows
    wait_for(lambda: operator_writes(port) > before_writes, timeout=30)
