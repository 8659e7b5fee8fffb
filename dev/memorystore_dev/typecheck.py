"""`make lint`'s type check: mypy over the product as it is installed (`memorystore.*`).

Why a shadow tree: the product's top-level folders (`service/`, `operator/`, `middleware/`) are
installed as subpackages of `memorystore` (pyproject's package-dir), which mypy cannot map.
The tree under `.memorystore/typecheck/` is `memorystore/` with those folders linked in, so
mypy reads the checkout's own files; its messages name the checkout's paths again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# installed name → folder in the checkout (pyproject.toml's [tool.setuptools] package-dir)
FOLDERS = {
    "service": "service",
    "operator": "operator",
    "middleware": "middleware",
    "kubectl": "kubectl",
}


def shadow_tree(root: Path = ROOT) -> Path:
    """`.memorystore/typecheck/memorystore`: the core package's files, the folders linked in."""
    tree = root / ".memorystore" / "typecheck"
    package = tree / "memorystore"
    package.mkdir(parents=True, exist_ok=True)
    wanted = {entry.name: entry for entry in (root / "memorystore").iterdir()}
    wanted |= {name: root / folder for name, folder in FOLDERS.items()}
    for link in package.iterdir():
        if link.is_symlink() and (link.name not in wanted or link.resolve() != wanted[link.name]):
            link.unlink()
    for name, target in wanted.items():
        link = package / name
        if not link.is_symlink():
            link.symlink_to(target)
    return tree


def checkout_path(line: str) -> str:
    """A mypy message with the shadow tree's path turned back into the checkout's."""
    for name, folder in FOLDERS.items():
        prefix = f"memorystore/{name}/"
        if line.startswith(prefix):
            return folder + "/" + line.removeprefix(prefix)
    return line


def main(argv: list[str] | None = None) -> int:
    tree = shadow_tree()
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".memorystore" / "mypy-cache"),
        "-p",
        "memorystore",
        *(argv if argv is not None else sys.argv[1:]),
    ]
    done = subprocess.run(
        command, cwd=tree, capture_output=True, text=True, env={**os.environ, "MYPYPATH": ""}
    )
    for line in (done.stdout + done.stderr).splitlines():
        print(checkout_path(line))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
