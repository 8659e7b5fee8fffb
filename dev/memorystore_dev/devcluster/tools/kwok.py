"""kwok's Stage config, taken from the pinned kwok module itself and cached.

Why: kwok v0.8 has no built-in stages, and kwokctl's defaults ship only inside its module.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from memorystore_dev.devcluster import versions
from memorystore_dev.devcluster.tools.cache import cache_root
from memorystore_dev.devcluster.tools.errors import BuildError
from memorystore_dev.devcluster.tools.toolchain import _run, find_go

__all__ = ["KWOK_STAGE_DIRS", "kwok_stages"]

# kwok's "fast" simulation (kwok v0.8 has no built-in stages): nodes become Ready and keep
# a lease, pods become Ready, complete and are deleted — the stages kwokctl uses by default.
KWOK_STAGE_DIRS = ("node/fast", "node/heartbeat-with-lease", "pod/fast")


def kwok_stages(root: Path | None = None) -> Path:
    """The Stage config of the pinned kwok, taken from its own Go module and cached."""
    root = cache_root() if root is None else root
    target = root / f"kwok-stages-{versions.KWOK}.yaml"
    if target.is_file() and target.stat().st_size > 0:
        return target
    info = json.loads(
        _run(
            [find_go(), "mod", "download", "-json", f"sigs.k8s.io/kwok@{versions.KWOK}"],
            None,
            "downloading the kwok module",
        )
    )
    stage_root = Path(info["Dir"]) / "kustomize" / "stage"
    docs = [
        path.read_text()
        for rel in KWOK_STAGE_DIRS
        for path in sorted((stage_root / rel).glob("*.yaml"))
        if path.name != "kustomization.yaml"
    ]
    if not docs:
        raise BuildError(f"no kwok stages under {stage_root}")
    root.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text("\n---\n".join(doc.strip() for doc in docs) + "\n")
    os.replace(partial, target)
    return target
