"""The pods' network: the CNI bridge and host-local plugins on the harness's bridge.

Why this config: each pod gets an address from the pod CIDR on the bridge; the harness owns
the gateway address (so no plugin sets it), nothing is NATed out of the machine, and hairpin
mode lets a pod reach itself through a Service.
"""

from __future__ import annotations

import json
from pathlib import Path

from memorystore_dev.devcluster.node.settings import BRIDGE, CNI_NETWORK, GATEWAY, POD_CIDR

__all__ = ["CNI_BIN", "REQUIRED_CNI", "write_cni_config"]

CNI_BIN = Path("/usr/lib/cni")
REQUIRED_CNI = ("bridge", "host-local", "portmap", "loopback")


def write_cni_config(cni: Path) -> None:
    """The node's one CNI network, in `cni`/net.d (containerd's conf_dir)."""
    (cni / "net.d").mkdir(parents=True, exist_ok=True)
    (cni / "net.d" / "10-memorystore.conflist").write_text(
        json.dumps(
            {
                "cniVersion": "0.4.0",
                "name": CNI_NETWORK,
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": BRIDGE,
                        "isGateway": False,  # the harness owns the gateway address
                        "ipMasq": False,  # nothing is NATed out of the machine
                        "hairpinMode": True,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                            "routes": [{"dst": "0.0.0.0/0"}],
                            "dataDir": str(cni / "ipam"),
                        },
                    },
                    {"type": "portmap", "capabilities": {"portMappings": True}},
                ],
            },
            indent=1,
        )
    )
