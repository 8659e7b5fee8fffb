"""The control-plane harness itself behaves like a real cluster."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from memorystore_dev.devcluster.cluster import LocalCluster
from memorystore_dev.devcluster.target import CLUSTER_TOOLS, Kube
from memorystore_dev.devcluster.tools import ensure_tools
from support.waiting import wait_for


def test_deployment_pods_become_ready_on_simulated_nodes(kube: Kube, namespace: str):
    kube.kubectl(
        "create",
        "deployment",
        "web",
        "--image=registry.invalid/web:1",
        "--replicas=2",
        "-n",
        namespace,
    )
    kube.kubectl("rollout", "status", "deployment/web", "-n", namespace, "--timeout=90s")
    pods = kube.get("pods", "-n", namespace, "-l", "app=web")["items"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"] == "kwok-node-0"
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True"


CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.test.memorystore.dev}
spec:
  group: test.memorystore.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.min <= self.max"
              message: "spec.min must not exceed spec.max"
            properties:
              min: {type: integer}
              max: {type: integer}
"""


def test_crd_cel_rule_rejects_a_bad_object_with_its_message(kube: Kube, namespace: str):
    kube.apply(CRD)
    kube.kubectl(
        "wait", "--for=condition=Established", "crd/widgets.test.memorystore.dev", "--timeout=60s"
    )
    good = (
        "apiVersion: test.memorystore.dev/v1\nkind: Widget\n"
        "metadata: {name: ok}\nspec: {min: 1, max: 2}\n"
    )
    bad = good.replace("name: ok", "name: bad").replace("min: 1", "min: 5")
    kube.apply(good, "-n", namespace)
    refused = kube.kubectl("apply", "-n", namespace, "-f", "-", input=bad, check=False)
    assert refused.returncode != 0
    assert "spec.min must not exceed spec.max" in refused.stderr


def test_a_narrow_role_is_refused_outside_it(kube: Kube, namespace: str):
    kube.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    kube.kubectl(
        "create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps", "-n", namespace
    )
    kube.kubectl(
        "create",
        "rolebinding",
        "cm-reader",
        "--role=cm-reader",
        f"--serviceaccount={namespace}:reader",
        "-n",
        namespace,
    )
    sa = f"system:serviceaccount:{namespace}:reader"
    assert kube.kubectl("get", "configmaps", "-n", namespace, as_user=sa).returncode == 0
    for args in (
        ["get", "secrets", "-n", namespace],
        ["create", "configmap", "x", "-n", namespace],
        ["get", "configmaps", "-n", "default"],
    ):
        refused = kube.kubectl(*args, as_user=sa, check=False)
        assert refused.returncode != 0
        assert "forbidden" in refused.stderr.lower()


def test_owner_reference_garbage_collection_deletes_the_child(kube: Kube, namespace: str):
    kube.kubectl("create", "configmap", "parent", "-n", namespace)
    parent = kube.get("configmap", "parent", "-n", namespace)
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "child",
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "parent",
                    "uid": parent["metadata"]["uid"],
                }
            ],
        },
    }
    kube.apply(yaml.safe_dump(child))
    kube.kubectl("delete", "configmap", "parent", "-n", namespace)
    wait_for(
        lambda: (
            kube.kubectl("get", "configmap", "child", "-n", namespace, check=False).returncode != 0
        )
    )


@pytest.mark.skipif(bool(os.environ.get("KUBECONFIG")), reason="tests the local harness only")
def test_teardown_leaves_no_process_or_directory(tmp_path: Path):
    tools = ensure_tools(CLUSTER_TOOLS)
    started = time.monotonic()
    cluster = LocalCluster(tools, log=lambda _: None).start()
    startup = time.monotonic() - started
    pids, workdir = cluster.pids(), cluster.workdir
    assert len(pids) == 5 and workdir.exists()
    cluster.stop()
    for pid in pids:  # each component led its own process group: none of it may remain
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert not workdir.exists()
    print(f"local control plane start-up: {startup:.1f} s")
