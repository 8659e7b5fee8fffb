"""The node's cluster DNS: CoreDNS as a host process on the bridge address.

Why no `forward`: a name outside the cluster gets an error, so no query leaves the machine;
and it runs with its own certificate's user, allowed to list and watch only what it serves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memorystore_dev.devcluster.node.settings import CLUSTER_DOMAIN, GATEWAY

__all__ = ["coredns_corefile"]


def coredns_corefile(kubeconfig: Path, health: int, ready: int) -> str:
    """The node's Corefile. No `forward`: a name outside the cluster gets an error, and no
    query leaves the machine. Its plugins are the ones tools.groups.COREDNS_PLUGINS compiles in."""
    return f""".:53 {{
    bind {GATEWAY}
    errors
    health 127.0.0.1:{health}
    ready 127.0.0.1:{ready}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
}}
"""


def _coredns_rbac(user: str) -> list[tuple[str, dict[str, Any]]]:
    """What CoreDNS's kubernetes plugin reads, bound to its certificate's user."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "memorystore:coredns"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["endpoints", "services", "pods", "namespaces"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "memorystore:coredns"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "memorystore:coredns",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return [(f"{rbac}/clusterroles", role), (f"{rbac}/clusterrolebindings", binding)]
