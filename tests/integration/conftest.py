"""Fixtures that run the real memory service (uvicorn on loopback) on the embedded default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memorystore.service.runner import ServiceThread, embedded_config


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ServiceThread]:
    with ServiceThread(embedded_config(tmp_path / "data")) as svc:
        yield svc


@pytest.fixture
def http(service: ServiceThread) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Token {service.api_key}"}
    with httpx.Client(base_url=service.url, headers=headers, timeout=30) as client:
        yield client
