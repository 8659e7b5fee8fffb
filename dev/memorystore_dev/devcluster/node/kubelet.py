"""The configs of the kubelet and kube-proxy, the node's two Kubernetes components.

Why these settings: the node shares the machine with everything else, so both listen on the
bridge address or loopback only, leave the machine's kernel settings, conntrack limits and
oom scores alone, and take DNS only from the cluster (no host resolvers in pods).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memorystore_dev.devcluster.node.settings import (
    CGROUP_ROOT,
    CLUSTER_DOMAIN,
    GATEWAY,
    NODE_NAME,
    POD_CIDR,
    REAL_NODE_TAINT,
)
from memorystore_dev.devcluster.pki import Pair

__all__ = ["kube_proxy_config", "kubelet_config"]


def kubelet_config(
    wd: Path, socket: Path, ca: Path, serving: Pair, port: int, healthz_port: int
) -> dict[str, Any]:
    """The KubeletConfiguration: serving on the bridge address, the CRI at `socket`."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": GATEWAY,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(serving.cert),
        "tlsPrivateKeyFile": str(serving.key),
        "authentication": {
            "x509": {"clientCAFile": str(ca)},
            "webhook": {"enabled": True},
            "anonymous": {"enabled": False},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": CGROUP_ROOT,
        "cgroupsPerQOS": True,
        "failCgroupV1": False,  # this machine has cgroup v1 only
        "failSwapOn": False,
        "oomScoreAdj": 0,  # no CAP_SYS_RESOURCE for a negative one
        "makeIPTablesUtilChains": False,  # kube-proxy owns iptables
        "protectKernelDefaults": False,  # it sets kernel.panic & co: the journal restores
        "clusterDNS": [GATEWAY],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": "",  # no host resolvers in pods: DNS never leaves the machine
        "podLogsDir": str(wd / "pod-logs"),
        "volumePluginDir": str(wd / "volume-plugins"),
        "registerWithTaints": [REAL_NODE_TAINT],
        "maxPods": 60,
        "serializeImagePulls": False,
        "syncFrequency": "10s",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "staticPodPath": "",
    }


def kube_proxy_config(kubeconfig: Path, health: int, metrics: int) -> dict[str, Any]:
    """The KubeProxyConfiguration: iptables mode, NodePorts on the bridge address only."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "detectLocalMode": "ClusterCIDR",
        "healthzBindAddress": f"127.0.0.1:{health}",
        "metricsBindAddress": f"127.0.0.1:{metrics}",
        # NodePorts only on the bridge address: never on the machine's own network.
        "nodePortAddresses": [f"{GATEWAY}/32"],
        "iptables": {
            "localhostNodePorts": False,
            "masqueradeAll": False,
            "minSyncPeriod": "0s",
        },
        # 0: leave the machine's conntrack sysctls alone.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "oomScoreAdj": 0,
    }
