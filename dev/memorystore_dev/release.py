"""`make release-check`: the artifacts a release publishes, built here, versioned from VERSION.

The chart package (`helm package`, the pinned Helm), the kubectl plugin's krew archive and
manifest (kubectl/krew.yaml with the archive's digest), and both images (the image harness's
private dockerd: `devcluster/images`), saved as docker archives, into one directory, then a
table of what was built with sizes and sha256 digests. The release workflow
(.github/workflows/release.yml) builds the same from the same Dockerfile and chart, for two
architectures, and pushes and signs them; here nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from memorystore_dev.devcluster.tools import ensure_tools
from memorystore_dev.version import ROOT, drift, version

__all__ = ["chart_package", "krew_plugin", "main"]


def chart_package(out: Path, root: Path = ROOT) -> Path:
    """`helm package` of the chart into `out`; the package's Chart.yaml is checked to carry
    VERSION as its version and appVersion."""
    helm = ensure_tools(["helm"], log=lambda _: None)["helm"]
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(helm), "package", str(root / "charts" / "memorystore"), "--destination", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    want = version(root)
    package = out / f"memorystore-{want}.tgz"
    with tarfile.open(package) as archive:
        member = archive.extractfile("memorystore/Chart.yaml")
        assert member is not None
        chart = yaml.safe_load(member.read())
    if (chart["version"], chart["appVersion"]) != (want, want):
        raise SystemExit(f"{package}: version {chart['version']}, appVersion {chart['appVersion']}")
    return package


# The krew archive's launcher: the plugin is the installed `memorystore` package.
LAUNCHER = """#!/bin/sh
# kubectl memorystore: the plugin of the `memorystore` Python package (pip install memorystore)
exec "${MEMORYSTORE_PYTHON:-python3}" -m memorystore.kubectl "$@"
"""


def krew_plugin(out: Path, root: Path = ROOT) -> tuple[Path, Path]:
    """The krew archive (the launcher, reproducible: fixed owner and time) and the manifest
    naming its sha256, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "kubectl-memorystore.tar.gz"
    launcher = LAUNCHER.encode()
    info = tarfile.TarInfo("kubectl-memorystore")
    info.size, info.mode, info.mtime = len(launcher), 0o755, 0
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(launcher))
    manifest = yaml.safe_load((root / "kubectl" / "krew.yaml").read_text())
    (platform,) = manifest["spec"]["platforms"]
    platform["sha256"] = _digest(archive)
    filled = out / "memorystore.krew.yaml"
    filled.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return archive, filled


def _digest(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memorystore_dev.release")
    parser.add_argument("--out", type=Path, default=ROOT / ".memorystore" / "release")
    parser.add_argument("--no-images", action="store_true", help="the chart package only")
    args = parser.parse_args(argv)
    problems = drift()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    built = [chart_package(args.out), *krew_plugin(args.out)]
    if not args.no_images:
        from memorystore_dev.devcluster.images.builder import TARGETS, ImageBuilder

        with ImageBuilder() as builder:
            for target in TARGETS:
                image = builder.build(target)
                built.append(builder.save(image.tag, args.out))
    print(f"release {version()} artifacts in {args.out}:")
    for path in built:
        print(f"  {path.name}\t{path.stat().st_size / 1e6:.2f} MB\tsha256:{_digest(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
