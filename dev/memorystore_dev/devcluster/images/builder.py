"""The project's two images, built from the repo's Dockerfile targets on the local Debian base,
and the managed tier's Qdrant image from the vendored server binary (qdrant.Dockerfile).

Why: the Dockerfile takes its base through `--build-arg BASE_IMAGE`, so the same file builds
on a pulled base elsewhere and on the debootstrapped one here. The host's CA bundle reaches
the install steps as a BuildKit secret, and a saved archive can be imported by containerd.
No registry here serves qdrant/qdrant, so the real-node tests run Qdrant from an image of
ours: the same base, the binary from ../shared/vendor/qdrant (memorystore_dev.vendor).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import shutil
import time
import tomllib
from pathlib import Path

from memorystore_dev.devcluster.images.base import DEFAULT_VARIANT, DebianBase
from memorystore_dev.devcluster.images.dockerd import DOCKER, Log, _stderr
from memorystore_dev.vendor import QDRANT_VERSION, qdrant_binary

__all__ = ["QDRANT_IMAGE", "TARGETS", "BuiltImage", "ImageBuilder", "default_tag"]

# The checkout this module runs from (dev/memorystore_dev/devcluster/images/): Dockerfile, sources.
REPO_ROOT = Path(__file__).resolve().parents[4]
TARGETS = ("memory-service", "operator")
# What the chart and the operator name by default, so an imported image needs no pull.
IMAGE_REPOSITORY = "ghcr.io/memorystore"
# The host's CA bundle reaches the build's install steps as a BuildKit secret (never a layer).
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_TIMEOUT = 2400.0
QDRANT_DOCKERFILE = Path(__file__).with_name("qdrant.Dockerfile")
# Ours, not upstream's name: a MemoryStore names it in spec.vectorStore.managed.image.
QDRANT_IMAGE = f"{IMAGE_REPOSITORY}/qdrant:v{QDRANT_VERSION}"


@dataclasses.dataclass(frozen=True)
class BuiltImage:
    target: str
    tag: str
    image_id: str
    size_bytes: int
    seconds: float
    log: Path  # BuildKit's plain progress: which steps ran and which came from the cache

    @property
    def size_mb(self) -> float:
        return self.size_bytes / 1e6


def project_version(root: Path = REPO_ROOT) -> str:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]


def default_tag(target: str, root: Path = REPO_ROOT) -> str:
    return f"{IMAGE_REPOSITORY}/{target}:{project_version(root)}"


class ImageBuilder(DebianBase):
    """A private Docker engine for building and trying the project's images.

    with ImageBuilder() as builder:
        images = builder.build_all()
        archive = builder.save(images["operator"].tag)   # for `ctr -n k8s.io images import`
    """

    def __init__(
        self,
        root: Path = REPO_ROOT,
        cache: Path | None = None,
        *,
        suite: str | None = None,
        mirror: str | None = None,
        variant: str = DEFAULT_VARIANT,
        log: Log = _stderr,
    ) -> None:
        super().__init__(cache, suite=suite, mirror=mirror, variant=variant, log=log)
        self.root = root
        self._builds = itertools.count(1)

    def build(self, target: str, tag: str | None = None) -> BuiltImage:
        """One target of the project's Dockerfile on the local base."""
        if target not in TARGETS:
            raise ValueError(f"target {target!r} is not one of {', '.join(TARGETS)}")
        argv = ["--target", target]
        if CA_BUNDLE.is_file():
            argv += ["--secret", f"id=ca-bundle,src={CA_BUNDLE}"]
        return self._build(target, tag or default_tag(target, self.root), [*argv, str(self.root)])

    def build_qdrant(self, tag: str = QDRANT_IMAGE) -> BuiltImage:
        """Qdrant's server (the vendored binary, checksum-verified) on the same base, from a
        context that holds only the binary: a rebuild with the same binary is all cache."""
        context = self.cache / "qdrant-context"
        context.mkdir(parents=True, exist_ok=True)
        binary, placed = qdrant_binary(), context / "qdrant"
        placed.unlink(missing_ok=True)  # placed afresh: never an earlier build's binary
        try:
            os.link(binary, placed)
        except OSError:  # another file system
            shutil.copy2(binary, placed)
        argv = ["--file", str(QDRANT_DOCKERFILE), str(context)]
        return self._build("qdrant", tag, argv)

    def _build(self, target: str, tag: str, argv: list[str]) -> BuiltImage:
        """`docker build` on the local base; the build's RUN steps use the host network."""
        base = self.ensure_base()
        command = [DOCKER, *self._host(), "build", "--progress", "plain", "--network", "host"]
        command += ["--tag", tag, "--build-arg", f"BASE_IMAGE={base}", *argv]
        began = time.monotonic()
        step = f"build-{target}-{next(self._builds)}"
        with self._step(f"docker build {target} ({tag})"):
            self._run_step(step, command, timeout=BUILD_TIMEOUT)
        seconds = time.monotonic() - began
        size, log = self.image_size(tag), self._log_file(step)
        built = BuiltImage(target, tag, self.image_id(tag), size, seconds, log)
        self.docker("image", "prune", "--force")  # what the new tag replaced: the cache stays small
        self.log(f"images: {tag}: {built.size_mb:.0f} MB")
        return built

    def build_all(self) -> dict[str, BuiltImage]:
        return {target: self.build(target) for target in TARGETS}

    def save(self, tag: str, dest: Path | None = None) -> Path:
        """A docker-archive tar of one image, for `ctr -n k8s.io images import PATH`."""
        folder = dest or self.cache / "archives"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (re.sub(r"[^A-Za-z0-9.-]+", "_", tag) + ".tar")
        partial = path.with_suffix(".tar.partial")
        with self._step(f"docker save {tag}"):
            self._run_step(f"save-{tag}", [DOCKER, *self._host(), "save", "-o", str(partial), tag])
        partial.replace(path)  # a killed save never looks finished
        return path
