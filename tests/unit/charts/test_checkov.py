"""checkov (pinned, from PyPI) over the rendered chart and every golden manifest: no failed
check but the ones skipped below, each with why.

checkov pins many packages of its own, so it never goes into the project's venv: it is
installed into a venv of its own under the user cache
(`~/.cache/memorystore/checkov-<hash of dev/checkov.lock>`), with uv and the hashes of
`dev/checkov.lock`, the first time a machine runs this test (about 30 s with a warm uv
cache, a minute or two cold); afterwards the venv is reused. The chart is rendered in every
install mode (the default: the release's namespace; a namespace list; cluster-wide; with
the ServiceMonitor) by the pinned helm; the golden manifests are what the operator applies
for the sample stores (tests/unit/operator/golden/).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from unit.charts.helm_chart import CLUSTER_WIDE, NAMESPACED, render

from support.paths import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

LOCK = REPO / "dev" / "checkov.lock"
GOLDEN = REPO / "tests" / "unit" / "operator" / "golden"
MODES = {
    "default": [],
    "namespaces": NAMESPACED,
    "cluster-wide": CLUSTER_WIDE,
    "monitored": ["--set", "metrics.serviceMonitor.enabled=true"],
}

# Checks skipped, each with why. A skip that no longer fires anywhere fails the test (stale),
# so this list is exactly what checkov still objects to.
SKIPS: dict[str, str] = {
    # "Image should use digest": the chart's and the operator's default images are versioned
    # tags set per release (ghcr.io/memorystore/...:0.1.0, qdrant/qdrant:v1.18.3); pinning
    # digests is the installer's choice (the images.* values, spec.service.image,
    # spec.vectorStore.managed.image) for registries this project does not control.
    "CKV_K8S_43": "images are versioned tags; digests are the installer's choice (values)",
    # "Image Pull Policy should be Always": IfNotPresent with a versioned tag is Kubernetes'
    # own default for tagged images; Always would make every pod start (and every restart
    # of a tenant's service) depend on the registry being reachable.
    "CKV_K8S_15": "IfNotPresent with versioned tags: a restart never waits on the registry",
    # "Service Account Tokens only where necessary": the operator's pod is the one pod that
    # mounts its token, to talk to the API server (every tenant pod sets
    # automountServiceAccountToken: false, which checkov accepts).
    "CKV_K8S_38": "the operator reaches the API server with its ServiceAccount token",
    # "Containers should run as a high UID": the memory service and the operator run as
    # 10001; Qdrant runs as 1000, the user its official image is built for (its files and
    # /qdrant are owned by it), below checkov's 10000 threshold.
    "CKV_K8S_40": "Qdrant runs as 1000, the user its official image is built for",
}


def _checkov() -> Path:
    """checkov from its own venv, created once per lock file: a file lock keeps parallel
    workers from building it twice, and a marker written last tells a complete venv from
    one an interrupted install left (rebuilt). Built in place: a venv's scripts name their
    interpreter by its path."""
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:12]
    home = Path.home() / ".cache" / "memorystore"
    venv = home / f"checkov-{digest}"
    binary, complete = venv / "bin" / "checkov", venv / ".complete"
    if complete.exists():
        return binary
    home.mkdir(parents=True, exist_ok=True)
    uv = str(Path(sys.executable).parent / "uv")
    with (home / f"checkov-{digest}.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if complete.exists():
            return binary
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
        python = str(venv / "bin" / "python")
        install = [uv, "pip", "install", "--quiet", "--python", python, "--require-hashes"]
        subprocess.run([*install, "-r", str(LOCK)], check=True, timeout=1200)
        complete.write_text(LOCK.read_text())
    return binary


@pytest.fixture(scope="module")
def checkov() -> Path:
    try:
        return _checkov()
    except (subprocess.SubprocessError, OSError) as exc:  # a failed install fails, never skips
        pytest.fail(f"cannot install checkov from {LOCK.relative_to(REPO)}: {exc}")


@pytest.fixture(scope="module")
def manifests(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart in every mode and the golden manifests, one object per file."""
    root = tmp_path_factory.mktemp("checkov")
    for mode, values in MODES.items():
        for i, obj in enumerate(render(helm, *values)):
            if obj["kind"] == "CustomResourceDefinition" and mode != "default":
                continue  # the same CRDs in every mode
            name = f"chart-{mode}-{i:02d}-{obj['kind']}-{obj['metadata']['name']}.yaml"
            (root / name).write_text(yaml.safe_dump(obj))
    for path in sorted(GOLDEN.glob("*.yaml")):
        shutil.copy(path, root / f"golden-{path.name}")
    return root


def run_checkov(checkov: Path, directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [
            str(checkov),
            "--directory",
            str(directory),
            "--framework",
            "kubernetes",
            "--output",
            "json",
            "--quiet",
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode in (0, 1), f"checkov failed to run: {out.stderr[-2000:]}"
    report = json.loads(out.stdout)
    reports = report if isinstance(report, list) else [report]
    return [check for r in reports for check in r.get("results", {}).get("failed_checks", [])]


def test_checkov_finds_nothing_but_the_documented_skips(checkov: Path, manifests: Path):
    failed = run_checkov(checkov, manifests)
    unexplained = sorted(
        {
            f"{c['check_id']} {c['check_name']}: {Path(c['file_path']).name} ({c['resource']})"
            for c in failed
            if c["check_id"] not in SKIPS
        }
    )
    assert not unexplained, "checkov failures with no documented skip:\n" + "\n".join(unexplained)
    fired = {c["check_id"] for c in failed}
    stale = sorted(set(SKIPS) - fired)
    assert not stale, f"skips that no longer fire (remove them from SKIPS): {stale}"


def test_checkov_does_fail_a_manifest_that_breaks_a_rule(checkov: Path, tmp_path: Path):
    """The scan is live: a privileged container with a secret in an env var is refused."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bad", "namespace": "tenants"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox:1.36",
                    "securityContext": {"privileged": True},
                    "env": [
                        {
                            "name": "API_KEY",
                            "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                        }
                    ],
                }
            ]
        },
    }
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(pod))
    fired = {c["check_id"] for c in run_checkov(checkov, tmp_path)}
    assert {"CKV_K8S_16", "CKV_K8S_35"} <= fired, fired  # privileged; secret as env var
