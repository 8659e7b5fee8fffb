"""`python -m memorystore_dev.workflows`: lint the GitHub workflows with the pinned actionlint.

The workflows (.github/workflows/: ci, kind, release) cannot run on this machine, so `make
lint` checks them statically: expressions and contexts, action inputs, runner labels, job
dependencies. actionlint is built from its pinned Go module like the cluster tools
(devcluster/versions.py). Its shellcheck and pyflakes integrations are turned off, so the
result does not depend on what else a machine has installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memorystore_dev.devcluster.tools import ensure_tools

__all__ = ["WORKFLOWS", "lint", "main"]

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def lint(files: list[Path]) -> subprocess.CompletedProcess[str]:
    """actionlint's verdict on `files` (exit 0: clean; 1: problems, one per line)."""
    actionlint = ensure_tools(["actionlint"], log=lambda _: None)["actionlint"]
    command = [str(actionlint), "-no-color", "-oneline", "-shellcheck=", "-pyflakes="]
    return subprocess.run([*command, *map(str, files)], capture_output=True, text=True)


def main() -> int:
    files = sorted(WORKFLOWS.glob("*.yml"))
    if not files:
        print(f"no workflows in {WORKFLOWS}", file=sys.stderr)
        return 1
    result = lint(files)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.returncode == 0:
        print(f"actionlint: {len(files)} workflows clean ({', '.join(f.name for f in files)})")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
