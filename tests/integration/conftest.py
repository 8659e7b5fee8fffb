"""Fixtures that run the real memory service (uvicorn on loopback) on the embedded default,
the real PostgreSQL of the PostgreSQL tier's tests and the real Qdrant server of the managed
tier's (the vendored binary: memorystore_dev.qdrant)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from mem0 import AsyncMemoryClient

from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore_dev.postgres import PostgresServer


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ServiceThread]:
    with ServiceThread(embedded_config(tmp_path / "data")) as svc:
        yield svc


@pytest.fixture
def http(service: ServiceThread) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Token {service.api_key}"}
    with httpx.Client(base_url=service.url, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
async def client(service: ServiceThread) -> AsyncIterator[AsyncMemoryClient]:
    """The real mem0 client (`AsyncMemoryClient(host=…)`) against the service."""
    mem0_client = await asyncio.to_thread(
        AsyncMemoryClient, api_key=service.api_key, host=service.url
    )
    yield mem0_client
    await mem0_client.async_client.aclose()


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL 18 with pgvector and pg_trgm (the harness's), one per test module."""
    with PostgresServer() as server:
        yield server
