"""Cluster fixtures: the real control plane (or $KUBECONFIG), one namespace per test."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memorystore.operator.crd import BACKUP_CRD_NAME, BACKUP_CRD_PATH, CRD_NAME, CRD_PATH
from memorystore_dev.devcluster.target import Kube, kube_for_tests
from memorystore_dev.operator_process import start_operator, stop_operator
from support import group_resources
from support.real_node import RealNodeRun, real_node_run


def _log(line: str) -> None:
    print(f"[cluster] {line}", file=sys.__stderr__, flush=True)
    if path := os.environ.get("MEMORYSTORE_TEST_LOG"):  # pytest-xdist workers' stderr is lost
        with open(path, "a") as out:
            print(f"{time.strftime('%H:%M:%S')} [cluster] {line}", file=out)


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the cluster is stopped and its
    # directory removed; SIGKILL cannot be caught, but the components die with this process.
    previous = signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    try:
        with group_resources.held(kube_for_tests(log=_log)) as target:
            yield target
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{name}-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", name)
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def real_node() -> Iterator[RealNodeRun]:
    """A local control plane with a REAL kubelet node (tests/support/real_node.py): separate
    from `kube` so the simulated-node suite stays fast. Skips without root or the Debian
    packages (a failure when CI=true); fails at teardown if the host is not restored."""
    previous = signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    try:
        with group_resources.held(real_node_run(log=_log)) as run:
            yield run
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture
def operator_log(tmp_path: Path) -> Iterator[Path]:
    log = tmp_path / "operator.log"
    yield log
    # pytest shows captured output only for a failed test: the operator's last words
    print(log.read_text()[-5000:] if log.exists() else "(no operator log)")


@pytest.fixture
def run_operator(
    kube: Kube, namespace: str, operator_log: Path
) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """`run_operator(**start_operator options)`: the CRDs applied, an operator watching the
    test's namespace (resync every 2 s); every one started is stopped at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def run(**options: object) -> subprocess.Popen[bytes]:
        for path, name in ((CRD_PATH, CRD_NAME), (BACKUP_CRD_PATH, BACKUP_CRD_NAME)):
            kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
            kube.wait_established(name)
        options.setdefault("resync_seconds", 2)
        started.append(start_operator(kube.kubeconfig, namespace, operator_log, **options))
        return started[-1]

    yield run
    for proc in started:
        stop_operator(proc)


@pytest.fixture
def operator(run_operator: Callable[..., subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    return run_operator()
