"""`memorystore bench operator`: N MemoryStores applied at once, on a real control plane.

For each N: a fresh namespace and a fresh operator process; all N stores in one
`kubectl apply`; the clock stops when every store's status is current (observedGeneration
== generation) and every store's children exist. Reports the operator's CPU time and peak
RSS, read from /proc; how long each store's status took to say Ready after its workloads
were ready (polled); and, once every store is Ready and nothing changes, the API writes per
resync round, counted by the API server itself (`apiserver_request_total`).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from memorystore.operator.crd import CRD_NAME, CRD_PATH
from memorystore.operator.status import Workload, workload_state
from memorystore_dev.devcluster.cluster import VOLUMES, LocalCluster, free_port, static_volume
from memorystore_dev.devcluster.target import CLIENT_TOOLS, CLUSTER_TOOLS, Kube
from memorystore_dev.devcluster.tools import ensure_tools
from memorystore_dev.metrics_text import sample_sum
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


# Write verbs as the API server counts them (APPLY is server-side apply), and the resources
# the operator writes: its children, the stores' status and Events.
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE"}
OPERATOR_RESOURCES = set(CHILDREN) | {
    "persistentvolumeclaims",
    "poddisruptionbudgets",
    "memorystores",
    "events",
}


def api_writes(metrics_text: str) -> int:
    """Write requests on the operator's resources so far, from the API server's /metrics."""
    return int(
        sample_sum(
            metrics_text,
            "apiserver_request_total",
            lambda labels: (
                labels.get("verb") in WRITE_VERBS and labels.get("resource") in OPERATOR_RESOURCES
            ),
        )
    )


def _writes(kube: Kube) -> int:
    return api_writes(kube.kubectl("get", "--raw", "/metrics").stdout)


def _reconciles(metrics_port: int) -> float:
    """Reconciles the operator has run (its own counter, every outcome)."""
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
    return sample_sum(text, "memorystore_operator_reconciles_total")


def _workloads_ready(objects: list[dict]) -> dict[str, bool]:
    """Per store: are all of its Deployments and StatefulSets ready (as its status judges)?"""
    ready: dict[str, bool] = {}
    for obj in objects:
        store = obj["metadata"].get("labels", {}).get("memorystore.dev/store")
        if obj["kind"] not in ("Deployment", "StatefulSet") or not store:
            continue
        ok, _, _ = workload_state(Workload(obj["kind"], obj["metadata"]["name"], obj))
        ready[store] = ready.get(store, True) and ok
    return ready


class ReadyLag:
    """Per store: when its workloads were first seen ready and when its status first said
    Ready (polled about every half second, so each lag is good to about ±0.5 s)."""

    def __init__(self) -> None:
        self.workloads_at: dict[str, float] = {}
        self.ready_at: dict[str, float] = {}

    def observe(self, items: list[dict], now: float) -> None:
        for store, ok in _workloads_ready(items).items():
            if ok:
                self.workloads_at.setdefault(store, now)
        for item in items:
            if item["kind"] == "MemoryStore" and (item.get("status") or {}).get("phase") == "Ready":
                self.ready_at.setdefault(item["metadata"]["name"], now)

    def lags(self) -> list[float]:
        """Seconds from workloads ready to status Ready, ascending (0 when seen together)."""
        return sorted(
            max(0.0, at - self.workloads_at.get(store, at)) for store, at in self.ready_at.items()
        )


def _current(items: list[dict]) -> int:
    return sum(
        1
        for s in items
        if s["kind"] == "MemoryStore"
        and (s.get("status") or {}).get("observedGeneration") == s["metadata"]["generation"]
    )


RESYNC_SECONDS = 10.0  # the operator's resync period in the bench
ROUNDS = 3  # resync rounds over which the steady-state writes are counted


def _run(kube: Kube, n: int, timeout: float) -> dict[str, float]:
    namespace = f"bench-{n}"
    kube.kubectl("create", "namespace", namespace)
    log = Path(tempfile.mkstemp(prefix=f"operator-{n}-", suffix=".log")[1])
    metrics_port = free_port()
    proc = start_operator(
        kube.kubeconfig, namespace, log, resync_seconds=RESYNC_SECONDS, metrics_port=metrics_port
    )
    try:
        time.sleep(3)  # operator start-up is not part of the measured reconcile time
        base_cpu, _ = _proc_stats(proc.pid)
        manifest = "\n---\n".join(
            f"apiVersion: memorystore.dev/v1beta1\nkind: MemoryStore\n"
            f"metadata: {{name: s{i:03d}}}\nspec: {{}}"
            for i in range(n)
        )
        start = time.monotonic()
        kube.apply(manifest, "-n", namespace)
        lag = ReadyLag()
        elapsed: float | None = None
        cpu = peak = 0.0
        while elapsed is None or len(lag.ready_at) < n:
            now = time.monotonic()
            if now - start > timeout:
                raise TimeoutError(
                    f"{n} stores: {len(lag.ready_at)} Ready after {now - start:.0f} s"
                )
            items = kube.get("deployments,statefulsets,memorystores", "-n", namespace)["items"]
            lag.observe(items, now)
            if (
                elapsed is None
                and _current(items) == n
                and all(_count(kube, k, namespace) >= per * n for k, per in CHILDREN.items())
            ):
                elapsed = now - start
                cpu, peak = _proc_stats(proc.pid)
            time.sleep(0.3)
        lags = lag.lags()
        # Steady state: every store Ready, nothing changes; one round to settle, then count.
        # A round is every store reconciled once; an operator slower than its period makes
        # fewer rounds than the clock suggests, so rounds are counted, not timed.
        time.sleep(RESYNC_SECONDS)
        writes, reconciles = _writes(kube), _reconciles(metrics_port)
        time.sleep(RESYNC_SECONDS * ROUNDS)
        rounds = (_reconciles(metrics_port) - reconciles) / n
        writes = (_writes(kube) - writes) / max(rounds, 1e-9)
        return {
            "stores": n,
            "seconds": elapsed,
            "cpu_seconds": cpu - base_cpu,
            "peak_rss_mib": peak,
            "ready_lag_median_s": statistics.median(lags),
            "ready_lag_max_s": lags[-1],
            "writes_per_round": writes,
            "rounds": rounds,
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
        # Every store of the default spec claims two volumes (service data, Qdrant storage),
        # and a used volume is not reused (Retain): enough for every size, beyond the harness's.
        extra = range(VOLUMES, VOLUMES + 2 * sum(sizes))
        kube.apply("\n---\n".join(json.dumps(static_volume(i)) for i in extra))
        results = []
        for n in sizes:
            print(f"{n} stores …", file=sys.stderr)
            results.append(_run(kube, n, timeout))
    if as_json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"memorystore bench operator — local control plane, {os.cpu_count()} CPUs; "
        "clock: one apply of N stores → every status current and every child present;\n"
        "Ready lag: workloads ready → status Ready; writes: API write requests on the "
        f"operator's resources per resync round (every store reconciled once; period "
        f"{RESYNC_SECONDS:.0f} s), all stores Ready and unchanged, over {ROUNDS} periods "
        "(writes from the API server's apiserver_request_total, rounds from the operator's "
        "reconcile counter)"
    )
    print(
        "\n| stores | seconds | operator CPU s | operator peak RSS MiB "
        "| Ready lag median s | Ready lag max s | rounds | writes per round |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['stores']} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
            f"{r['peak_rss_mib']:.0f} | {r['ready_lag_median_s']:.1f} | "
            f"{r['ready_lag_max_s']:.1f} | {r['rounds']:.1f} | {r['writes_per_round']:.1f} |"
        )
    return 0
