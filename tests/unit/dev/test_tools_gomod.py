"""The generated wrapper module (tools/gomod.py): go.mod parsing, the staging-module releases,
the replaces kept and dropped, and what it refuses. Pure: no network and no Go."""

from __future__ import annotations

import pytest

from memorystore_dev.devcluster import versions
from memorystore_dev.devcluster.tools import gomod
from memorystore_dev.devcluster.tools.errors import BuildError
from memorystore_dev.devcluster.tools.groups import group_of

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
    mod = gomod.parse_go_mod(KUBERNETES_GO_MOD)
    assert mod.module == "k8s.io/kubernetes"
    assert mod.go == "1.26.0"
    assert mod.godebug == ("default=go1.26",)
    assert mod.requires["k8s.io/client-go"] == "v0.0.0"
    assert mod.requires["k8s.io/kubectl"] == "v0.0.0"
    assert mod.requires["github.com/x/indirect"] == "v1.0.0"
    assert gomod.Replace("k8s.io/api", None, "./staging/src/k8s.io/api", None) in mod.replaces
    fork = gomod.Replace("github.com/x/indirect", "v1.0.0", "github.com/y/fork", "v1.0.1")
    assert fork in mod.replaces
    assert not fork.is_local


def test_only_required_v000_staging_modules_need_a_release():
    mod = gomod.parse_go_mod(KUBERNETES_GO_MOD)
    # sample-controller is replaced but not required; k8s.io/utils is a pseudo-version.
    assert gomod.unpublished_requirements(mod) == [
        "k8s.io/api",
        "k8s.io/apimachinery",
        "k8s.io/client-go",
        "k8s.io/kubectl",
    ]


def test_staging_modules_map_to_v0_minor_patch():
    assert gomod.staging_version("v1.37.2") == "v0.37.2"
    assert gomod.staging_version("v1.34.0") == "v0.34.0"
    with pytest.raises(ValueError):
        gomod.staging_version("v2.0.0")
    with pytest.raises(ValueError):
        gomod.staging_version("1.37.2")


def test_wrapper_go_mod_for_kubernetes():
    group = group_of("kubectl")
    text = gomod.wrapper_go_mod(group, KUBERNETES_GO_MOD, ["kube-apiserver", "kubectl"])
    pin = versions.KUBERNETES
    release = gomod.staging_version(pin)
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
    text = gomod.wrapper_go_mod(group_of("etcd"), upstream, ["etcd"])
    assert "replace" not in text
    assert f"\tgo.etcd.io/etcd/server/v3 {versions.ETCD}\n" in text
    assert "tool (\n\tgo.etcd.io/etcd/server/v3\n)\n" in text


def test_unknown_unpublished_module_outside_kubernetes_is_an_error():
    upstream = "module sigs.k8s.io/kwok\n\nrequire example.com/inner v0.0.0\n"
    upstream += "replace example.com/inner => ./inner\n"
    with pytest.raises(BuildError, match=r"example\.com/inner"):
        gomod.wrapper_go_mod(group_of("kwok"), upstream, ["kwok"])


def test_wrong_module_go_mod_is_refused():
    with pytest.raises(BuildError, match=r"expected k8s\.io/kubernetes"):
        gomod.wrapper_go_mod(group_of("kubectl"), "module example.com/x\n", ["kubectl"])
