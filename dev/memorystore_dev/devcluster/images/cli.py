"""`python -m memorystore_dev.devcluster.images`: build the images, optionally save them.

python -m memorystore_dev.devcluster.images [--target operator] [--save DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memorystore_dev.devcluster.images.builder import TARGETS, ImageBuilder
from memorystore_dev.devcluster.images.errors import ImageBuildError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memorystore_dev.devcluster.images",
        description="Build the memory-service and operator images with a private dockerd "
        "on a local Debian base (root; packages from `make node-deps`).",
    )
    parser.add_argument("--target", choices=TARGETS, action="append", help="default: both")
    parser.add_argument("--save", type=Path, metavar="DIR", help="also write docker-archive tars")
    args = parser.parse_args(argv)
    try:
        with ImageBuilder() as builder:
            for target in args.target or TARGETS:
                built = builder.build(target)
                print(f"{built.tag}\t{built.size_mb:.0f} MB\t{built.seconds:.1f}s")
                if args.save:
                    print(f"  saved: {builder.save(built.tag, args.save)}")
    except ImageBuildError as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 1
    return 0
