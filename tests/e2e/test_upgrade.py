"""The upgrade from the previous release (its git tag: dev/memorystore_dev/previous_release.py)
to this checkout, on a real API server with the simulated node: `helm install` of the old
chart, the old operator (its own code, as the old chart's ServiceAccount) making stores of
every tier, then `helm upgrade` to this chart and this operator (as the new chart's
ServiceAccount).

What is measured and printed: per workload, whether the rendered pod template changed (and
where), whether its generation moved, and how many pods were replaced. What must hold: a
workload whose template did not change is not rolled (same generation, same pods) and its
store never leaves Ready; every store is Ready after; the volumes and the generated keys are
the same objects with the same contents; every store is rewritten under v1beta1 in etcd (a
namespaced operator leaves the CRDs' storedVersions to the admin).

The API versions on the way (read back from etcd itself): objects made under the old CRD
(v1alpha1 only) are served under both versions after the upgrade, a v1alpha1 write gets the
deprecation warning, the namespaced operator rewrites its namespace's objects under v1beta1
and leaves the others and the CRDs' storedVersions alone; an operator watching every
namespace then moves the rest and sets storedVersions to [v1beta1], after which the old CRD
is refused.

The simulated node runs no containers, so the memories themselves are not here: the data
lives on the claims, and the claims (same UIDs) and the keys are what is checked; that the
files and databases the old release wrote are served by this one, on every tier, is
tests/integration/test_upgrade_data.py. A control plane of its own: the old CRD cannot be
applied where v1beta1 is already stored.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from memorystore.operator.crd import BACKUP_CRD_NAME, CRD_NAME, CRD_PATH
from memorystore.operator.status import Workload, workload_state
from memorystore.spec import DEPRECATED_VERSIONS, GROUP, VERSION
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.devcluster.target import Kube, private_cluster
from memorystore_dev.metrics_text import sample_sum
from memorystore_dev.operator_process import start_operator, stop_operator
from memorystore_dev.previous_release import previous_release
from support.helm import helm, service_account_kubeconfig
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(600)

CHART = CRD_PATH.parents[1] / "charts" / "memorystore"
RELEASE = "memorystore"
SYSTEM = "memorystore-system"
TENANTS = "tenants"
ELSEWHERE = "elsewhere"  # not watched by the namespaced operator
OLD = "v1alpha1"
STORES = {
    "emb": {"vectorStore": {"embedded": {}}},
    "managed": {},
    "pg": {
        "historyDb": {"postgres": {"dsnSecretRef": {"name": "pg-app", "key": "uri"}}},
        "vectorStore": {"postgres": {}},
        "service": {"replicas": 2},
    },
}
WORKLOADS = ("deployments", "statefulsets")


@pytest.fixture(scope="module")
def own_kube() -> Iterator[Kube]:
    with private_cluster(log=lambda _: None) as kube:
        yield kube


def phases(kube: Kube) -> dict[str, str | None]:
    items = kube.get("mstore", "-n", TENANTS)["items"]
    return {s["metadata"]["name"]: (s.get("status") or {}).get("phase") for s in items}


def snapshot(kube: Kube) -> dict[str, Any]:
    """Workloads (template, generation, the UIDs of their pods), claims, secrets' data."""
    pods = kube.get("pods", "-n", TENANTS)["items"]
    workloads: dict[str, dict[str, Any]] = {}
    for kind in WORKLOADS:
        for w in kube.get(kind, "-n", TENANTS)["items"]:
            selector = w["spec"]["selector"]["matchLabels"]
            uids = sorted(
                p["metadata"]["uid"]
                for p in pods
                if selector.items() <= (p["metadata"].get("labels") or {}).items()
                and not p["metadata"].get("deletionTimestamp")
            )
            workloads[f"{kind[:-1]}/{w['metadata']['name']}"] = {
                "template": w["spec"]["template"],
                "generation": w["metadata"]["generation"],
                "pods": uids,
                "owner": w["metadata"]["ownerReferences"][0]["apiVersion"],
            }
    claims = {
        c["metadata"]["name"]: c["metadata"]["uid"] for c in kube.get("pvc", "-n", TENANTS)["items"]
    }
    secrets = {
        s["metadata"]["name"]: hashlib.sha256(
            json.dumps(s.get("data"), sort_keys=True).encode()
        ).hexdigest()
        for s in kube.get("secrets", "-n", TENANTS)["items"]
    }
    configs = {
        c["metadata"]["name"]: {k: yaml.safe_load(v) for k, v in (c.get("data") or {}).items()}
        for c in kube.get("configmaps", "-n", TENANTS)["items"]
        if c["metadata"]["name"].endswith("-memory-config")
    }
    return {"workloads": workloads, "claims": claims, "secrets": secrets, "configs": configs}


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(a.keys() | b.keys()):
            out += differences(a.get(key), b.get(key), f"{path}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [path or "."]


def rolled_out(kube: Kube) -> bool:
    """Every workload on its latest revision with every replica ready (the operator's own
    reading of a workload's status)."""
    return all(
        workload_state(Workload(kind, w["metadata"]["name"], w))[0]
        for kind in WORKLOADS
        for w in kube.get(kind, "-n", TENANTS)["items"]
    )


def operator_counts(port: int) -> tuple[float, float]:
    """(reconciles, API writes) so far, from the operator's /metrics (both releases')."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    reconciles = sample_sum(text, "memorystore_operator_reconciles_total")
    return reconciles, sample_sum(text, "memorystore_operator_api_writes_total")


def wait_settled(port: int) -> None:
    """Until the operator has reconciled every store twice more without writing anything:
    what it renders has settled."""
    mark = wait_for(lambda: operator_counts(port), timeout=30)

    def quiet() -> bool:
        nonlocal mark
        reconciles, writes = now = operator_counts(port)
        if writes != mark[1]:
            mark = now
            return False
        return reconciles - mark[0] >= 2 * len(STORES)

    wait_for(quiet, timeout=90)


def stored(kube: Kube, name: str, namespace: str = TENANTS, plural: str = "memorystores") -> str:
    """The apiVersion etcd holds the object under (custom resources are stored as JSON)."""
    assert kube.local is not None
    path = f"/registry/{GROUP}/{plural}/{namespace}/{name}"
    key = base64.b64encode(path.encode()).decode()
    (kv,) = httpx.post(f"{kube.local.etcd_url}/v3/kv/range", json={"key": key}).json()["kvs"]
    return str(json.loads(base64.b64decode(kv["value"]))["apiVersion"])


def stored_versions(kube: Kube, crd: str) -> list[str]:
    return list(kube.get("crd", crd)["status"]["storedVersions"])


def manifest(kind: str, name: str, spec: dict[str, Any], version: str = OLD) -> str:
    return yaml.safe_dump(
        {"apiVersion": f"{GROUP}/{version}", "kind": kind, "metadata": {"name": name}, "spec": spec}
    )


class PhaseWatch:
    """Every store's phase, sampled twice a second while the upgrade runs."""

    def __init__(self, kube: Kube) -> None:
        self.kube, self.samples = kube, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(phases(self.kube))
            self._stop.wait(0.5)

    def __enter__(self) -> PhaseWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def left_ready(self, store: str) -> int:
        return sum(1 for sample in self.samples if sample.get(store) != "Ready")


def test_an_upgrade_from_the_previous_release_rolls_only_what_changed(
    own_kube: Kube, tmp_path: Path
) -> None:
    kube = own_kube
    old = previous_release(log=lambda _: None)
    kube.kubectl("create", "namespace", TENANTS)
    values = ["-n", SYSTEM, "--set", f"watch.namespaces={{{TENANTS}}}"]
    helm(kube, "install", RELEASE, str(old.chart), "--create-namespace", *values)
    kube.wait_established(CRD_NAME)
    account = kube.get("deployment", RELEASE, "-n", SYSTEM)["spec"]["template"]["spec"][
        "serviceAccountName"
    ]
    log = tmp_path / "operator.log"
    kube.kubectl(
        "create", "secret", "generic", "pg-app", "-n", TENANTS,
        "--from-literal=uri=postgresql://app:pw@db.example:5432/app",
    )  # fmt: skip

    # Outside what the namespaced operator watches: a store and a backup no operator handles.
    kube.kubectl("create", "namespace", ELSEWHERE)
    kube.apply(
        manifest("MemoryStore", "other", {"scope": "agent", "suspend": True}), "-n", ELSEWHERE
    )
    kube.apply(manifest("MemoryStoreBackup", "before", {"store": "other"}), "-n", ELSEWHERE)
    other = kube.get("mstore", "other", "-n", ELSEWHERE)

    # The previous release: its chart's RBAC, its operator's code, its API version.
    as_old = service_account_kubeconfig(kube, SYSTEM, account, tmp_path / "old-sa")
    port = free_port()
    proc = start_operator(as_old, TENANTS, log, 2, metrics_port=port, base_env=old.env())
    try:
        for name, spec in STORES.items():
            kube.apply(manifest("MemoryStore", name, spec), "-n", TENANTS)
        wait_for(lambda: set(phases(kube).values()) == {"Ready"}, timeout=180)
        wait_for(lambda: rolled_out(kube), timeout=120)
        wait_settled(port)
        before = snapshot(kube)
    finally:
        stop_operator(proc)
    assert all(w["owner"] == f"{GROUP}/{OLD}" for w in before["workloads"].values())
    assert stored(kube, "emb") == stored(kube, "other", ELSEWHERE) == f"{GROUP}/{OLD}"

    # The upgrade: this chart (CRDs, RBAC, the operator's Deployment), then this operator.
    with PhaseWatch(kube) as watch:
        helm(kube, "upgrade", RELEASE, str(CHART), *values)
        kube.wait_established(CRD_NAME)
        kube.wait_established(BACKUP_CRD_NAME)
        check_both_versions_served(kube, other)
        as_new = service_account_kubeconfig(kube, SYSTEM, account, tmp_path / "new-sa")
        port = free_port()
        proc = start_operator(as_new, TENANTS, log, resync_seconds=2, metrics_port=port)
        try:

            def reconciled() -> bool:
                workloads = snapshot(kube)["workloads"].values()
                return all(w["owner"] == f"{GROUP}/{VERSION}" for w in workloads)

            wait_for(reconciled, timeout=120)
            wait_for(lambda: rolled_out(kube), timeout=120)
            wait_for(lambda: set(phases(kube).values()) == {"Ready"}, timeout=120)
            for name in STORES:
                wait_for(lambda n=name: stored(kube, n) == f"{GROUP}/{VERSION}", 60)
            wait_settled(port)  # nothing more is rolled
            after = snapshot(kube)
        finally:
            stop_operator(proc)
            print(log.read_text()[-3000:])
    assert "Forbidden" not in log.read_text(), "the new chart's RBAC covers the new operator"
    # The namespaced operator moved its own namespace's objects, and only those.
    assert stored(kube, "other", ELSEWHERE) == f"{GROUP}/{OLD}"
    for crd in (CRD_NAME, BACKUP_CRD_NAME):
        assert stored_versions(kube, crd) == [OLD, VERSION]

    rows = []
    for workload, old_w in sorted(before["workloads"].items()):
        new_w = after["workloads"][workload]
        changed = differences(old_w["template"], new_w["template"])
        replaced = len(set(old_w["pods"]) - set(new_w["pods"]))
        moved = new_w["generation"] - old_w["generation"]
        rows.append((workload, changed, moved, replaced, len(old_w["pods"])))
    print(f"\nupgrade {old.tag} → this checkout, per workload:")
    print(f"{'workload':34} {'template':9} {'gen +':>5} {'pods replaced':>13}  what changed")
    for workload, changed, moved, replaced, total in rows:
        print(
            f"{workload:34} {'changed' if changed else 'same':9} {moved:>5} "
            f"{replaced:>6} of {total:<4}  {', '.join(changed) or '-'}"
        )
    unneeded = [r[0] for r in rows if not r[1] and (r[2] or r[3])]
    print(f"unneeded rollouts: {len(unneeded)}")
    for name, config in sorted(before["configs"].items()):  # why a checksum moved
        print(f"{name} config: {', '.join(differences(config, after['configs'][name])) or '-'}")
    assert not unneeded, f"rolled without a template change: {unneeded}"
    assert sorted(before["workloads"]) == sorted(after["workloads"])
    for workload, changed, *_ in rows:
        if not changed:  # its store served throughout (the one that rolled may show it)
            store = next(s for s in STORES if workload.split("/")[1].startswith(f"{s}-"))
            if not any(r[1] for r in rows if r[0].split("/")[1].startswith(f"{store}-")):
                assert watch.left_ready(store) == 0, (store, watch.samples)
    print(
        "phases sampled during the upgrade: "
        + ", ".join(
            f"{s}: {len(watch.samples) - watch.left_ready(s)}/{len(watch.samples)} Ready"
            for s in STORES
        )
    )
    assert after["claims"] == before["claims"], "every volume is the same claim"
    kept = {k: v for k, v in before["secrets"].items() if k.endswith("-keys") or k == "pg-app"}
    assert kept and all(after["secrets"][k] == v for k, v in kept.items()), "keys unchanged"

    # An operator watching every namespace moves the rest, then the record.
    everywhere = start_operator(kube.kubeconfig, None, tmp_path / "all.log", resync_seconds=2)
    try:
        for crd in (CRD_NAME, BACKUP_CRD_NAME):
            wait_for(lambda crd=crd: stored_versions(kube, crd) == [VERSION], timeout=90)
    finally:
        stop_operator(everywhere)
        print((tmp_path / "all.log").read_text()[-3000:])
    assert stored(kube, "other", ELSEWHERE) == f"{GROUP}/{VERSION}"
    assert stored(kube, "before", ELSEWHERE, "memorystorebackups") == f"{GROUP}/{VERSION}"
    moved = kube.get("mstore", "other", "-n", ELSEWHERE)
    assert moved["spec"]["scope"] == "agent" and moved["spec"]["suspend"] is True
    # an empty rewrite: the spec's generation did not move, so nothing rolls for it
    assert moved["metadata"]["generation"] == other["metadata"]["generation"]
    # The previous release's CRD cannot come back over what is now stored: the API server
    # refuses a CRD that stops serving a version named in storedVersions.
    refused = kube.kubectl(
        "apply", "--server-side", "--force-conflicts",
        "-f", str(old.source / "crds" / "memorystore.yaml"), check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "storedVersions" in refused.stderr, refused.stderr


def check_both_versions_served(kube: Kube, other: dict[str, Any]) -> None:
    """Right after the new CRDs: v1beta1 stored, v1alpha1 served (deprecated), one schema."""
    assert OLD in DEPRECATED_VERSIONS and VERSION != OLD
    for crd in (CRD_NAME, BACKUP_CRD_NAME):
        assert stored_versions(kube, crd) == [OLD, VERSION]
    new = kube.get(f"memorystores.{VERSION}.{GROUP}", "other", "-n", ELSEWHERE)
    same = kube.get(f"memorystores.{OLD}.{GROUP}", "other", "-n", ELSEWHERE)
    assert new["apiVersion"] == f"{GROUP}/{VERSION}" and same["apiVersion"] == f"{GROUP}/{OLD}"
    assert new["spec"] == same["spec"]  # one schema: the same object under either version
    # what was written is kept; the new schema's defaults are added on read (queryCache)
    assert not differences(other["spec"], {**new["spec"], "embedder": other["spec"]["embedder"]})
    assert new["spec"]["embedder"].items() >= other["spec"]["embedder"].items()
    assert kube.get("mstore", "other", "-n", ELSEWHERE)["apiVersion"] == f"{GROUP}/{VERSION}"
    # nothing rewrote it: etcd still holds the old encoding
    assert stored(kube, "other", ELSEWHERE) == f"{GROUP}/{OLD}"
    written = kube.apply(manifest("MemoryStore", "late", {"suspend": True}), "-n", ELSEWHERE)
    assert f"{GROUP}/{OLD} MemoryStore is deprecated" in written.stderr
    assert stored(kube, "late", ELSEWHERE) == f"{GROUP}/{VERSION}"
    late = kube.get(f"memorystores.{OLD}.{GROUP}", "late", "-n", ELSEWHERE)
    assert late["apiVersion"] == f"{GROUP}/{OLD}"
