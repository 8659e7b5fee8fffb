"""Build the pinned Kubernetes tool binaries from Go modules, once, into a per-user cache.

Why: this machine reaches package registries only (no release download sites), so the
harness's kube-apiserver, etcd, kwok, … are compiled from the Go module proxy with the
machine's Go. A build takes many minutes, so each binary is cached under
`${XDG_CACHE_HOME:-~/.cache}/memorystore/k8s-tools/<tool>-<version>/<tool>` and built only when
missing. Binaries are built and checked in a temp folder beside the cache and moved into place
with one rename, so a killed build can never be mistaken for a finished one.

The pieces live in modules by concern: `groups` (which module builds which tool, at which
pin), `gomod` and `ldflags` (the generated wrapper module and the version stamps), `toolchain`
(finding and running Go), `cache` (layout, atomic installs, the lock), `runner` (the builds),
`kwok` (kwok's stage config), `cli`. This package is their public surface.

    python -m memorystore_dev.devcluster.tools [--tools kubectl,etcd] [--print-versions]
"""

from __future__ import annotations

from memorystore_dev.devcluster.tools.cache import cache_root, file_lock
from memorystore_dev.devcluster.tools.cli import main
from memorystore_dev.devcluster.tools.errors import BuildError
from memorystore_dev.devcluster.tools.groups import TOOLS
from memorystore_dev.devcluster.tools.kwok import kwok_stages
from memorystore_dev.devcluster.tools.runner import (
    ToolResult,
    all_cached,
    build_tools,
    ensure_tools,
)
from memorystore_dev.devcluster.tools.toolchain import find_go, go_env

__all__ = [
    "TOOLS",
    "BuildError",
    "ToolResult",
    "all_cached",
    "build_tools",
    "cache_root",
    "ensure_tools",
    "file_lock",
    "find_go",
    "go_env",
    "kwok_stages",
    "main",
]
