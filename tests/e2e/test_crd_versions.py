"""The CRDs' versions on a real API server: objects made under the previous release's CRD
(v1alpha1 only) survive the upgrade to v1beta1, both versions are served and converted, and
the operator moves what etcd stores onto v1beta1 (read back from etcd itself).

A control plane of its own: the test installs an older CRD, which the shared cluster's
other tests must never see, and reads that cluster's etcd.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from memorystore.operator.crd import BACKUP_CRD_NAME, CRD_NAME, render_backup_crd, render_crd
from memorystore.spec import DEPRECATED_VERSIONS, GROUP, VERSION
from memorystore_dev.devcluster.target import Kube, private_cluster
from memorystore_dev.operator_process import start_operator, stop_operator
from support.waiting import wait_for

OLD = "v1alpha1"
NAMESPACES = ("tenant-a", "tenant-b")


def previous_release(crd: dict[str, Any]) -> dict[str, Any]:
    """0.1.0's CRD: the same schema, served and stored as v1alpha1 alone."""
    old = copy.deepcopy(crd)
    (entry,) = [v for v in old["spec"]["versions"] if v["name"] == OLD]
    entry.update(storage=True)
    for key in ("deprecated", "deprecationWarning"):
        entry.pop(key, None)
    old["spec"]["versions"] = [entry]
    old["spec"].pop("conversion", None)
    return old


@pytest.fixture(scope="module")
def own_kube() -> Iterator[Kube]:
    with private_cluster(log=lambda _: None) as kube:
        yield kube


def apply_crds(kube: Kube, crds: list[dict[str, Any]]) -> None:
    for crd in crds:
        kube.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(crd)
        )
        kube.wait_established(crd["metadata"]["name"])


def stored(kube: Kube, plural: str, namespace: str, name: str) -> dict[str, Any]:
    """The object as etcd holds it (custom resources are stored as JSON)."""
    assert kube.local is not None
    key = f"/registry/{GROUP}/{plural}/{namespace}/{name}".encode()
    answer = httpx.post(
        f"{kube.local.etcd_url}/v3/kv/range", json={"key": base64.b64encode(key).decode()}
    ).json()
    (kv,) = answer["kvs"]
    value: dict[str, Any] = json.loads(base64.b64decode(kv["value"]))
    return value


def stored_versions(kube: Kube, crd: str) -> list[str]:
    return list(kube.get("crd", crd)["status"]["storedVersions"])


def manifest(version: str, kind: str, name: str, spec: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {"apiVersion": f"{GROUP}/{version}", "kind": kind, "metadata": {"name": name}, "spec": spec}
    )


def test_stores_of_the_previous_release_are_served_converted_and_migrated(
    own_kube: Kube, tmp_path: Path
) -> None:
    kube = own_kube
    assert OLD in DEPRECATED_VERSIONS and VERSION != OLD
    current = [render_crd(), render_backup_crd()]
    apply_crds(kube, [previous_release(crd) for crd in current])
    specs = {"tenant-a": {"scope": "agent", "suspend": True}, "tenant-b": {"suspend": True}}
    for namespace in NAMESPACES:
        kube.kubectl("create", "namespace", namespace)
        kube.apply(manifest(OLD, "MemoryStore", "old", specs[namespace]), "-n", namespace)
    kube.apply(manifest(OLD, "MemoryStoreBackup", "before", {"store": "old"}), "-n", "tenant-a")
    assert stored(kube, "memorystores", "tenant-a", "old")["apiVersion"] == f"{GROUP}/{OLD}"
    before = {ns: kube.get(f"memorystores.{OLD}.{GROUP}", "old", "-n", ns) for ns in NAMESPACES}

    # The upgrade's CRDs: v1beta1 stored, v1alpha1 still served (deprecated).
    apply_crds(kube, current)
    for crd in (CRD_NAME, BACKUP_CRD_NAME):
        assert stored_versions(kube, crd) == [OLD, VERSION]
    for namespace in NAMESPACES:
        new = kube.get(f"memorystores.{VERSION}.{GROUP}", "old", "-n", namespace)
        assert new["apiVersion"] == f"{GROUP}/{VERSION}"
        assert new["spec"] == before[namespace]["spec"]  # defaults included: one schema
        assert kube.get("mstore", "old", "-n", namespace)["apiVersion"] == f"{GROUP}/{VERSION}"
    # Nothing rewrote them yet: etcd still holds the old encoding.
    assert stored(kube, "memorystores", "tenant-b", "old")["apiVersion"] == f"{GROUP}/{OLD}"

    written = kube.apply(manifest(OLD, "MemoryStore", "late", {"suspend": True}), "-n", "tenant-b")
    assert f"{GROUP}/{OLD} MemoryStore is deprecated" in written.stderr
    assert stored(kube, "memorystores", "tenant-b", "late")["apiVersion"] == f"{GROUP}/{VERSION}"
    assert kube.get(f"memorystores.{OLD}.{GROUP}", "late", "-n", "tenant-b")["apiVersion"] == (
        f"{GROUP}/{OLD}"
    )
    generations = {
        ns: kube.get("mstore", "old", "-n", ns)["metadata"]["generation"] for ns in NAMESPACES
    }

    # The upgraded operator, watching every namespace, moves the rest and the record.
    proc = start_operator(kube.kubeconfig, None, tmp_path / "operator.log")
    try:
        for crd in (CRD_NAME, BACKUP_CRD_NAME):
            wait_for(lambda crd=crd: stored_versions(kube, crd) == [VERSION], timeout=90)
    finally:
        stop_operator(proc)
        print((tmp_path / "operator.log").read_text()[-4000:])
    for namespace in NAMESPACES:
        held = stored(kube, "memorystores", namespace, "old")
        assert held["apiVersion"] == f"{GROUP}/{VERSION}"
        assert held["spec"] == before[namespace]["spec"]
        # An empty rewrite: the spec's generation did not move, so nothing rolled.
        after = kube.get("mstore", "old", "-n", namespace)["metadata"]["generation"]
        assert after == generations[namespace]
    backup = stored(kube, "memorystorebackups", "tenant-a", "before")
    assert backup["apiVersion"] == f"{GROUP}/{VERSION}" and backup["spec"]["store"] == "old"
    # Still served under both versions after the migration.
    assert (
        kube.get(f"memorystores.{OLD}.{GROUP}", "old", "-n", "tenant-a")["spec"]
        == (before["tenant-a"]["spec"])
    )
    # And the previous release's CRD cannot come back over what is now stored: the API
    # server refuses a CRD that stops serving a version named in storedVersions.
    refused = kube.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        input=json.dumps(previous_release(current[0])),
        check=False,
    )
    assert refused.returncode != 0 and "storedVersions" in refused.stderr, refused.stderr
