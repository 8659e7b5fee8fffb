"""Helm and the chart's ServiceAccount in cluster tests: the pinned helm against a Kube, and
a kubeconfig with a token of the account (the identity an in-cluster pod gets), so the
operator run as a local process has exactly the chart's RBAC."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from memorystore_dev.devcluster.target import Kube

__all__ = ["helm", "service_account_kubeconfig"]


def helm(kube: Kube, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(kube.tools["helm"]), f"--kubeconfig={kube.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def service_account_kubeconfig(kube: Kube, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount, with a token it was issued."""
    token = kube.kubectl("create", "token", account, "-n", namespace, "--duration=1h").stdout
    admin = yaml.safe_load(kube.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "cluster", "cluster": cluster}],
                "users": [{"name": account, "user": {"token": token.strip()}}],
                "contexts": [{"name": "sa", "context": {"cluster": "cluster", "user": account}}],
                "current-context": "sa",
            }
        )
    )
    return path
