"""The release's one version (`memorystore_dev.version`), its artifacts (`release.py`) and
its workflows, linted by the pinned actionlint (`workflows.py`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from memorystore_dev import release, workflows
from memorystore_dev.version import PLACES, ROOT, drift, stamp, version

VERSION = (ROOT / "VERSION").read_text().strip()


def test_every_place_carries_the_version():
    assert drift() == []
    assert version() == VERSION


def _copy_of_the_places(tmp_path: Path, new: str) -> Path:
    for place in {p.path for p in PLACES}:
        (tmp_path / place).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / place, tmp_path / place)
    (tmp_path / "VERSION").write_text(new + "\n")
    return tmp_path


def test_stamping_writes_every_place_and_nothing_else(tmp_path):
    root = _copy_of_the_places(tmp_path, "2.3.4-rc.1")
    before = {p.path: (root / p.path).read_text() for p in PLACES}
    problems = drift(root)
    assert len(problems) == len(PLACES)
    assert f"charts/memorystore/Chart.yaml: appVersion is '{VERSION}'" in "\n".join(problems)
    assert stamp(root, say=lambda _: None) == len(PLACES)
    assert drift(root) == [] and stamp(root, say=lambda _: None) == 0
    for path, text in before.items():  # only the version lines changed
        after = (root / path).read_text()
        changed = [a for a, b in zip(after.splitlines(), text.splitlines(), strict=True) if a != b]
        assert changed and all("2.3.4-rc.1" in line for line in changed), path
    chart = yaml.safe_load((root / "charts/memorystore/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == ("2.3.4-rc.1", "2.3.4-rc.1")


@pytest.mark.parametrize("bad", ["1.2", "v1.2.3", "1.2.3 beta", "", "1.2.3\n4.5.6"])
def test_a_version_that_is_not_semantic_is_refused(tmp_path, bad):
    (tmp_path / "VERSION").write_text(bad)
    with pytest.raises(ValueError, match=r"VERSION: .* is not a semantic version"):
        version(tmp_path)


def test_the_cli_and_the_operator_say_the_version():
    out = subprocess.run(
        [sys.executable, "-m", "memorystore", "--version"], capture_output=True, text=True
    )
    assert out.stdout.strip() == f"memorystore {VERSION}"
    from memorystore.operator.builders.model import Images

    assert Images().service == f"ghcr.io/memorystore/memory-service:{VERSION}"


def test_the_changelog_has_the_release_notes_the_workflow_takes():
    text = (ROOT / "CHANGELOG.md").read_text()
    section = re.search(rf"^## \[{re.escape(VERSION)}\]\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section is not None and section.group(1).strip()
    assert "CHANGELOG.md" in (ROOT / ".github/workflows/release.yml").read_text()


def test_the_chart_package_is_versioned(tmp_path):
    package = release.chart_package(tmp_path)
    assert package.name == f"memorystore-{VERSION}.tgz"
    with tarfile.open(package) as archive:
        names = archive.getnames()
    assert "memorystore/Chart.yaml" in names  # its version checked by chart_package


def test_the_workflows_lint_clean():
    files = sorted(workflows.WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} == {"ci.yml", "kind.yml", "release.yml"}
    result = workflows.lint(files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_workflow_is_caught(tmp_path):
    """The lint can fail: an undefined step output, a job that needs one that is not there."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\n"
        "jobs:\n"
        "  a:\n"
        "    runs-on: ubuntu-24.04\n"
        "    needs: [missing]\n"
        "    steps:\n"
        "      - run: echo ${{ steps.nope.outputs.x }}\n"
    )
    result = workflows.lint([bad])
    assert result.returncode == 1
    assert "missing" in result.stdout and "nope" in result.stdout


def test_the_krew_archive_launches_the_plugin_and_its_manifest_names_its_digest(tmp_path):
    archive, manifest = release.krew_plugin(tmp_path / "out")
    again, _ = release.krew_plugin(tmp_path / "again")
    assert archive.read_bytes() == again.read_bytes()  # reproducible: one digest per release
    plugin = yaml.safe_load(manifest.read_text())
    assert plugin["kind"] == "Plugin" and plugin["metadata"]["name"] == "memorystore"
    assert plugin["spec"]["version"] == f"v{VERSION}"
    (platform,) = plugin["spec"]["platforms"]
    assert platform["sha256"] == release._digest(archive)
    assert platform["uri"].endswith(f"/v{VERSION}/{archive.name}")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    launcher = tmp_path / "unpacked" / platform["bin"]
    ran = subprocess.run(
        [str(launcher), "--version"],
        env={"MEMORYSTORE_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"kubectl memorystore {VERSION}"
