"""The node's cgroup tree in every cgroup v1 hierarchy: made before the kubelet, removed after.

Why: the kubelet's cgroupRoot must exist before it starts, and the pods in that tree are how
a killed run's leftovers are found.
"""

from __future__ import annotations

import contextlib
import time

from memorystore_dev.devcluster.node.host import CGROUP_ROOT

__all__ = ["make_cgroups", "pids_in_cgroups", "remove_cgroups"]


def pids_in_cgroups(root_name: str) -> list[int]:
    """PIDs in any cgroup under `root_name` in any v1 controller (the node's pods)."""
    pids: set[int] = set()
    for controller in CGROUP_ROOT.iterdir():
        base = controller / root_name.strip("/")
        if not base.is_dir():
            continue
        for procs in base.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(x) for x in procs.read_text().split())
    return sorted(pids)


def make_cgroups(root_name: str) -> None:
    """Create `root_name` in every cgroup v1 hierarchy (cpuset inherits its parent's CPUs)."""
    for controller in sorted(CGROUP_ROOT.iterdir()):
        if not controller.is_dir() or controller.name == "unified":
            continue
        if not (controller / "cgroup.procs").exists():
            continue
        base = controller / root_name.strip("/")
        base.mkdir(exist_ok=True)
        if controller.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if not (base / knob).read_text().strip():
                    (base / knob).write_text((controller / knob).read_text())


def remove_cgroups(root_name: str) -> list[str]:
    """rmdir the node's cgroup tree in every controller, leaves first; errors returned."""
    errors = []
    for controller in CGROUP_ROOT.iterdir():
        base = controller / root_name.strip("/")
        if not base.is_dir():
            continue
        dirs = sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for path in [*dirs, base]:
            for attempt in range(20):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if attempt == 19:
                        errors.append(f"rmdir {path}: {exc}")
                    time.sleep(0.1)
    return errors
