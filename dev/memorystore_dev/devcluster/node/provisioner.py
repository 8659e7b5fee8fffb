"""The harness's own dynamic provisioner: hostPath volumes under the node's workdir.

Why not local-path-provisioner: the Go module proxy serves it at v0.0.30 only, and it creates
and removes each volume's folder through a helper pod running a `busybox` image, which no
registry here can provide. Kubernetes needs very little to provision: watch claims that the
PV controller has handed to this provisioner (the `volume.kubernetes.io/storage-provisioner`
annotation, set from the StorageClass), create a PersistentVolume bound to the claim
(`claimRef`) and pinned to the node the scheduler selected (WaitForFirstConsumer), and delete
the folder and the volume once released under the Delete reclaim policy.

Not a product component: it trusts nothing in a PV but its own annotation and only ever
removes folders directly under its own root.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "PROVISIONER",
    "STORAGE_CLASS",
    "HostPathProvisioner",
    "storage_class",
    "volume_for",
]

PROVISIONER = "memorystore.dev/hostpath"
STORAGE_CLASS = "memorystore-local"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)

ClientFactory = Callable[[], AbstractContextManager[httpx.Client]]


def storage_class(name: str = STORAGE_CLASS) -> dict[str, Any]:
    """The default StorageClass served by this provisioner."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": name,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        # The scheduler picks the node first; the volume then lives on that node.
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def volume_for(
    claim: dict[str, Any], node: str, path: Path, reclaim: str, class_name: str
) -> dict[str, Any]:
    """The PersistentVolume that satisfies `claim` with the folder `path` on `node`."""
    meta, spec = claim["metadata"], claim["spec"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": path.name,
            "annotations": {PROVISIONED_BY: PROVISIONER},
            "labels": {"memorystore.dev/provisioner": "hostpath"},
        },
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "persistentVolumeReclaimPolicy": reclaim,
            "storageClassName": class_name,
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "hostPath": {"path": str(path), "type": "Directory"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            },
        },
    }


class HostPathProvisioner:
    """A thread that provisions and deletes hostPath volumes; `errors` counts failed passes."""

    def __init__(
        self,
        client: ClientFactory,
        root: Path,
        log_path: Path,
        default_node: str,
        interval: float = 0.5,
    ) -> None:
        self.client = client
        self.root = root
        self.log_path = log_path
        self.default_node = default_node
        self.interval = interval
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start reconciling in a daemon thread."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name="hostpath-provisioner", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        """Whether the thread still runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop the thread (volumes stay: the node's teardown removes its workdir)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _say(self, line: str) -> None:
        with self.log_path.open("a") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {line}\n")

    def _loop(self) -> None:
        with self.client() as api:
            while not self._stop.is_set():
                try:
                    self.reconcile(api)
                except Exception:  # log, count, retry on the next pass
                    self.errors += 1
                    self._say(traceback.format_exc())
                self._stop.wait(self.interval)

    def reconcile(self, api: httpx.Client) -> None:
        """One pass: provision pending claims handed to us, delete released volumes."""
        claims = api.get("/api/v1/persistentvolumeclaims").raise_for_status().json()["items"]
        volumes = api.get("/api/v1/persistentvolumes").raise_for_status().json()["items"]
        existing = {v["metadata"]["name"] for v in volumes}
        for claim in claims:
            meta, spec = claim["metadata"], claim["spec"]
            annotations = meta.get("annotations") or {}
            if claim.get("status", {}).get("phase") != "Pending" or spec.get("volumeName"):
                continue
            if not any(annotations.get(key) == PROVISIONER for key in STORAGE_PROVISIONER):
                continue
            name = f"pvc-{meta['uid']}"
            if name in existing:
                continue
            class_name = spec.get("storageClassName") or ""
            cls = api.get(f"/apis/storage.k8s.io/v1/storageclasses/{class_name}")
            if cls.status_code != 200:
                continue
            node = annotations.get(SELECTED_NODE)
            if not node:
                if cls.json().get("volumeBindingMode") == "WaitForFirstConsumer":
                    continue  # the scheduler has not chosen a node yet
                node = self.default_node
            path = self.root / name
            path.mkdir(mode=0o777, exist_ok=True)
            path.chmod(0o777)  # pods of any uid may write, as with local-path-provisioner
            body = volume_for(
                claim, node, path, cls.json().get("reclaimPolicy", "Delete"), class_name
            )
            made = api.post("/api/v1/persistentvolumes", json=body)
            if made.status_code not in (201, 409):
                made.raise_for_status()
            self._say(f"provisioned {name} for {meta['namespace']}/{meta['name']} on {node}")
        for volume in volumes:
            meta, spec = volume["metadata"], volume["spec"]
            if (meta.get("annotations") or {}).get(PROVISIONED_BY) != PROVISIONER:
                continue
            if volume.get("status", {}).get("phase") not in ("Released", "Failed"):
                continue
            if spec.get("persistentVolumeReclaimPolicy") != "Delete":
                continue
            self.delete_folder(meta["name"], (spec.get("hostPath") or {}).get("path", ""))
            gone = api.delete(f"/api/v1/persistentvolumes/{meta['name']}")
            if gone.status_code not in (200, 202, 404):
                gone.raise_for_status()
            self._say(f"deleted {meta['name']}")

    def delete_folder(self, name: str, path: str) -> None:
        """Remove a volume's folder, only if it is exactly `<root>/<volume name>`."""
        folder = Path(path)
        if folder.parent.resolve() != self.root.resolve() or folder.name != name:
            self._say(f"refused to delete {path!r} for {name}: not {self.root}/{name}")
            return
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(folder)
