"""The real node's fixed names and addresses, which addons and tests name too.

Why fixed: one real node runs per machine at a time (host.py's lock), so its name, bridge,
CIDRs and guard chains need no per-run choice, and a test can name them as constants.
"""

from __future__ import annotations

from memorystore_dev.devcluster.node.host import GUARD_CHAINS

__all__ = [
    "BRIDGE",
    "CGROUP_ROOT",
    "CLUSTER_DOMAIN",
    "CNI_NETWORK",
    "FWD_CHAIN",
    "GATEWAY",
    "NODE_LABEL",
    "NODE_NAME",
    "OUT_CHAIN",
    "POD_CIDR",
    "REAL_NODE_TAINT",
    "SERVICE_CIDR",
]

NODE_NAME = "real-node-1"
NODE_LABEL = ("memorystore.dev/node", "real")
REAL_NODE_TAINT = {"key": "memorystore.dev/real-node", "value": "true", "effect": "NoSchedule"}
BRIDGE = "msnode0"
POD_CIDR = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_DOMAIN = "cluster.local"
CGROUP_ROOT = "/memorystore-real-node"
CNI_NETWORK = "memorystore-real-node"
FWD_CHAIN, OUT_CHAIN = GUARD_CHAINS
