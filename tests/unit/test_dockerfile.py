"""The image recipe agrees with what the operator expects of the containers it runs.

No Docker engine runs on the development machine, so the build itself is exercised only
where one is available (see the README's "Images"); these checks keep the recipe and the
operator's pod specs from drifting apart.
"""

from __future__ import annotations

import re
from pathlib import Path

from memorystore.operator import builders

DOCKERFILE = (Path(__file__).resolve().parents[2] / "Dockerfile").read_text()


def test_runs_as_the_uid_the_operator_sets_and_never_as_root():
    assert f"USER {builders.SERVICE_UID}:{builders.SERVICE_UID}" in DOCKERFILE
    assert f"--uid {builders.SERVICE_UID}" in DOCKERFILE


def test_the_service_target_reads_the_config_where_the_operator_mounts_it():
    assert f'"serve", "--config", "{builders.SERVICE_CONFIG_PATH}"' in DOCKERFILE
    assert 'ENTRYPOINT ["memorystore"]' in DOCKERFILE


def test_base_image_and_installer_are_pinned_and_dependencies_come_from_the_lock():
    (base,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base), base
    assert "uv==" in DOCKERFILE and "--constraint requirements.lock" in DOCKERFILE


def test_nothing_is_fetched_at_start():
    assert "MEM0_TELEMETRY=False" in DOCKERFILE and "HF_HUB_OFFLINE=1" in DOCKERFILE
