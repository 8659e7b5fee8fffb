"""`kubectl memorystore …` run as a user runs it: kubectl itself finds the plugin
(`kubectl-memorystore`, installed with the product into this venv's bin) on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memorystore_dev.devcluster.target import Kube

__all__ = ["plugin"]


def plugin(
    kube: Kube, namespace: str, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    kubectl = kube.tools["kubectl"]
    path = os.pathsep.join([str(Path(sys.executable).parent), str(kubectl.parent),
                            os.environ.get("PATH", "")])  # fmt: skip
    env = {**os.environ, "PATH": path, "KUBECONFIG": str(kube.kubeconfig)}
    return subprocess.run(
        [str(kubectl), "memorystore", *args, "-n", namespace],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
