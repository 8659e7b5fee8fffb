"""A real kubelet node beside kwok's simulated one, for tests that need pods to really run.

`LocalCluster(tools, real_node=RealNode(tools))` starts, next to the control plane on loopback:
containerd (Debian's, its own config, root, state and socket in the cluster's workdir), the
kubelet and kube-proxy (iptables mode) from the pinned k8s.io/kubernetes module, CoreDNS as a
host process, a relay that lets pods reach the API server, a hostPath provisioner behind a
default StorageClass, and a NetworkPolicy enforcer (kube-network-policies, the first addon:
../netpol.py; `network_policies=False` leaves it out). Needs root and the Debian packages of
`make node-deps`.

Interfaces (for extra host processes such as a NetworkPolicy enforcer)
- Node name `real-node-1` (NODE_NAME), labels `memorystore.dev/node=real` and
  `kubernetes.io/hostname=real-node-1`, taint `memorystore.dev/real-node=true:NoSchedule`
  (REAL_NODE_TAINT): only pods that tolerate it run here, so kwok-based tests are unaffected.
- Linux bridge `msnode0` (BRIDGE) with gateway `10.244.0.1/24` (GATEWAY); pod CIDR
  `10.244.0.0/24` (POD_CIDR) handed out by the CNI bridge + host-local plugins
  (`ipMasq: false`, no default gateway on the host side: the harness owns the address).
  br_netfilter is on, so bridged pod-to-pod frames traverse iptables FORWARD with
  `-i msnode0 -o msnode0`.
- Service CIDR `10.96.0.0/16` (SERVICE_CIDR), DNAT'ed by kube-proxy; a blackhole route drops
  any Service address kube-proxy did not translate. `kubernetes` Service → 10.244.0.1:<API
  port> (a relay to the API server on loopback). Cluster DNS: CoreDNS on 10.244.0.1:53,
  domain `cluster.local`, no upstream resolvers.
- Network safety: the chains MEMORYSTORE-NODE-FWD (first rule of mangle FORWARD) and
  MEMORYSTORE-NODE-OUT (first rule of mangle POSTROUTING) drop anything to or from the pods
  that is not pod-to-pod or pod-to-host, and any Service connection DNAT'ed off the pod
  network. They sit in the mangle table, which the kernel runs before filter, so no filter
  rule (kube-proxy's ACCEPTs, an enforcer's NFQUEUE verdicts) can let a packet past them.
  Addons keep out of mangle FORWARD/POSTROUTING or call `RealNode.ensure_safety_first()`
  after inserting there (the harness calls it after each addon starts anyway).
- Addons: `RealNode(..., addons=[...])` takes objects with `name`, `start(info: NodeInfo)`,
  `alive() -> bool` and `stop()`; they start after the kubelet, kube-proxy and CoreDNS are up
  and stop first. `HostProcess` is the ready-made one: a host process started with argv built
  from the NodeInfo, logged to `<workdir>/logs/<name>.log`, dying with the harness, stopped by
  PID. `NodeInfo.kubeconfig_for(stem, user, group)` issues a client certificate from the
  cluster's CA and writes a kubeconfig for it (bind RBAC to that user yourself), and
  `NodeInfo.admin_kubeconfig` is the cluster admin's.
- Host state is journaled (journal.py) and restored (teardown.py) at stop, after a failed
  start and at the next start after a SIGKILL. Tests that change host networking should hold
  `host.host_lock()` so they never run beside a node.

The pieces live in modules by concern: `settings` (names and addresses), `requirements`,
`addons`, `network` (bridge, route, guard chains), `cni`, `containerd` (config, `ctr`, image
import), `kubelet` (kubelet and kube-proxy configs), `coredns`, `provisioner`, `relay`, `oci`
(the pause image), `lifecycle` (RealNode); on the host: `host` (commands, what is there, the
lock), `journal`, `processes`, `cgroups`, `teardown`. This package is their public surface.
"""

from __future__ import annotations

from memorystore_dev.devcluster.node.addons import HostProcess, NodeAddon, NodeInfo
from memorystore_dev.devcluster.node.lifecycle import (
    NodeStartError,
    RealNode,
    node_ready,
    undo_leftovers,
)
from memorystore_dev.devcluster.node.provisioner import PROVISIONER, STORAGE_CLASS
from memorystore_dev.devcluster.node.requirements import NODE_TOOLS, missing_requirements
from memorystore_dev.devcluster.node.settings import (
    BRIDGE,
    CLUSTER_DOMAIN,
    FWD_CHAIN,
    GATEWAY,
    NODE_NAME,
    OUT_CHAIN,
    POD_CIDR,
    REAL_NODE_TAINT,
    SERVICE_CIDR,
)

__all__ = [
    "BRIDGE",
    "CLUSTER_DOMAIN",
    "FWD_CHAIN",
    "GATEWAY",
    "NODE_NAME",
    "NODE_TOOLS",
    "OUT_CHAIN",
    "POD_CIDR",
    "PROVISIONER",
    "REAL_NODE_TAINT",
    "SERVICE_CIDR",
    "STORAGE_CLASS",
    "HostProcess",
    "NodeAddon",
    "NodeInfo",
    "NodeStartError",
    "RealNode",
    "missing_requirements",
    "node_ready",
    "undo_leftovers",
]
