"""What the real node needs on this machine, and why it cannot start when something lacks.

Why up front: a missing package or tool would otherwise show as a failed step minutes into
the start; the message names the Debian package and the make step that installs it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from memorystore_dev.devcluster.node import host
from memorystore_dev.devcluster.node.cni import CNI_BIN, REQUIRED_CNI

__all__ = ["NODE_TOOLS", "REQUIRED_COMMANDS", "missing_requirements"]

NODE_TOOLS = ("kubelet", "kube-proxy", "coredns", "kube-network-policies")

# Host commands the node runs, and the Debian package of each (for the error message).
REQUIRED_COMMANDS: dict[str, str] = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "iptables-restore": "iptables",
    "ip6tables-save": "iptables",
    "conntrack": "conntrack",
    "ipset": "ipset",
    "nft": "nftables",
    "ip": "iproute2",
    "gcc": "gcc",
}


def missing_requirements(tools: dict[str, Path] | None = None) -> list[str]:
    """Why a real node cannot start on this machine (empty when it can)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the real node needs root (bridges, iptables, mounts, cgroups)")
    packages: dict[str, list[str]] = {}
    for command, package in REQUIRED_COMMANDS.items():
        if not shutil.which(command, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            packages.setdefault(package, []).append(command)
    for plugin in REQUIRED_CNI:
        if not (CNI_BIN / plugin).is_file():
            packages.setdefault("containernetworking-plugins", []).append(str(CNI_BIN / plugin))
    for package, what in packages.items():
        problems.append(
            f"Debian package {package} is missing (no {', '.join(what)}): run `make node-deps` "
            "as root"
        )
    if (
        not (host.CGROUP_ROOT / "memory").is_dir()
        and not (host.CGROUP_ROOT / "cgroup.controllers").exists()
    ):
        problems.append(f"no cgroup memory controller under {host.CGROUP_ROOT}")
    for tool in NODE_TOOLS if tools is not None else ():
        if tool not in tools:
            problems.append(f"tool {tool} was not built (memorystore dev tools --tools {tool})")
    return problems
