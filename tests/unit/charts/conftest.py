"""The pinned helm every chart test renders with (built by `make tools` when missing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore_dev.devcluster.tools import ensure_tools


@pytest.fixture(scope="session")
def helm() -> Path:
    try:
        return ensure_tools(["helm"])["helm"]
    except Exception as exc:  # a failed build fails these tests, it never skips them
        pytest.fail(f"cannot build the pinned helm (memorystore dev tools --tools helm): {exc}")
