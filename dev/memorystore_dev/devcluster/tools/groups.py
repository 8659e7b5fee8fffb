"""The pinned tools, grouped by the Go module that builds them.

Why groups: the binaries of one module (kube-apiserver, kubectl, the kubelet, …) come from one
`go build`, so the packages they share compile once. A group names its module and pin
(versions.py), each tool's main package, and what its version output must say.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from memorystore_dev.devcluster import versions

__all__ = ["COREDNS_PLUGINS", "GROUPS", "TOOLS", "Group", "coredns_main", "group_of"]


@dataclasses.dataclass(frozen=True)
class Group:
    """Binaries from one Go module, built by one `go build` so shared packages compile once."""

    name: str
    module: str
    version: str
    packages: Mapping[str, str]  # tool -> main package import path
    version_args: Mapping[str, tuple[str, ...]]  # tool -> arguments that print its version
    expect: str  # text every version output must contain
    tags: tuple[str, ...] = ()
    # A `package main` of our own, written into the wrapper module (its packages then name
    # the wrapper module itself), and the word that tells its build apart in the cache.
    main_go: str | None = None
    variant: str = ""

    @property
    def wrapper(self) -> str:
        """Import path of the generated wrapper module."""
        return f"memorystore.local/k8s-tools/{self.name}"

    @property
    def key(self) -> str:
        """The cache key's version part: the pin, plus the variant of a build of our own."""
        return f"{self.version}-{self.variant}" if self.variant else self.version


def _k8s_cmd(tool: str) -> str:
    """Import path of a k8s.io/kubernetes command."""
    return f"k8s.io/kubernetes/cmd/{tool}"


# The CoreDNS plugins the real node's Corefile uses, in plugin.cfg's order (which is the order
# they run in). The upstream main links all ~60 plugins and their cloud SDKs (1403 packages,
# the longest build of the harness); this one links these six (797 packages).
COREDNS_PLUGINS = ("bind", "ready", "health", "errors", "cache", "kubernetes")


def coredns_main(plugins: Sequence[str]) -> str:
    """A CoreDNS `package main` with only `plugins` compiled in (CoreDNS's documented way to
    choose plugins at build time: import them and set dnsserver.Directives)."""
    imports = "".join(f'\t_ "github.com/coredns/coredns/plugin/{p}"\n' for p in plugins)
    names = ", ".join(f'"{p}"' for p in plugins)
    return (
        "package main\n\nimport (\n"
        '\t"github.com/coredns/coredns/core/dnsserver"\n'
        '\t"github.com/coredns/coredns/coremain"\n'
        f"{imports})\n\n"
        f"func init() {{ dnsserver.Directives = []string{{{names}}} }}\n\n"
        "func main() { coremain.Run() }\n"
    )


GROUPS: tuple[Group, ...] = (
    Group(
        name="kubernetes",
        module="k8s.io/kubernetes",
        version=versions.KUBERNETES,
        packages={
            t: _k8s_cmd(t)
            for t in (
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubectl",
                "kubelet",
                "kube-proxy",
            )
        },
        version_args={
            "kube-apiserver": ("--version",),
            "kube-controller-manager": ("--version",),
            "kube-scheduler": ("--version",),
            "kubectl": ("version", "--client"),
            "kubelet": ("--version",),
            "kube-proxy": ("--version",),
        },
        expect=versions.KUBERNETES,
        # The tags hack/lib/golang.sh uses for release builds.
        tags=("selinux", "notest", "grpcnotrace"),
    ),
    Group(
        name="etcd",
        module="go.etcd.io/etcd/server/v3",
        version=versions.ETCD,
        packages={"etcd": "go.etcd.io/etcd/server/v3"},
        version_args={"etcd": ("--version",)},
        expect=f"etcd Version: {versions.ETCD.removeprefix('v')}",
    ),
    Group(
        name="kwok",
        module="sigs.k8s.io/kwok",
        version=versions.KWOK,
        packages={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
        version_args={"kwok": ("--version",)},
        expect=versions.KWOK.removeprefix("v"),
    ),
    Group(
        name="helm",
        module="helm.sh/helm/v3",
        version=versions.HELM,
        packages={"helm": "helm.sh/helm/v3/cmd/helm"},
        version_args={"helm": ("version", "--short")},
        expect=versions.HELM,
    ),
    Group(
        # The real node's cluster DNS (node/), with only the plugins its Corefile uses.
        name="coredns",
        module="github.com/coredns/coredns",
        version=versions.COREDNS,
        packages={"coredns": "memorystore.local/k8s-tools/coredns"},
        version_args={"coredns": ("-version",)},
        expect=f"CoreDNS-{versions.COREDNS.removeprefix('v')}",
        main_go=coredns_main(COREDNS_PLUGINS),
        variant="plugins-" + "-".join(COREDNS_PLUGINS),
    ),
    Group(
        # The real test node's NetworkPolicy enforcer (netpol.py). It has no version flag (nor
        # a stamped version); `--help` proves the binary runs.
        name="kube-network-policies",
        module="sigs.k8s.io/kube-network-policies",
        version=versions.KUBE_NETWORK_POLICIES,
        packages={"kube-network-policies": "sigs.k8s.io/kube-network-policies/cmd"},
        version_args={"kube-network-policies": ("--help",)},
        expect="Usage: kube-network-policies",
    ),
    Group(
        # The GitHub workflows' linter (`make lint`), stamped with its pin as its release is.
        name="actionlint",
        module="github.com/rhysd/actionlint",
        version=versions.ACTIONLINT,
        packages={"actionlint": "github.com/rhysd/actionlint/cmd/actionlint"},
        version_args={"actionlint": ("-version",)},
        expect=versions.ACTIONLINT.removeprefix("v"),
    ),
    Group(
        # The alert rules' checker and unit-test runner (tests/unit/charts/test_monitoring.py),
        # stamped with its module pin (prometheus/common's version variable).
        name="prometheus",
        module="github.com/prometheus/prometheus",
        version=versions.PROMETHEUS,
        packages={"promtool": "github.com/prometheus/prometheus/cmd/promtool"},
        version_args={"promtool": ("--version",)},
        expect=versions.PROMETHEUS,
        # upstream's tag that leaves out the cloud service discoveries (AWS, Azure, GCE, …):
        # rules are all promtool checks here, and their SDKs are most of a cold build
        tags=("remove_all_sd",),
    ),
)
TOOLS: tuple[str, ...] = tuple(t for g in GROUPS for t in g.packages)


def group_of(tool: str) -> Group:
    """The group that builds `tool`; a clear error names the tools there are."""
    for group in GROUPS:
        if tool in group.packages:
            return group
    raise ValueError(f"unknown tool {tool!r}; known tools: {', '.join(TOOLS)}")
