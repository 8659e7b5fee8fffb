"""The -ldflags that stamp a built tool with its pin, as the upstream release builds do (pure).

Why: `kubectl version`, the API server's /version and `helm version` report what the binary
was stamped with; without these flags they would say v0.0.0 and break version checks.
"""

from __future__ import annotations

import re

from memorystore_dev.devcluster.tools.gomod import parse_semver

__all__ = ["build_date", "helm_ldflags", "kubernetes_ldflags"]


def kubernetes_ldflags(version: str, build_date: str) -> list[str]:
    """The -X flags of hack/lib/version.sh, so `kubectl version` and /version report the pin."""
    major, minor, _ = parse_semver(version)
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for key, value in (
            ("gitVersion", version),
            ("gitMajor", str(major)),
            ("gitMinor", str(minor)),
            ("gitCommit", ""),  # the module proxy does not say which commit; leave it blank
            ("gitTreeState", "archive"),  # what version.sh says for a source archive
            ("buildDate", build_date),
        ):
            flags.append(f"-X {pkg}.{key}={value}")
    return flags


def helm_ldflags(module: str, version: str, client_go_version: str) -> list[str]:
    """Helm's Makefile flags: its version, and the Kubernetes minor of the client-go it uses."""
    cg_major, cg_minor, _ = parse_semver(client_go_version)
    flags = ["-s", "-w", f"-X {module}/internal/version.version={version}"]
    for pkg in ("pkg/lint/rules", "pkg/chartutil"):
        flags.append(f"-X {module}/{pkg}.k8sVersionMajor={cg_major + 1}")
        flags.append(f"-X {module}/{pkg}.k8sVersionMinor={cg_minor}")
    return flags


def build_date(info_time: str | None) -> str:
    """The module's publication time in version.sh's format (reproducible, unlike `now`)."""
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", info_time or "")
    return f"{match.group(1)}Z" if match else "1970-01-01T00:00:00Z"
