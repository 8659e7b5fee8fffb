"""The pure parts of the tool builder: go.mod generation, ldflags, cache layout, pins.

No network and no Go: the real build is slow and is run by hand or by the harness.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from memorystore_dev.devcluster import build, node, versions

# A cut-down k8s.io/kubernetes go.mod with everything the wrapper generation looks at.
KUBERNETES_GO_MOD = """\
// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/spf13/cobra v1.10.2
\tgo.etcd.io/etcd/client/v3 v3.7.0
\tk8s.io/api v0.0.0
\tk8s.io/apimachinery v0.0.0
\tk8s.io/client-go v0.0.0 // a comment
\tk8s.io/klog/v2 v2.140.0
\tk8s.io/utils v0.0.0-20260626114624-be93311217bd
)

require k8s.io/kubectl v0.0.0

require (
\tgithub.com/x/indirect v1.0.0 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kubectl => ./staging/src/k8s.io/kubectl
\tk8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
)

replace github.com/x/indirect v1.0.0 => github.com/y/fork v1.0.1
"""


def test_go_mod_is_parsed_with_blocks_single_lines_and_comments():
    mod = build.parse_go_mod(KUBERNETES_GO_MOD)
    assert mod.module == "k8s.io/kubernetes"
    assert mod.go == "1.26.0"
    assert mod.godebug == ("default=go1.26",)
    assert mod.requires["k8s.io/client-go"] == "v0.0.0"
    assert mod.requires["k8s.io/kubectl"] == "v0.0.0"
    assert mod.requires["github.com/x/indirect"] == "v1.0.0"
    assert build.Replace("k8s.io/api", None, "./staging/src/k8s.io/api", None) in mod.replaces
    fork = build.Replace("github.com/x/indirect", "v1.0.0", "github.com/y/fork", "v1.0.1")
    assert fork in mod.replaces
    assert not fork.is_local


def test_only_required_v000_staging_modules_need_a_release():
    mod = build.parse_go_mod(KUBERNETES_GO_MOD)
    # sample-controller is replaced but not required; k8s.io/utils is a pseudo-version.
    assert build.unpublished_requirements(mod) == [
        "k8s.io/api",
        "k8s.io/apimachinery",
        "k8s.io/client-go",
        "k8s.io/kubectl",
    ]


def test_staging_modules_map_to_v0_minor_patch():
    assert build.staging_version("v1.37.2") == "v0.37.2"
    assert build.staging_version("v1.34.0") == "v0.34.0"
    with pytest.raises(ValueError):
        build.staging_version("v2.0.0")
    with pytest.raises(ValueError):
        build.staging_version("1.37.2")


def test_wrapper_go_mod_for_kubernetes():
    group = build.group_of("kubectl")
    text = build.wrapper_go_mod(group, KUBERNETES_GO_MOD, ["kube-apiserver", "kubectl"])
    pin = versions.KUBERNETES
    release = build.staging_version(pin)
    assert text.startswith("module memorystore.local/k8s-tools/kubernetes\n\ngo 1.26.0\n")
    assert "godebug default=go1.26\n" in text
    assert f"require (\n\tk8s.io/kubernetes {pin}\n)\n" in text
    for module in ("k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/kubectl"):
        assert f"\t{module} v0.0.0 => {module} {release}\n" in text
    assert "sample-controller" not in text
    assert "./staging" not in text
    assert "\tgithub.com/x/indirect v1.0.0 => github.com/y/fork v1.0.1\n" in text
    assert text.endswith(
        "tool (\n\tk8s.io/kubernetes/cmd/kube-apiserver\n\tk8s.io/kubernetes/cmd/kubectl\n)\n"
    )


def test_wrapper_go_mod_without_replaces():
    upstream = (
        "module go.etcd.io/etcd/server/v3\n\ngo 1.26.0\n\n"
        "require go.etcd.io/etcd/api/v3 v3.7.3\n\n"
        "replace go.etcd.io/etcd/api/v3 => ../api\n"
        "replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY\n"
    )
    text = build.wrapper_go_mod(build.group_of("etcd"), upstream, ["etcd"])
    assert "replace" not in text
    assert f"\tgo.etcd.io/etcd/server/v3 {versions.ETCD}\n" in text
    assert "tool (\n\tgo.etcd.io/etcd/server/v3\n)\n" in text


def test_unknown_unpublished_module_outside_kubernetes_is_an_error():
    upstream = "module sigs.k8s.io/kwok\n\nrequire example.com/inner v0.0.0\n"
    upstream += "replace example.com/inner => ./inner\n"
    with pytest.raises(build.BuildError, match=r"example\.com/inner"):
        build.wrapper_go_mod(build.group_of("kwok"), upstream, ["kwok"])


def test_wrong_module_go_mod_is_refused():
    with pytest.raises(build.BuildError, match=r"expected k8s\.io/kubernetes"):
        build.wrapper_go_mod(build.group_of("kubectl"), "module example.com/x\n", ["kubectl"])


def test_kubernetes_ldflags_stamp_both_version_packages():
    flags = build.kubernetes_ldflags("v1.37.2", "2026-11-12T17:28:55Z")
    assert flags[:2] == ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.37.2" in flags
        assert f"-X {pkg}.gitMajor=1" in flags
        assert f"-X {pkg}.gitMinor=37" in flags
        assert f"-X {pkg}.buildDate=2026-11-12T17:28:55Z" in flags
    assert all(" " not in f.removeprefix("-X ") for f in flags)  # one -ldflags string


def test_helm_ldflags_follow_its_client_go_minor():
    flags = build.helm_ldflags("helm.sh/helm/v3", "v3.22.0", "v0.37.0")
    assert "-X helm.sh/helm/v3/internal/version.version=v3.22.0" in flags
    assert "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1" in flags
    assert "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37" in flags
    assert "-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37" in flags


def test_build_date_comes_from_the_module_info_time():
    assert build.build_date("2026-11-12T17:28:55.123Z") == "2026-11-12T17:28:55Z"
    assert build.build_date(None) == "1970-01-01T00:00:00Z"


def test_cache_root_follows_xdg_cache_home(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path), "HOME": "/nonexistent"}
    assert build.cache_root(env) == tmp_path / "memorystore" / "k8s-tools"
    # Unset or relative XDG_CACHE_HOME falls back to ~/.cache, as the XDG spec says.
    for env in ({"HOME": str(tmp_path)}, {"HOME": str(tmp_path), "XDG_CACHE_HOME": "rel"}):
        assert build.cache_root(env) == tmp_path / ".cache" / "memorystore" / "k8s-tools"


def test_cache_layout_is_tool_dash_version(tmp_path):
    path = build.tool_path("kubectl", "v1.37.2", tmp_path)
    assert path == tmp_path / "kubectl-v1.37.2" / "kubectl"
    assert not build.is_cached(path)


def test_install_is_atomic_and_leaves_no_staging(tmp_path):
    binary = tmp_path / "work" / "etcd"
    binary.parent.mkdir()
    binary.write_bytes(b"#!/bin/sh\n")
    root = tmp_path / "cache"
    final = build.tool_dir("etcd", "v3.7.3", root)
    final.mkdir(parents=True)  # an incomplete leftover is replaced
    path = build.install_atomically(binary, "etcd", final)
    assert path == final / "etcd"
    assert build.is_cached(path)
    assert sorted(p.name for p in root.iterdir()) == ["etcd-v3.7.3"]


def _fake_cache(root: Path) -> None:
    for tool in build.TOOLS:
        path = build.tool_path(tool, build.group_of(tool).key, root)
        path.parent.mkdir(parents=True)
        path.write_bytes(b"#!/bin/sh\n")
        path.chmod(0o755)


def test_cached_tools_are_returned_without_running_go(tmp_path, monkeypatch):
    _fake_cache(tmp_path)
    monkeypatch.setenv("MEMORYSTORE_GO", "/nonexistent/go")
    monkeypatch.setattr(build, "DEFAULT_GO", "/nonexistent/go")
    monkeypatch.setenv("PATH", "")
    lines: list[str] = []
    results = build.build_tools(None, log=lines.append, root=tmp_path)
    assert [r.tool for r in results] == list(build.TOOLS)
    assert all(r.status == "cached" for r in results)
    assert len(lines) == len(build.TOOLS)
    assert "kubectl v1.37.2: cached" in "\n".join(lines)


def test_ensure_tools_returns_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    root = tmp_path / "memorystore" / "k8s-tools"
    _fake_cache(root)
    paths = build.ensure_tools(["kubectl", "etcd"], log=lambda _: None)
    assert paths == {
        "kubectl": root / f"kubectl-{versions.KUBERNETES}" / "kubectl",
        "etcd": root / f"etcd-{versions.ETCD}" / "etcd",
    }


def test_coredns_is_our_own_main_with_only_the_corefile_plugins():
    group = build.group_of("coredns")
    source = group.main_go or ""
    imported = re.findall(r'_ "github.com/coredns/coredns/plugin/(\w+)"', source)
    assert imported == list(build.COREDNS_PLUGINS)
    directives = '"bind", "ready", "health", "errors", "cache", "kubernetes"'
    assert f"dnsserver.Directives = []string{{{directives}}}" in source
    # Exactly the directives of the node's Corefile are compiled in (nothing forwards out).
    corefile = node.coredns_corefile(Path("/k/kubeconfig"), 8080, 8181)
    directives = {line.split()[0] for line in corefile.splitlines() if line.startswith("    ")}
    directives -= {"kubeconfig", "pods", "fallthrough", "ttl", "}"}
    assert directives == set(build.COREDNS_PLUGINS)
    # Its own main needs no tool directive, and the slim binary has its own cache key.
    mod = build.wrapper_go_mod(group, "module github.com/coredns/coredns\ngo 1.26.0\n", ["coredns"])
    assert "tool (\n)" in mod and f"github.com/coredns/coredns {group.version}" in mod
    assert group.packages["coredns"] == group.wrapper
    assert build.tool_path("coredns", group.key, Path("/c")).parent.name == (
        f"coredns-{versions.COREDNS}-plugins-bind-ready-health-errors-cache-kubernetes"
    )


def test_unknown_tool_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="known tools: kube-apiserver"):
        build.build_tools(["kubectl", "kube-router"], root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_go_env_is_local_static_and_keeps_user_goflags():
    env = build.go_env({"GOFLAGS": "-buildvcs=false", "PATH": os.defpath})
    assert env["GOTOOLCHAIN"] == "local"
    assert env["CGO_ENABLED"] == "0"
    assert env["GOFLAGS"].split() == ["-buildvcs=false", "-mod=mod"]
    assert build.go_env({"GOFLAGS": "-mod=readonly"})["GOFLAGS"] == "-mod=readonly"


def test_pins_are_sane():
    assert set(versions.TOOL_VERSIONS) == set(build.TOOLS)
    for tool, version in versions.TOOL_VERSIONS.items():
        build.parse_semver(version)  # vX.Y.Z, no pre-release
        assert "-" not in version, tool
        assert build.group_of(tool).version == version
    kube = {versions.TOOL_VERSIONS[t] for t in build.group_of("kubectl").packages}
    assert kube == {versions.KUBERNETES}
    assert build.parse_semver(versions.HELM)[0] == 3
    assert build.parse_semver(versions.ETCD)[:2] >= (3, 5)
    # kwok's client-go may trail the control plane by at most one minor (kwok v0.8 → 1.36).
    assert build.parse_semver(versions.KUBERNETES)[:2] >= (1, 36)


def test_print_versions_lists_every_pin(capsys):
    assert build.main(["--print-versions"]) == 0
    out = capsys.readouterr().out
    for tool, version in versions.TOOL_VERSIONS.items():
        assert tool in out
        assert version in out


def test_leftovers_of_a_killed_build_are_removed_and_never_cached(tmp_path):
    group = build.group_of("etcd")
    work = tmp_path / f".work-etcd-{group.version}-abc123"
    stage = tmp_path / f".stage-etcd-{group.version}-def456"
    other = tmp_path / ".work-helm-v3.22.0-xyz"
    for folder in (work, stage, other):
        folder.mkdir()
        (folder / "etcd").write_bytes(b"half")
    assert not build.is_cached(build.tool_path("etcd", group.version, tmp_path))
    assert sorted(build.remove_leftovers(group, tmp_path)) == sorted([work, stage])
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name]
