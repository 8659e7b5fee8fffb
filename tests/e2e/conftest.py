"""Cluster fixtures: the real control plane (or $KUBECONFIG), one namespace per test."""

from __future__ import annotations

import re
import signal
import sys
import uuid
from collections.abc import Iterator

import pytest

from memorystore.devcluster.target import Kube, kube_for_tests


def _log(line: str) -> None:
    print(f"[cluster] {line}", file=sys.__stderr__, flush=True)


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the cluster is stopped and its
    # directory removed; SIGKILL cannot be caught, but the components die with this process.
    previous = signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    try:
        with kube_for_tests(log=_log) as target:
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
