"""Container images for the real node without Docker or a registry.

Why: no registry is reachable and no Docker engine runs, yet every pod needs a sandbox (pause)
image and tests need a small image of their own. A docker-archive tar is simple enough to
write here: one layer tar, a config JSON, and manifest.json; `ctr images import` reads it.
The pause binary is built from `build/pause/linux/pause.c` of the pinned k8s.io/kubernetes
module with `gcc -static`, as the upstream image is, and cached in the tool cache.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from memorystore_dev.devcluster import tools, versions

__all__ = [
    "PAUSE_REPO",
    "ImageError",
    "go_image",
    "kubernetes_source",
    "pause_image",
    "pause_tag",
    "write_docker_archive",
]

PAUSE_REPO = "memorystore.local/pause"


class ImageError(RuntimeError):
    """An image could not be built or written; the message names the step."""


def _layer(files: Mapping[str, Path | bytes]) -> bytes:
    """An uncompressed, reproducible layer tar: each path an executable file, owned by root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for name in sorted(files):
            parts = name.strip("/").split("/")
            for i in range(1, len(parts)):
                folder = "/".join(parts[:i])
                if folder not in dirs:
                    dirs.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(info)
            source = files[name]
            data = source if isinstance(source, bytes) else Path(source).read_bytes()
            info = tarfile.TarInfo(name.strip("/"))
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_docker_archive(
    target: Path,
    ref: str,
    files: Mapping[str, Path | bytes],
    entrypoint: list[str],
    cmd: list[str] | None = None,
    user: str = "",
) -> Path:
    """Write a one-layer docker-archive tar of `files` tagged `ref`; returns `target`.

    `files` maps absolute paths in the image to host files (or bytes); every file is made
    executable. The tar is reproducible (no timestamps), so its digest names its content.
    """
    if ":" not in ref.rsplit("/", 1)[-1]:
        raise ImageError(f"image reference {ref!r} needs an explicit tag")
    layer = _layer(files)
    layer_digest = hashlib.sha256(layer).hexdigest()
    config: dict[str, object] = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "Cmd": cmd or [], "User": user, "Env": []},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created_by": "memorystore_dev.devcluster.node.oci"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [f"{layer_digest}/layer.tar"]}]
    members = {
        config_name: config_bytes,
        f"{layer_digest}/layer.tar": layer,
        "manifest.json": json.dumps(manifest).encode(),
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with tarfile.open(partial, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    os.replace(partial, target)
    return target


def kubernetes_source() -> Path:
    """The pinned k8s.io/kubernetes module folder in the Go module cache (downloaded if absent)."""
    go = tools.find_go()
    out = subprocess.run(
        [go, "mod", "download", "-json", f"k8s.io/kubernetes@{versions.KUBERNETES}"],
        env=tools.go_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        info = json.loads(out.stdout)
    except ValueError:
        info = {"Error": out.stderr.strip()}
    if out.returncode != 0 or info.get("Error") or not info.get("Dir"):
        raise ImageError(
            f"k8s.io/kubernetes@{versions.KUBERNETES} is not in the Go module cache and could "
            f"not be downloaded: {info.get('Error') or out.stderr.strip()}"
        )
    return Path(info["Dir"])


def pause_tag(source: Path) -> str:
    """The pause version the module's build/pause/Makefile names (TAG ?= 3.10.2)."""
    makefile = (source / "build" / "pause" / "Makefile").read_text()
    match = re.search(r"^TAG\s*\?=\s*(\S+)", makefile, re.M)
    if not match:
        raise ImageError("build/pause/Makefile names no TAG")
    return match.group(1)


def pause_image(root: Path | None = None) -> tuple[Path, str]:
    """(docker-archive tar, image reference) of the pause image, built once into the cache."""
    root = tools.cache_root() if root is None else root
    source = kubernetes_source()
    tag = pause_tag(source)
    ref = f"{PAUSE_REPO}:{tag}"
    folder = root / f"pause-{tag}-{versions.KUBERNETES}"
    target = folder / "pause.tar"
    if target.is_file() and target.stat().st_size > 0:
        return target, ref
    gcc = shutil.which("gcc")
    if not gcc:
        raise ImageError("building the pause image needs gcc (apt-get install gcc libc6-dev)")
    with tempfile.TemporaryDirectory(prefix="pause-", dir=root if root.is_dir() else None) as tmp:
        binary = Path(tmp) / "pause"
        cmd = [
            gcc,
            "-Os",
            "-Wall",
            "-Werror",
            "-static",
            f"-DVERSION=v{tag}-memorystore",
            "-o",
            str(binary),
            str(source / "build" / "pause" / "linux" / "pause.c"),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise ImageError(
                f"gcc -static pause.c failed (static libc: apt-get install libc6-dev):\n"
                f"{proc.stderr.strip()}"
            )
        check = subprocess.run(
            [str(binary), "-v"], capture_output=True, text=True, timeout=10, check=False
        )
        if f"v{tag}" not in check.stdout:
            raise ImageError(f"the built pause does not report v{tag}: {check.stdout!r}")
        write_docker_archive(target, ref, {"/pause": binary}, entrypoint=["/pause"])
    return target, ref


def go_image(source: Path, repo: str, root: Path | None = None) -> tuple[Path, str]:
    """(docker-archive tar, reference) of a static Go program as a one-file image.

    `source` is a Go module folder with no dependencies (its main package at the root); the
    binary becomes `/<repo's last part>`, the entrypoint. Cached by the sources' content hash,
    which is also the tag, so an edited program is rebuilt and re-imported.
    """
    root = tools.cache_root() if root is None else root
    digest = hashlib.sha256()
    for path in sorted(source.rglob("*")):
        if path.is_file() and path.suffix in (".go", ".mod", ".sum"):
            digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes())
    tag = digest.hexdigest()[:16]
    name = repo.rsplit("/", 1)[-1]
    ref = f"{repo}:{tag}"
    target = root / "images" / f"{name}-{tag}.tar"
    if target.is_file() and target.stat().st_size > 0:
        return target, ref
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{name}-", dir=root) as tmp:
        binary = Path(tmp) / name
        proc = subprocess.run(
            [tools.find_go(), "build", "-trimpath", "-ldflags=-s -w", "-o", str(binary), "."],
            cwd=source,
            env=tools.go_env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            raise ImageError(f"go build of {source} failed:\n{proc.stderr.strip()}")
        write_docker_archive(target, ref, {f"/{name}": binary}, entrypoint=[f"/{name}"])
    return target, ref
