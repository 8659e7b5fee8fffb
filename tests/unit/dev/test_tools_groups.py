"""The pinned tools and their groups (tools/groups.py, versions.py): sane pins, and CoreDNS
built with exactly the plugins the real node's Corefile uses."""

from __future__ import annotations

import re
from pathlib import Path

from memorystore_dev.devcluster import versions
from memorystore_dev.devcluster.node.coredns import coredns_corefile
from memorystore_dev.devcluster.tools import groups
from memorystore_dev.devcluster.tools.cache import tool_path
from memorystore_dev.devcluster.tools.gomod import parse_semver, wrapper_go_mod


def test_coredns_is_our_own_main_with_only_the_corefile_plugins():
    group = groups.group_of("coredns")
    source = group.main_go or ""
    imported = re.findall(r'_ "github.com/coredns/coredns/plugin/(\w+)"', source)
    assert imported == list(groups.COREDNS_PLUGINS)
    directives = '"bind", "ready", "health", "errors", "cache", "kubernetes"'
    assert f"dnsserver.Directives = []string{{{directives}}}" in source
    # Exactly the directives of the node's Corefile are compiled in (nothing forwards out).
    corefile = coredns_corefile(Path("/k/kubeconfig"), 8080, 8181)
    directives = {line.split()[0] for line in corefile.splitlines() if line.startswith("    ")}
    directives -= {"kubeconfig", "pods", "fallthrough", "ttl", "}"}
    assert directives == set(groups.COREDNS_PLUGINS)
    # Its own main needs no tool directive, and the slim binary has its own cache key.
    mod = wrapper_go_mod(group, "module github.com/coredns/coredns\ngo 1.26.0\n", ["coredns"])
    assert "tool (\n)" in mod and f"github.com/coredns/coredns {group.version}" in mod
    assert group.packages["coredns"] == group.wrapper
    assert tool_path("coredns", group.key, Path("/c")).parent.name == (
        f"coredns-{versions.COREDNS}-plugins-bind-ready-health-errors-cache-kubernetes"
    )


def test_pins_are_sane():
    assert set(versions.TOOL_VERSIONS) == set(groups.TOOLS)
    for tool, version in versions.TOOL_VERSIONS.items():
        parse_semver(version)  # vX.Y.Z, no pre-release
        assert "-" not in version, tool
        assert groups.group_of(tool).version == version
    kube = {versions.TOOL_VERSIONS[t] for t in groups.group_of("kubectl").packages}
    assert kube == {versions.KUBERNETES}
    assert parse_semver(versions.HELM)[0] == 3
    assert parse_semver(versions.ETCD)[:2] >= (3, 5)
    # kwok's client-go may trail the control plane by at most one minor (kwok v0.8 → 1.36).
    assert parse_semver(versions.KUBERNETES)[:2] >= (1, 36)
