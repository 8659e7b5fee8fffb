"""Rendering the chart with the pinned helm, and picking objects out of what it renders:
what the chart's tests share (tests/unit/charts/conftest.py has the `helm` fixture)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from support.paths import REPO

__all__ = [
    "CHART",
    "CLUSTER_WIDE",
    "NAMESPACE",
    "NAMESPACED",
    "RELEASE",
    "WATCHED",
    "of_kind",
    "one",
    "render",
    "run_helm",
]

CHART = REPO / "charts" / "memorystore"
RELEASE = "ms"
NAMESPACE = "memorystore-system"
WATCHED = ["tenant-a", "tenant-b"]
NAMESPACED = ["--set", "watch.namespaces={" + ",".join(WATCHED) + "}"]
CLUSTER_WIDE = ["--set", "watch.clusterWide=true"]


def run_helm(helm: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
    return result


def render(helm: Path, *values: str, chart: Path = CHART) -> list[dict[str, Any]]:
    out = run_helm(helm, "template", RELEASE, str(chart), "--namespace", NAMESPACE, *values)
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = of_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]
