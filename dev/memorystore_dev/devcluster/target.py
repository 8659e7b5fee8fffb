"""Which cluster tests run against: $KUBECONFIG when set (any real cluster), else a local
control plane started for the session. Either way, commands go through the pinned kubectl.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorystore_dev.devcluster.cluster import LocalCluster, Log
from memorystore_dev.devcluster.node import NODE_TOOLS, NodeAddon, RealNode
from memorystore_dev.devcluster.tools import ensure_tools

CLUSTER_TOOLS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
CLIENT_TOOLS = ["kubectl", "helm"]
REAL_NODE_TOOLS = list(NODE_TOOLS)


@dataclass
class Kube:
    kubeconfig: Path
    tools: dict[str, Path]
    local: LocalCluster | None

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        as_user: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl; `as_user` impersonates (e.g. a ServiceAccount)."""
        argv = [str(self.tools["kubectl"]), f"--kubeconfig={self.kubeconfig}"]
        if as_user:
            argv.append(f"--as={as_user}")
        result = subprocess.run(
            [*argv, *args], input=input, capture_output=True, text=True, timeout=120
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, manifest: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "-f", "-", *args, input=manifest)

    def wait_established(self, crd: str, timeout: float = 60) -> None:
        """`kubectl wait --for=condition=Established`, tolerating a CRD whose status has no
        conditions yet (kubectl then fails at once with an accessor error, not a timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.kubectl(
                "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=10s", check=False
            )
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {crd} not Established: {result.stderr.strip()}")
            time.sleep(0.2)


@contextmanager
def kube_for_tests(log: Log = print) -> Iterator[Kube]:
    env_config = os.environ.get("KUBECONFIG")
    if env_config:
        tools = ensure_tools(CLIENT_TOOLS, log=log)
        log(f"using the cluster in KUBECONFIG={env_config}")
        yield Kube(Path(env_config), tools, None)
        return
    tools = ensure_tools(CLUSTER_TOOLS + CLIENT_TOOLS, log=log)
    with LocalCluster(tools, log=log) as cluster:
        yield Kube(cluster.kubeconfig, tools, cluster)


@contextmanager
def private_cluster(log: Log = print) -> Iterator[Kube]:
    """A local control plane of the caller's own, even with $KUBECONFIG set: for tests that
    change what every test shares (the CRDs' versions) or read its etcd (`kube.local`)."""
    tools = ensure_tools(CLUSTER_TOOLS + CLIENT_TOOLS, log=log)
    with LocalCluster(tools, log=log) as cluster:
        yield Kube(cluster.kubeconfig, tools, cluster)


@contextmanager
def real_node_cluster(
    log: Log = print,
    addons: Sequence[NodeAddon] = (),
    on_stopped: Callable[[], None] | None = None,
) -> Iterator[Kube]:
    """A local control plane with a real kubelet node too (root and `make node-deps` needed).

    Always local, even with $KUBECONFIG set: the node joins a control plane this process
    started. `kube.local.real_node` is the RealNode (its NodeInfo, import_image, …).
    """
    tools = ensure_tools(CLUSTER_TOOLS + CLIENT_TOOLS + REAL_NODE_TOOLS, log=log)
    node = RealNode(tools, addons=addons, on_stopped=on_stopped)
    with LocalCluster(tools, log=log, real_node=node) as cluster:
        yield Kube(cluster.kubeconfig, tools, cluster)
