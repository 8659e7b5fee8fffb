"""Build the project's two images on this machine: a private dockerd, a local Debian base.

Why: no container registry is reachable here (so `FROM python:…` cannot be pulled) and no
Docker engine runs by default. This harness starts its own containerd and dockerd (own
data-root in the user cache, own exec-root and sockets in a temp dir, no bridge, no
iptables changes), makes a Debian base with debootstrap once and `docker import`s it, and
builds the repo's Dockerfile targets on it through `--build-arg BASE_IMAGE`. It installs
nothing: the Debian packages come from `make node-deps` (run as root).

Layer caching across runs comes from the persistent data-root; nothing depends on it
existing. Each step is logged with its time; a failed step raises `ImageBuildError`
naming the step and its log file. The daemons are stopped by PID at the end, also on
failure, and any mount left under the temp dir is removed.

The pieces live in modules by concern: `dockerd` (the private engine), `base` (the
debootstrapped Debian base), `builder` (the image builds), `mounts` and `processes` (what the
daemons leave on the host), `errors`, `cli`. This package is their public surface.

    python -m memorystore_dev.devcluster.images [--target operator] [--save DIR]
"""

from __future__ import annotations

from memorystore_dev.devcluster.images.builder import TARGETS, BuiltImage, ImageBuilder
from memorystore_dev.devcluster.images.cli import main
from memorystore_dev.devcluster.images.dockerd import check_packages
from memorystore_dev.devcluster.images.errors import ImageBuildError, MissingPackageError

__all__ = [
    "TARGETS",
    "BuiltImage",
    "ImageBuildError",
    "ImageBuilder",
    "MissingPackageError",
    "check_packages",
    "main",
]
