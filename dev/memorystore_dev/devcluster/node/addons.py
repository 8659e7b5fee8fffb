"""What an addon of the real node is given and must provide, and the ready-made host process.

Why a protocol: an extra component (the NetworkPolicy enforcer, a test's probe) starts after
the node is up and stops before it, with the node's addresses, logs and credentials at hand,
without the node knowing what it is.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memorystore_dev.devcluster.cluster import Component

__all__ = ["HostProcess", "NodeAddon", "NodeInfo"]


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """What an addon needs to know about the running node (see the module docstring)."""

    name: str
    bridge: str
    pod_cidr: str
    gateway: str
    service_cidr: str
    cluster_domain: str
    dns_ip: str
    workdir: Path
    logs: Path
    api_server: str  # the API server URL on loopback
    admin_kubeconfig: Path
    node_kubeconfig: Path  # the kubelet's own (system:node:<name>)
    kubeconfig_for: Callable[[str, str, str | None], Path]
    spawn: Callable[[str, list[str]], Component]


class NodeAddon(Protocol):
    """An extra component of the node, started after it is up and stopped before it."""

    name: str

    def start(self, info: NodeInfo) -> None: ...

    def alive(self) -> bool: ...

    def stop(self) -> None: ...


@dataclasses.dataclass
class HostProcess:
    """An addon that is one host process: `argv(info)` → the command; `ready(info)` polled."""

    name: str
    argv: Callable[[NodeInfo], list[str]]
    ready: Callable[[NodeInfo], bool] | None = None
    ready_timeout: float = 60.0
    component: Component | None = None

    def start(self, info: NodeInfo) -> None:
        """Spawn the process and wait until `ready` says so (or it exits)."""
        self.component = info.spawn(self.name, self.argv(info))
        if self.ready is None:
            return
        deadline = time.monotonic() + self.ready_timeout
        while not self.ready(info):
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.component.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not ready after {self.ready_timeout:.0f} s")
            time.sleep(0.2)

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.component is not None and self.component.process.poll() is None

    def stop(self) -> None:
        """SIGTERM its process group, SIGKILL if it lingers."""
        from memorystore_dev.devcluster.cluster import terminate

        if self.component is not None:
            terminate(self.component.process)
