"""The Debian base image: made with debootstrap once per key, slimmed, and `docker import`ed.

Why: no container registry is reachable here, so `FROM python:…` cannot be pulled. The base
matches the host's suite and apt mirror (the only one reachable), is slimmed like Debian's own
container images, and is keyed by what goes into it, so a changed recipe makes a new one.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from memorystore_dev.devcluster.images.dockerd import (
    DOCKER,
    STEP_TIMEOUT,
    SYSTEM_PATH,
    DockerEngine,
    Log,
    _stderr,
    _tail,
)
from memorystore_dev.devcluster.images.errors import ImageBuildError
from memorystore_dev.devcluster.images.mounts import _remove_tree, unmount_under

__all__ = ["DEFAULT_MIRROR", "DebianBase", "host_mirror", "host_suite"]

HOST_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_REPO = "memorystore-base/debian"
DEFAULT_VARIANT = "minbase"
# Bump when the way the base is made changes, so the cache key changes with it.
BASE_RECIPE = "2"
# Slim like Debian's own container images: no docs, man pages or translations, no .deb cache.
SLIM_DPKG = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
"""
SLIM_APT = """\
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Install-Recommends "false";
"""
DEBOOTSTRAP_TIMEOUT = 1200.0


def host_suite() -> str:
    """The host's Debian codename: the base matches the machine the tests run on."""
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"') or "bookworm"
    return "bookworm"


def host_mirror(sources: Path = HOST_SOURCES) -> str:
    """The apt mirror the host is configured with (the only one reachable here)."""
    with contextlib.suppress(OSError):
        for stanza in sources.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1) for line in stanza.splitlines() if re.match(r"^\w[\w-]*:", line)
            )
            uris, suites = fields.get("URIs", "").split(), fields.get("Suites", "").split()
            if uris and any(not s.endswith(("-security", "-updates")) for s in suites):
                return uris[0]
    return DEFAULT_MIRROR


class DebianBase(DockerEngine):
    """The engine, able to make the Debian base the project's Dockerfile builds on."""

    def __init__(
        self,
        cache: Path | None = None,
        *,
        suite: str | None = None,
        mirror: str | None = None,
        variant: str = DEFAULT_VARIANT,
        log: Log = _stderr,
    ) -> None:
        super().__init__(cache, log=log)
        self.suite = suite or host_suite()
        self.mirror = mirror or host_mirror()
        self.variant = variant

    def base_key(self) -> str:
        """Suite + mirror + variant (+ the apt sources put in it and the recipe version)."""
        parts = [BASE_RECIPE, self.suite, self.mirror, self.variant, self._sources_for_base()]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]

    def base_tag(self) -> str:
        return f"{BASE_REPO}:{self.suite}-{self.variant}-{self.base_key()}"

    def _sources_for_base(self) -> str:
        """The host's deb822 sources (updates and security too) when the suites match."""
        with contextlib.suppress(OSError):
            text = HOST_SOURCES.read_text()
            if self.suite == host_suite() and self.mirror in text:
                return text
        return ""

    def ensure_base(self) -> str:
        """The Debian base image, made once per key and rebuilt whenever it is missing."""
        tag = self.base_tag()
        if self.image_exists(tag):
            self.log(f"images: base {tag} cached")
            return tag
        rootfs = self.cache / f"rootfs-{self.base_key()}"
        _remove_tree(rootfs)  # a half-made tree from a killed run
        try:
            with self._step(f"debootstrap {self.suite} ({self.variant}) from {self.mirror}"):
                self._run_step(
                    "debootstrap",
                    [
                        "/usr/sbin/debootstrap",
                        f"--variant={self.variant}",
                        self.suite,
                        str(rootfs),
                        self.mirror,
                    ],
                    timeout=DEBOOTSTRAP_TIMEOUT,
                )
                unmount_under(rootfs)  # debootstrap mounts /proc and /sys inside; be sure
                sources = self._sources_for_base()
                if sources:
                    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(sources)
                    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
                _slim(rootfs)
            with self._step(f"docker import {tag}"):
                self._import(rootfs, tag)
        finally:
            _remove_tree(rootfs)
        listed = self.docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", BASE_REPO)
        for stale in set(listed.stdout.split()) - {tag}:  # bases of an older key
            self.docker("image", "rm", stale)
        return tag

    def _import(self, rootfs: Path, tag: str) -> None:
        log_file = self._log_file("docker-import")
        tar_argv = ["tar", "-C", str(rootfs), "--numeric-owner"]
        tar_argv += [f"--exclude=./{d}/*" for d in ("dev", "proc", "sys", "run", "tmp")]
        tar_argv += ["-c", "."]
        import_argv = [DOCKER, *self._host(), "import"]
        import_argv += ["--change", f"ENV PATH={SYSTEM_PATH}", "--change", "ENV LANG=C.UTF-8"]
        import_argv += ["--change", 'CMD ["/bin/bash"]', "-", tag]
        with open(log_file, "ab") as out:
            tar = subprocess.Popen(tar_argv, stdout=subprocess.PIPE, stderr=out)
            assert tar.stdout is not None
            try:
                done = subprocess.run(
                    import_argv,
                    stdin=tar.stdout,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self._client_env(),
                    timeout=STEP_TIMEOUT,
                )
            finally:
                tar.stdout.close()
                tar_rc = tar.wait(timeout=STEP_TIMEOUT)
        if tar_rc != 0 or done.returncode != 0:
            raise ImageBuildError(
                f"docker import failed: tar exit {tar_rc}, import exit {done.returncode}; "
                f"log: {log_file}\n{_tail(log_file)}"
            )


def _slim(rootfs: Path) -> None:
    """What Debian's own container images leave out, now and for later apt installs."""
    (rootfs / "etc/dpkg/dpkg.cfg.d/memorystore-slim").write_text(SLIM_DPKG)
    (rootfs / "etc/apt/apt.conf.d/memorystore-slim").write_text(SLIM_APT)
    doomed = [
        *rootfs.glob("var/cache/apt/archives/*.deb"),
        *rootfs.glob("var/cache/apt/*.bin"),
        *rootfs.glob("var/lib/apt/lists/*"),
        *rootfs.glob("usr/share/man/*"),
        *rootfs.glob("usr/share/info/*"),
        *rootfs.glob("usr/share/groff/*"),
        *rootfs.glob("usr/share/lintian/*"),
        *rootfs.glob("usr/share/locale/*"),
    ]
    for doc in rootfs.glob("usr/share/doc/*"):
        if doc.is_dir() and not doc.is_symlink():  # a symlinked doc dir is another's
            doomed += [item for item in doc.iterdir() if item.name != "copyright"]
    for path in doomed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.name != "lock":  # apt's lock files stay
            path.unlink(missing_ok=True)
