"""`python -m memorystore_dev.devcluster.tools`: build (or find cached) tools, with timings.

python -m memorystore_dev.devcluster.tools [--tools kubectl,etcd] [--print-versions]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence

from memorystore_dev.devcluster.tools.errors import BuildError
from memorystore_dev.devcluster.tools.groups import TOOLS, group_of
from memorystore_dev.devcluster.tools.runner import build_tools

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: build (or find cached) tools and print the time each took."""
    parser = argparse.ArgumentParser(
        prog="python -m memorystore_dev.devcluster.tools",
        description="Build the pinned Kubernetes tool binaries into "
        "${XDG_CACHE_HOME:-~/.cache}/memorystore/k8s-tools.",
    )
    parser.add_argument("--tools", help=f"comma-separated subset of: {','.join(TOOLS)}")
    parser.add_argument(
        "--print-versions", action="store_true", help="print the pins and exit without building"
    )
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None

    if args.print_versions:
        for tool in tools or TOOLS:
            group = group_of(tool)
            print(f"{tool:<24} {group.version:<9} {group.module}")
        return 0

    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C: the go build is ended and temp
    # folders are removed instead of being left half-written.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    start = time.monotonic()
    try:
        results = build_tools(tools)
    except (BuildError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    total = time.monotonic() - start
    print(f"\n{'tool':<24} {'version':<9} {'status':<7} {'seconds':>8} {'MB':>7}")
    for r in results:
        print(f"{r.tool:<24} {r.version:<9} {r.status:<7} {r.seconds:8.2f} {r.size / 1e6:7.1f}")
    print(f"total {total:.2f} s (the tools of one module share one go build and its time)")
    return 0
