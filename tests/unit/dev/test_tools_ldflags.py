"""The version stamps of a built tool (tools/ldflags.py), as the upstream release builds set
them."""

from __future__ import annotations

from memorystore_dev.devcluster.tools import ldflags


def test_kubernetes_ldflags_stamp_both_version_packages():
    flags = ldflags.kubernetes_ldflags("v1.37.2", "2026-11-12T17:28:55Z")
    assert flags[:2] == ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.37.2" in flags
        assert f"-X {pkg}.gitMajor=1" in flags
        assert f"-X {pkg}.gitMinor=37" in flags
        assert f"-X {pkg}.buildDate=2026-11-12T17:28:55Z" in flags
    assert all(" " not in f.removeprefix("-X ") for f in flags)  # one -ldflags string


def test_helm_ldflags_follow_its_client_go_minor():
    flags = ldflags.helm_ldflags("helm.sh/helm/v3", "v3.22.0", "v0.37.0")
    assert "-X helm.sh/helm/v3/internal/version.version=v3.22.0" in flags
    assert "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1" in flags
    assert "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37" in flags
    assert "-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37" in flags


def test_build_date_comes_from_the_module_info_time():
    assert ldflags.build_date("2026-11-12T17:28:55.123Z") == "2026-11-12T17:28:55Z"
    assert ldflags.build_date(None) == "1970-01-01T00:00:00Z"
