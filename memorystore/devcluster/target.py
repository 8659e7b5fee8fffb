"""Which cluster tests run against: $KUBECONFIG when set (any real cluster), else a local
control plane started for the session. Either way, commands go through the pinned kubectl.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorystore.devcluster.build import ensure_tools
from memorystore.devcluster.cluster import LocalCluster, Log

CLUSTER_TOOLS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
CLIENT_TOOLS = ["kubectl", "helm"]


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
