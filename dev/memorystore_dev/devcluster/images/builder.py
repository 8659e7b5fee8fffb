"""The project's two images, built from the repo's Dockerfile targets on the local Debian base.

Why: the Dockerfile takes its base through `--build-arg BASE_IMAGE`, so the same file builds
on a pulled base elsewhere and on the debootstrapped one here. The host's CA bundle reaches
the install steps as a BuildKit secret, and a saved archive can be imported by containerd.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
import tomllib
from pathlib import Path

from memorystore_dev.devcluster.images.base import DEFAULT_VARIANT, DebianBase
from memorystore_dev.devcluster.images.dockerd import DOCKER, Log, _stderr

__all__ = ["TARGETS", "BuiltImage", "ImageBuilder", "default_tag"]

# The checkout this module runs from (dev/memorystore_dev/devcluster/images/): Dockerfile, sources.
REPO_ROOT = Path(__file__).resolve().parents[4]
TARGETS = ("memory-service", "operator")
# What the chart and the operator name by default, so an imported image needs no pull.
IMAGE_REPOSITORY = "ghcr.io/memorystore"
# The host's CA bundle reaches the build's install steps as a BuildKit secret (never a layer).
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_TIMEOUT = 2400.0


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
        """One Dockerfile target on the local base; the build's RUN steps use the host network."""
        if target not in TARGETS:
            raise ValueError(f"target {target!r} is not one of {', '.join(TARGETS)}")
        tag = tag or default_tag(target, self.root)
        base = self.ensure_base()
        argv = [DOCKER, *self._host(), "build", "--progress", "plain", "--network", "host"]
        argv += ["--target", target, "--tag", tag, "--build-arg", f"BASE_IMAGE={base}"]
        if CA_BUNDLE.is_file():
            argv += ["--secret", f"id=ca-bundle,src={CA_BUNDLE}"]
        argv.append(str(self.root))
        began = time.monotonic()
        step = f"build-{target}-{next(self._builds)}"
        with self._step(f"docker build --target {target} ({tag})"):
            self._run_step(step, argv, timeout=BUILD_TIMEOUT)
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
