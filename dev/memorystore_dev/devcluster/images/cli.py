"""`python -m memorystore_dev.devcluster.images`: build the images, optionally save them.

python -m memorystore_dev.devcluster.images [--target operator] [--qdrant] [--save DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memorystore_dev.devcluster.images.builder import TARGETS, ImageBuilder
from memorystore_dev.devcluster.images.errors import ImageBuildError
from memorystore_dev.vendor import VendorError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memorystore_dev.devcluster.images",
        description="Build the memory-service and operator images with a private dockerd "
        "on a local Debian base (root; packages from `make node-deps`).",
    )
    parser.add_argument("--target", choices=TARGETS, action="append", help="default: both")
    parser.add_argument(
        "--qdrant", action="store_true", help="also the managed tier's Qdrant (vendored binary)"
    )
    parser.add_argument("--save", type=Path, metavar="DIR", help="also write docker-archive tars")
    args = parser.parse_args(argv)
    try:
        with ImageBuilder() as builder:
            builds = [lambda t=t: builder.build(t) for t in args.target or TARGETS]
            if args.qdrant:
                builds.append(builder.build_qdrant)
            for build in builds:
                built = build()
                print(f"{built.tag}\t{built.size_mb:.0f} MB\t{built.seconds:.1f}s")
                if args.save:
                    print(f"  saved: {builder.save(built.tag, args.save)}")
    except (ImageBuildError, VendorError) as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 1
    return 0
