"""Build both images and start them with no network, where a Docker engine is available.

The development machine has none (the test then skips and says so); `make kind-e2e`
machines do.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _docker_ready() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    return subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0


pytestmark = [
    pytest.mark.skipif(not _docker_ready(), reason="no Docker engine on this machine"),
    pytest.mark.timeout(1800),
]


@pytest.mark.parametrize("target", ["memory-service", "operator"])
def test_image_builds_and_starts_offline_as_non_root(target: str):
    tag = f"memorystore-e2e/{target}:test"
    subprocess.run(
        ["docker", "build", "--target", target, "-t", tag, str(ROOT)], check=True, timeout=1700
    )
    whoami = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "id", tag, "-u"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert whoami.stdout.strip() == "10001"
    helped = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", tag, "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "memorystore" in helped.stdout
