"""A Secret volume as kubelet keeps it, for processes that run outside the simulated nodes.

kubelet writes each key of a mounted Secret as a file and, when the Secret changes, swaps
the new files in atomically and removes the files of keys that are gone. `sync_secret`
does the same from the API server's copy, so a test can "refresh the mount" at the moment
it chooses (kubelet's own delay is up to about a minute).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from memorystore_dev.devcluster.target import Kube


def sync_secret(kube: Kube, namespace: str, name: str, directory: Path) -> set[str]:
    """Make `directory` hold exactly the Secret's keys as files; return the key names."""
    data = kube.get("secret", name, "-n", namespace).get("data") or {}
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        tmp = directory / f".{key}.tmp"
        tmp.write_bytes(base64.b64decode(value))
        os.replace(tmp, directory / key)
    for path in directory.iterdir():
        if not path.name.startswith(".") and path.name not in data:
            path.unlink()
    return set(data)
