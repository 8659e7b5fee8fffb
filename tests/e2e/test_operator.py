"""The operator on the real control plane: children, status, drift, update, deletion."""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
import yaml

from memorystore.operator import names
from memorystore.operator.crd import CRD_PATH
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.devcluster.target import Kube
from memorystore_dev.operator_process import start_operator, stop_operator
from support.stores import create_store
from support.waiting import wait_for


def status(kube: Kube, namespace: str, name: str) -> dict:
    return kube.get("mstore", name, "-n", namespace).get("status") or {}


def test_a_memorystore_becomes_ready_repairs_drift_rolls_on_update_and_retains_data(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    kube.apply(
        "apiVersion: memorystore.dev/v1beta1\nkind: MemoryStore\n"
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
        "AgentPodsIsolated": "True",
    }
    assert ready["agentPodLabel"] == "memorystore.dev/client=demo"
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

    def client_config() -> str:
        cm = kube.get("configmap", names.client_config_map_name("demo"), "-n", namespace)
        return cm["data"][names.CLIENT_CONFIG_FILE]

    # recall budgets are the agents' concern: the client config changes, the service stays
    before, client_before = checksum(), client_config()
    kube.kubectl(
        "patch", "mstore", "demo", "-n", namespace, "--type=merge", "-p",
        '{"spec": {"recall": {"topK": 5}}}',
    )  # fmt: skip
    wait_for(lambda: client_config() != client_before, timeout=30)
    assert "topK: 5" in client_config()
    assert checksum() == before
    kube.kubectl(
        "patch", "mstore", "demo", "-n", namespace, "--type=merge", "-p",
        '{"spec": {"retrieval": {"candidates": 50}}}',
    )  # fmt: skip
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
    kube.kubectl("get", "secret", names.service_key_secret_name("demo"), "-n", namespace)


def test_an_unrealisable_spec_sets_a_condition_instead_of_children(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    # the CRD admits the URL; the operator refuses credentials in it (they belong in a Secret)
    kube.apply(
        "apiVersion: memorystore.dev/v1beta1\nkind: MemoryStore\nmetadata: {name: pg}\n"
        "spec: {vectorStore: {external: {url: 'https://user:pw@q.example:6333'}}}\n",
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
    assert "spec.vectorStore.external.url" in ready["message"]
    assert "pw" not in ready["message"].replace("https://", "")
    assert (
        kube.kubectl(
            "get", "deployment", names.memory_deployment_name("pg"), "-n", namespace, check=False
        ).returncode
        != 0
    )


def phase_is(kube: Kube, namespace: str, name: str, phase: str):
    return lambda: status(kube, namespace, name).get("phase") == phase


def test_suspend_scales_to_zero_and_resume_restores(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    create_store(kube, namespace, "s")
    wait_for(phase_is(kube, namespace, "s", "Ready"), timeout=120)
    kube.kubectl(
        "patch", "mstore", "s", "-n", namespace, "--type=merge", "-p", '{"spec": {"suspend": true}}'
    )
    wait_for(phase_is(kube, namespace, "s", "Suspended"), timeout=60)
    for kind, name in (
        ("deployment", names.memory_deployment_name("s")),
        ("statefulset", names.qdrant_statefulset_name("s")),
    ):
        assert kube.get(kind, name, "-n", namespace)["spec"]["replicas"] == 0
    kube.kubectl("get", "pvc", names.memory_data_claim_name("s"), "-n", namespace)
    kube.kubectl(
        "patch",
        "mstore",
        "s",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"suspend": false}}',
    )
    wait_for(phase_is(kube, namespace, "s", "Ready"), timeout=120)


def test_delete_policy_removes_everything_and_no_finalizer_blocks_the_namespace(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    create_store(kube, namespace, "d", "{deletionPolicy: Delete}")
    wait_for(phase_is(kube, namespace, "d", "Ready"), timeout=120)
    assert not kube.get("mstore", "d", "-n", namespace)["metadata"].get("finalizers")
    events = kube.get("events", "-n", namespace, "--field-selector", "involvedObject.name=d")
    assert "Ready" in {e["reason"] for e in events["items"]}
    kube.kubectl("delete", "mstore", "d", "-n", namespace, "--timeout=60s")
    for kind, name in (
        ("pvc", names.memory_data_claim_name("d")),
        ("secret", names.keys_secret_name("d")),
        ("secret", names.service_key_secret_name("d")),
        ("deployment", names.memory_deployment_name("d")),
    ):
        wait_for(
            lambda k=kind, n=name: (
                kube.kubectl("get", k, n, "-n", namespace, check=False).returncode != 0
            ),
            timeout=60,
        )
    # a namespace holding a store goes away promptly, even with the operator stopped
    create_store(kube, namespace, "gone")
    wait_for(phase_is(kube, namespace, "gone", "Ready"), timeout=120)
    stop_operator(operator)
    kube.kubectl("delete", "namespace", namespace, "--timeout=90s")


def test_operator_restart_converges(
    kube: Kube, namespace: str, operator: subprocess.Popen, operator_log: Path
):
    create_store(kube, namespace, "r")
    operator.kill()  # mid-reconcile, no graceful shutdown
    operator.wait(timeout=30)
    again = start_operator(kube.kubeconfig, namespace, operator_log, resync_seconds=2)
    try:
        wait_for(phase_is(kube, namespace, "r", "Ready"), timeout=120)
        assert status(kube, namespace, "r")["observedGeneration"] == 1
    finally:
        stop_operator(again)


@pytest.mark.skipif(bool(os.environ.get("KUBECONFIG")), reason="the benchmark starts its own")
def test_operator_bench_smoke():
    result = subprocess.run(
        [sys.executable, "-m", "memorystore", "bench", "operator", "--stores", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert row["stores"] == 3 and row["seconds"] > 0 and row["peak_rss_mib"] > 0


def test_missing_secret_is_reported_hand_edits_reverted_and_liveness_and_metrics_served(
    kube: Kube, namespace: str, operator_log: Path
):
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_PATH))
    metrics_port, live_port = free_port(), free_port()
    proc = start_operator(
        kube.kubeconfig,
        namespace,
        operator_log,
        resync_seconds=2,
        metrics_port=metrics_port,
        liveness_port=live_port,
    )
    try:
        spec = (
            "{embedder: {provider: openai, model: text-embedding-3-small, dimensions: 1536, "
            "apiKeySecretRef: {name: openai, key: token}}}"
        )
        create_store(kube, namespace, "m", spec)
        blocked = wait_for(
            lambda: next(
                (
                    c
                    for c in status(kube, namespace, "m").get("conditions", [])
                    if c["type"] == "ServiceReady" and c["reason"] == "SecretMissing"
                ),
                None,
            ),
            timeout=60,
        )
        assert blocked["message"] == (
            "Secret openai referenced by spec.embedder.apiKeySecretRef does not exist"
        )
        kube.kubectl(
            "create", "secret", "generic", "openai", "--from-literal=token=sk-x", "-n", namespace
        )
        wait_for(phase_is(kube, namespace, "m", "Ready"), timeout=90)

        deploy = names.memory_deployment_name("m")
        kube.kubectl(
            "set", "image", f"deployment/{deploy}", "memory-service=evil:latest", "-n", namespace
        )

        def image() -> str:
            dep = kube.get("deployment", deploy, "-n", namespace)
            return dep["spec"]["template"]["spec"]["containers"][0]["image"]

        wait_for(lambda: image() != "evil:latest", timeout=30)

        assert httpx.get(f"http://127.0.0.1:{live_port}/healthz").status_code == 200
        # The gauge holds the last reconcile's verdict: the one that reverted the hand edit
        # saw the Deployment mid-rollout (not Ready), so it reads 1 again once a later
        # reconcile has seen the rollout finish.
        ready = f'memorystore_operator_store_ready{{namespace="{namespace}",store="m"}} 1.0'

        def scraped() -> str | None:
            text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
            return text if ready in text else None

        metrics = wait_for(scraped, timeout=60)
        assert 'memorystore_operator_reconciles_total{outcome="applied"}' in metrics
        assert "memorystore_operator_reconcile_seconds_count" in metrics
    finally:
        stop_operator(proc)


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A tenant's "external Qdrant": records every request that reaches it."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_operator_never_calls_the_url_a_tenant_wrote(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    """An external Qdrant's URL is the memory service's to reach (its /readyz), never the
    operator's: a store pointing at an address the operator could reach gets its status
    through the service, and the address sees no request across several resyncs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        create_store(kube, namespace, "x", f"{{vectorStore: {{external: {{url: '{url}'}}}}}}")
        vs = wait_for(
            lambda: next(
                (
                    c
                    for c in status(kube, namespace, "x").get("conditions", [])
                    if c["type"] == "VectorStoreReady" and c["status"] == "True"
                ),
                None,
            ),
            timeout=60,
        )
        # the simulated node reports the service's pods ready: the store is, through them
        assert vs["reason"] == "External"
        assert vs["message"] == f"external Qdrant at {url}, reached by the memory service"
        # spec changes and resyncs (the test operator resyncs every few seconds) pass by
        kube.kubectl(
            "patch",
            "mstore",
            "x",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec": {"recall": {"topK": 7}}}',
        )
        time.sleep(8)
        assert _Recorder.seen == [], f"the operator called the tenant's URL: {_Recorder.seen}"
    finally:
        server.shutdown()
        server.server_close()
    assert (
        kube.kubectl(
            "get", "statefulset", names.qdrant_statefulset_name("x"), "-n", namespace, check=False
        ).returncode
        != 0
    )


def test_an_embedded_store_is_ready_as_one_pod_without_qdrant_children(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    create_store(kube, namespace, "e", "{vectorStore: {embedded: {}}}")
    wait_for(phase_is(kube, namespace, "e", "Ready"), timeout=120)
    ready = status(kube, namespace, "e")
    conditions = {c["type"]: c for c in ready["conditions"]}
    assert {t: c["status"] for t, c in conditions.items()} == {
        "Ready": "True",
        "SpecValid": "True",
        "VectorStoreReady": "True",
        "ServiceReady": "True",
        "AgentPodsIsolated": "True",
    }
    vs = conditions["VectorStoreReady"]
    assert (vs["reason"], vs["message"]) == ("Embedded", "embedded in the memory service")

    # the data plane is the memory service's Deployment alone: no Qdrant object at all
    found = kube.get("statefulsets,services,networkpolicies,deployments", "-n", namespace)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in found["items"]) == [
        ("Deployment", names.memory_deployment_name("e")),
        ("NetworkPolicy", names.memory_network_policy_name("e")),
        ("Service", names.memory_service_name("e")),
    ]
    deploy = kube.get("deployment", names.memory_deployment_name("e"), "-n", namespace)
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"]["type"] == "Recreate"
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert not [e for e in container["env"] if "valueFrom" in e]  # secrets are files
    assert not [v for v in deploy["spec"]["template"]["spec"]["volumes"] if "qdrant" in v["name"]]
    # the engine's files on the data volume the pod mounts, beside the history
    cm = kube.get("configmap", names.memory_config_map_name("e"), "-n", namespace)
    rendered = yaml.safe_load(cm["data"][names.SERVICE_CONFIG_FILE])
    assert rendered["vectorStore"] == {
        "collection": "memories",
        "embedded": {"path": "/data/qdrant", "indexAfter": 20000},
    }
    assert {"mountPath": "/data", "name": "data"} in container["volumeMounts"]
    kube.kubectl("get", "pvc", names.memory_data_claim_name("e"), "-n", namespace)

    # the server refuses a second replica, so the operator never builds one
    refused = kube.kubectl(
        "patch",
        "mstore",
        "e",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"service": {"replicas": 2}}}',
        check=False,
    )
    assert refused.returncode != 0
    assert "spec.service.replicas must be 1 with spec.vectorStore.embedded" in refused.stderr
    assert (
        kube.get("deployment", names.memory_deployment_name("e"), "-n", namespace)["spec"][
            "replicas"
        ]
        == 1
    )


def test_two_stores_admitting_the_same_agent_pods_are_warned_about(
    kube: Kube, namespace: str, operator: subprocess.Popen
):
    """The mistake docs/kubernetes.md warns of: two tenants in a namespace admit `app: agent`."""
    for name in ("acme", "globex"):
        kube.apply(
            "apiVersion: memorystore.dev/v1beta1\nkind: MemoryStore\n"
            f"metadata: {{name: {name}}}\n"
            "spec: {allowedAgentPods: {matchLabels: {app: agent}}}\n",
            "-n",
            namespace,
        )

    def shared(name: str) -> dict | None:
        conditions = status(kube, namespace, name).get("conditions") or []
        found = next((c for c in conditions if c["type"] == "AgentPodsIsolated"), None)
        return found if found and found["status"] == "False" else None

    for name, other in (("acme", "globex"), ("globex", "acme")):
        condition = wait_for(lambda name=name: shared(name), timeout=60)
        assert condition["reason"] == "SharedAgentPods"
        assert other in condition["message"] and "app=agent" in condition["message"]
        policy = kube.get("networkpolicy", names.memory_network_policy_name(name), "-n", namespace)
        assert policy["spec"]["ingress"][0]["from"] == [
            {"podSelector": {"matchLabels": {"memorystore.dev/client": name}}},
            {"podSelector": {"matchLabels": {"app": "agent"}}},
        ]
    events = kube.get("events", "-n", namespace, "--field-selector", "reason=SharedAgentPods")
    warned = {e["involvedObject"]["name"] for e in events["items"] if e["type"] == "Warning"}
    assert warned == {"acme", "globex"}

    # An extra selector that does not pin the store label could still match the other
    # store's agents (a pod labelled for globex that also carries the extra labels), so the
    # warning clears only once neither store admits more than its own label.
    for name in ("acme", "globex"):
        kube.kubectl(
            "patch",
            "mstore",
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec": {"allowedAgentPods": {"matchLabels": null}}}',
        )
    for name in ("acme", "globex"):
        wait_for(lambda name=name: shared(name) is None, timeout=60)
