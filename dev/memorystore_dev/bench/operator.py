"""`memorystore bench operator`: N MemoryStores applied at once, on a real control plane.

For each N: a fresh namespace and a fresh operator process; all N stores in one
`kubectl apply`; the clock stops when every store's status is current (observedGeneration
== generation) and every store's children exist. Reports the operator's CPU time and peak
RSS, read from /proc.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from memorystore.operator.crd import CRD_NAME, CRD_PATH
from memorystore_dev.devcluster.build import ensure_tools
from memorystore_dev.devcluster.cluster import LocalCluster
from memorystore_dev.devcluster.target import CLIENT_TOOLS, CLUSTER_TOOLS, Kube
from memorystore_dev.operator_process import start_operator, stop_operator

# kind -> how many per store (managed Qdrant, SQLite history: the default spec)
CHILDREN = {
    "deployments": 1,
    "statefulsets": 1,
    "networkpolicies": 2,
    "configmaps": 2,
    "secrets": 2,
    "services": 3,
}


def _proc_stats(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS MiB) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    peak = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return cpu, peak


def _count(kube: Kube, kind: str, namespace: str) -> int:
    out = kube.kubectl(
        "get",
        kind,
        "-n",
        namespace,
        "-l",
        "app.kubernetes.io/managed-by=memorystore-operator",
        "-o",
        "name",
    )
    return len(out.stdout.split())


def _current(kube: Kube, namespace: str) -> int:
    items = kube.get("mstore", "-n", namespace)["items"]
    return sum(
        1
        for s in items
        if (s.get("status") or {}).get("observedGeneration") == s["metadata"]["generation"]
    )


def _run(kube: Kube, n: int, timeout: float) -> dict[str, float]:
    namespace = f"bench-{n}"
    kube.kubectl("create", "namespace", namespace)
    log = Path(tempfile.mkstemp(prefix=f"operator-{n}-", suffix=".log")[1])
    proc = start_operator(kube.kubeconfig, namespace, log)
    try:
        time.sleep(3)  # operator start-up is not part of the measured reconcile time
        base_cpu, _ = _proc_stats(proc.pid)
        manifest = "\n---\n".join(
            f"apiVersion: memorystore.dev/v1alpha1\nkind: MemoryStore\n"
            f"metadata: {{name: s{i:03d}}}\nspec: {{}}"
            for i in range(n)
        )
        start = time.monotonic()
        kube.apply(manifest, "-n", namespace)
        while True:
            elapsed = time.monotonic() - start
            current = _current(kube, namespace)
            children = all(_count(kube, k, namespace) >= per * n for k, per in CHILDREN.items())
            if current == n and children:
                break
            if elapsed > timeout:
                raise TimeoutError(f"{n} stores: {current} current after {elapsed:.0f} s")
            time.sleep(1)
        cpu, peak = _proc_stats(proc.pid)
        return {
            "stores": n,
            "seconds": elapsed,
            "cpu_seconds": cpu - base_cpu,
            "peak_rss_mib": peak,
        }
    finally:
        stop_operator(proc)
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        log.unlink(missing_ok=True)


def run_operator_bench(sizes: list[int], timeout: float, as_json: bool) -> int:
    tools = ensure_tools(CLUSTER_TOOLS + CLIENT_TOOLS, log=lambda _: None)
    with LocalCluster(tools, log=lambda _: None) as cluster:
        kube = Kube(cluster.kubeconfig, tools, cluster)
        kube.kubectl("apply", "--server-side", "-f", str(CRD_PATH))
        kube.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
        results = []
        for n in sizes:
            print(f"{n} stores …", file=sys.stderr)
            results.append(_run(kube, n, timeout))
    if as_json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"memorystore bench operator — local control plane, {os.cpu_count()} CPUs; "
        "clock: one apply of N stores → every status current and every child present"
    )
    print("\n| stores | seconds | operator CPU s | operator peak RSS MiB |")
    print("|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['stores']} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
            f"{r['peak_rss_mib']:.0f} |"
        )
    return 0
