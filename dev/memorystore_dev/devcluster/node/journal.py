"""The journal: everything the real node changed on this machine, written before each change.

Why: the node's processes die with the harness, but its host changes would survive a SIGKILL.
Each change is first recorded in a file under /run; teardown.py undoes what it says, at stop,
after a failed start, and at the next start after a killed run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path

from memorystore_dev.devcluster.node import host
from memorystore_dev.devcluster.node.settings import (
    BRIDGE,
    CGROUP_ROOT,
    CNI_NETWORK,
    POD_CIDR,
    SERVICE_CIDR,
)

__all__ = ["JOURNAL_PATH", "Journal", "new_journal"]

JOURNAL_PATH = Path("/run/memorystore-real-node.json")


@dataclasses.dataclass
class Journal:
    """Everything the node changed on this machine, enough to undo it after a SIGKILL."""

    pid: int
    workdir: str
    bridge: str
    pod_cidr: str
    service_cidr: str
    cgroup_root: str  # the kubelet's cgroupRoot, e.g. /memorystore-real-node
    containerd_socket: str = ""
    kube_proxy: str = ""  # the kube-proxy binary, for `kube-proxy --cleanup`
    kube_proxy_config: str = ""
    sysctls: dict[str, str] = dataclasses.field(default_factory=dict)
    routes: list[str] = dataclasses.field(default_factory=list)  # `ip route` specs we added
    chains: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # fam:table -> names
    netns_before: list[str] = dataclasses.field(default_factory=list)
    nft_tables_before: list[str] = dataclasses.field(default_factory=list)
    paths_before: list[str] = dataclasses.field(default_factory=list)
    shim_sockets_before: list[str] = dataclasses.field(default_factory=list)
    cni_network: str = ""
    created_bridge: bool = False

    def save(self) -> None:
        """Write atomically, before the change it describes is made."""
        partial = JOURNAL_PATH.with_suffix(".tmp")
        partial.write_text(json.dumps(dataclasses.asdict(self), indent=1))
        os.replace(partial, JOURNAL_PATH)

    @classmethod
    def load(cls) -> Journal | None:
        """The journal of a run that did not finish its teardown, if any."""
        try:
            data = json.loads(JOURNAL_PATH.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            # An unreadable journal is useless; say so rather than guess.
            return None
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    @staticmethod
    def remove() -> None:
        """Forget the journal once everything in it is undone."""
        with contextlib.suppress(FileNotFoundError):
            JOURNAL_PATH.unlink()


def new_journal(workdir: Path, socket: Path, kube_proxy: Path, kube_proxy_config: Path) -> Journal:
    """A starting node's journal: what the host holds before the node changes anything."""
    return Journal(
        pid=os.getpid(),
        workdir=str(workdir),
        bridge=BRIDGE,
        pod_cidr=POD_CIDR,
        service_cidr=SERVICE_CIDR,
        cgroup_root=CGROUP_ROOT,
        containerd_socket=str(socket),
        kube_proxy=str(kube_proxy),
        kube_proxy_config=str(kube_proxy_config),
        sysctls={n: v for n in host.SYSCTLS if (v := host.read_sysctl(n)) is not None},
        chains={
            f"{fam}:{table}": names
            for fam in (4, 6)
            for table, names in host.iptables_chains(fam).items()
        },
        netns_before=host.netns_names(),
        nft_tables_before=host.nft_tables(),
        paths_before=host.existing_paths(),
        shim_sockets_before=host.shim_sockets(),
        cni_network=CNI_NETWORK,
    )
