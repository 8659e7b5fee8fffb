"""The product ships only what users run; the developer tools (dev/) stay outside it.

Why: the images install the product wheel, so anything in it ships to every tenant, and a
product import of the tooling would fail in the images (where memorystore-dev is absent).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import memorystore.cli as cli
from support.paths import REPO

ROOT = REPO
PRODUCT_FOLDERS = ("memorystore", "service", "operator", "middleware")
TOOLING_MODULES = {"memorystore_dev", "support", "tests"}
TOOLING_NAMES = ("devcluster", "bench", "locomo", "operator_process", "memorystore_dev")
# Build inputs only: a copy keeps setuptools' build/ (whose leftovers a wheel would pick up)
# and egg-info out of the working tree.
SKIP = shutil.ignore_patterns(
    ".venv", ".git", ".hypothesis", "*_cache", "build", "dist", "*.egg-info", "__pycache__"
)


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=SKIP)
    uv = Path(sys.executable).parent / "uv"
    subprocess.run(
        [uv, "build", "--quiet", "--wheel", "--python", sys.executable,
         "--out-dir", work / "out", source],
        check=True, timeout=300,
    )  # fmt: skip
    (wheel,) = (work / "out").glob("memorystore-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def product_sources() -> list[Path]:
    sources = [p for folder in PRODUCT_FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(sources) > 20  # the scan sees the product
    return sources


def test_the_product_wheel_holds_no_developer_tools(wheel_files):
    tooling = [f for f in wheel_files if any(name in f for name in TOOLING_NAMES)]
    assert not tooling, tooling
    for module in ("memorystore/cli.py", "memorystore/scripted_model.py"):
        assert module in wheel_files, module
    data_files = ["service/retrieval/calibration.json", "service/retrieval/language_means.json"]
    # the rules' lexicons, every one of them (the rules read them at import)
    lexicons = sorted((ROOT / "memorystore/rules/lexicons").iterdir())
    assert lexicons
    data_files += [f"rules/lexicons/{path.name}" for path in lexicons]
    for data in data_files:
        assert f"memorystore/{data}" in wheel_files, f"{data} is read at run time: ship it"
    # every product module ships (a subpackage missing from pyproject's list would not)
    shipped = {
        rel if rel.startswith("memorystore/") else f"memorystore/{rel}"
        for rel in (p.relative_to(ROOT).as_posix() for p in product_sources())
    }
    assert not shipped - set(wheel_files), sorted(shipped - set(wheel_files))


def _imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def test_the_product_imports_no_tooling():
    offending = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in product_sources()
        for module in _imported_modules(path)
        if module.split(".")[0] in TOOLING_MODULES
    }
    assert not offending, sorted(offending)


def test_the_dev_plugin_adds_the_bench_and_dev_commands(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["bench", "--help"])
    assert done.value.code == 0
    listed = capsys.readouterr().out
    for bench in ("service", "agent", "operator", "locomo"):
        assert f"    {bench} " in listed, listed
    with pytest.raises(SystemExit) as done:
        cli.main(["dev", "--help"])
    assert done.value.code == 0
    assert "tools" in (listed := capsys.readouterr().out) and "cluster" in listed, listed


@pytest.mark.parametrize("argv", [["bench", "service", "--sizes", "10"], ["dev", "--help"]])
def test_without_the_plugin_the_tool_commands_say_what_to_install(monkeypatch, capsys, argv):
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    listed = capsys.readouterr().out
    assert "bench" in listed and "dev" in listed and "examples:" in listed, listed
    assert cli.main(argv) == 2
    said = capsys.readouterr()
    assert said.out == "" and len(said.err.splitlines()) == 1, said
    assert "developer tools" in said.err and "make install" in said.err, said.err
