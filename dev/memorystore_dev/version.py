"""`python -m memorystore_dev.version [--write]`: VERSION is the one version of a release.

Every place that names the release's version is stamped from it: the Python distribution
(pyproject.toml: `memorystore --version` and the operator's default memory-service image
read it from the installed package), the chart's `version` and `appVersion` (the operator
image's tag defaults to appVersion) and the chart's default memory-service image. `--check`
(the default, in `make lint`) fails naming each place that disagrees; `--write` stamps them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PLACES", "ROOT", "Place", "drift", "main", "stamp", "version"]

ROOT = Path(__file__).resolve().parents[2]
_SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")


@dataclass(frozen=True)
class Place:
    """One line of one file that carries the version: `pattern`'s group 2 is the version."""

    path: str
    pattern: re.Pattern[str]
    what: str

    def read(self, text: str) -> str | None:
        found = self.pattern.search(text)
        return found.group(2) if found else None

    def write(self, text: str, new: str) -> str:
        return self.pattern.sub(lambda m: m.group(1) + new + m.group(3), text, count=1)


def _line(prefix: str, suffix: str = "") -> re.Pattern[str]:
    return re.compile(rf"^({prefix})([^\s\"']+)({suffix})$", re.MULTILINE)


PLACES = (
    Place("pyproject.toml", _line(r'version = "', r'"'), "the Python distribution"),
    Place("charts/memorystore/Chart.yaml", _line(r"version: "), "the chart's version"),
    Place("charts/memorystore/Chart.yaml", _line(r'appVersion: "', r'"'), "appVersion"),
    Place(
        "charts/memorystore/values.yaml",
        _line(r"  memoryService: ghcr\.io/memorystore/memory-service:"),
        "the default memory-service image",
    ),
    Place(
        "README.md",
        _line(
            r"`helm install memorystore oci://ghcr\.io/memorystore/charts/memorystore --version ",
            r" …`\.",
        ),
        "the README's install from the release",
    ),
    Place("kubectl/krew.yaml", _line(r"  version: v"), "the krew manifest's version"),
    Place(
        "kubectl/krew.yaml",
        _line(
            r"      uri: https://github\.com/memorystore/memorystore/releases/download/v",
            r"/kubectl-memorystore\.tar\.gz",
        ),
        "the krew archive's release",
    ),
    Place("kubectl/krew.yaml", _line(r"      pip install memorystore=="), "the krew caveat's pin"),
)


def version(root: Path = ROOT) -> str:
    """The release's version, from VERSION (a semantic version, checked)."""
    text = (root / "VERSION").read_text().strip()
    if not _SEMVER.match(text):
        raise ValueError(f"VERSION: {text!r} is not a semantic version (MAJOR.MINOR.PATCH)")
    return text


def drift(root: Path = ROOT) -> list[str]:
    """Each place whose version is not VERSION's, as a line naming file, place and value."""
    want, problems = version(root), []
    for place in PLACES:
        found = place.read((root / place.path).read_text())
        if found != want:
            problems.append(f"{place.path}: {place.what} is {found!r}, VERSION is {want!r}")
    return problems


def stamp(root: Path = ROOT, say: Callable[[str], None] = print) -> int:
    """Write VERSION's version into every place; returns the places changed."""
    want, changed = version(root), 0
    for place in PLACES:
        path = root / place.path
        text = path.read_text()
        if place.read(text) is None:
            raise ValueError(f"{place.path}: no line for {place.what}")
        new = place.write(text, want)
        if new != text:
            path.write_text(new)
            changed += 1
            say(f"{place.path}: {place.what} -> {want}")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memorystore_dev.version")
    parser.add_argument("--write", action="store_true", help="stamp every place from VERSION")
    args = parser.parse_args(argv)
    if args.write:
        stamp()
        return 0
    problems = drift()
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print("run: python -m memorystore_dev.version --write", file=sys.stderr)
        return 1
    print(f"version {version()}: every place agrees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
