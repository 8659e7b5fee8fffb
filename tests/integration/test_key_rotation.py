"""Key rotation on the real service over HTTP, and the real agent-side client, with no restart.

The key files are rewritten while the service runs, exactly as kubelet updates a mounted
Secret (a new file swapped in under the same name): the service's `<store>-service-key`
mount (api-key, previous-api-key) and the agent's client-Secret mount (api-key). One
service process and one factory live through the whole rotation; what each accepts or
sends is observed on the wire.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from memorystore.config import ClientConfig, SecretSource
from memorystore.middleware import MemoryMiddlewareFactory
from memorystore.middleware.client import MemoryServiceError
from memorystore.service.ops.runner import ServiceThread, embedded_config

K0, K1, K2 = "key-zero-" + "a" * 32, "key-one-" + "b" * 32, "key-two-" + "c" * 32


def write(path: Path, value: str) -> None:
    """Replace the file atomically under the same name, as kubelet's atomic writer does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(value)
    os.replace(tmp, path)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll `check`; return the seconds it took. Fails naming `what`."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.1)
    return time.monotonic() - start


class Mounts:
    """The two Secret mounts: the service's key directory and the agent's."""

    def __init__(self, root: Path) -> None:
        self.current = root / "service-key" / "api-key"
        self.previous = root / "service-key" / "previous-api-key"
        self.agent = root / "agent" / "api-key"

    def service_keys(self, current: str, previous: str | None) -> None:
        write(self.current, current)
        if previous is None:
            self.previous.unlink(missing_ok=True)
        else:
            write(self.previous, previous)


@pytest.fixture
def mounts(tmp_path: Path) -> Mounts:
    m = Mounts(tmp_path)
    m.service_keys(K0, None)
    write(m.agent, K0)
    return m


@pytest.fixture
def service(tmp_path: Path, mounts: Mounts) -> Iterator[ServiceThread]:
    cfg = embedded_config(
        tmp_path / "data",
        api_key=SecretSource(file=str(mounts.current)),
        previous_api_key=SecretSource(file=str(mounts.previous), optional=True),
    )
    with ServiceThread(cfg) as svc:
        yield svc


def status_with(service: ServiceThread, key: str) -> int:
    response = httpx.post(
        f"{service.url}/v3/memories/",
        json={"filters": {"user_id": "alice"}},
        headers={"Authorization": f"Token {key}"},
        timeout=30,
    )
    return response.status_code


def accepted(service: ServiceThread, key: str) -> bool:
    return status_with(service, key) == 200


class Wire(httpx.AsyncBaseTransport):
    """The real HTTP transport, recording which key each request carried (and its answer)."""

    def __init__(self, keys: dict[str, str]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.names = {f"Token {v}": k for k, v in keys.items()}
        self.sent: list[tuple[str, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        auth = request.headers.get("Authorization", "")
        self.sent.append((self.names.get(auth, "?"), response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def agent_factory(service: ServiceThread, mounts: Mounts, wire: Wire) -> MemoryMiddlewareFactory:
    cfg = ClientConfig(
        endpoint=service.url,
        api_key=SecretSource(file=str(mounts.agent)),
        timeout_seconds=30,
    )
    return MemoryMiddlewareFactory(cfg, transport=wire)


async def test_rotation_service_first_then_agents_then_expiry_without_restart(
    service: ServiceThread, mounts: Mounts
):
    wire = Wire({"K0": K0, "K1": K1})
    factory = agent_factory(service, mounts, wire)
    client = factory.client
    assert client is not None
    thread = service.thread
    try:
        await client.add(
            [{"role": "user", "content": "I like tea."}], {"user_id": "alice"}, infer=False
        )
        assert wire.sent == [("K0", 200)]

        # the operator rotates: the service's mount gets K1 (current) and K0 (previous)
        mounts.service_keys(K1, K0)
        took = wait_until(lambda: accepted(service, K1), 5, "the new key accepted")
        assert took < 3  # a miss re-reads the files (at most once a second)
        assert accepted(service, K0), "the old key works during the grace period"
        assert status_with(service, K2) == 401

        # agents still holding K0 keep working
        wire.sent.clear()
        await client.search("tea", {"user_id": "alice"}, top_k=5, threshold=0.0)
        assert wire.sent == [("K0", 200)]

        # the agent's client Secret is refreshed: the very same client sends K1 from now on
        write(mounts.agent, K1)
        wire.sent.clear()
        found = await client.search("tea", {"user_id": "alice"}, top_k=5, threshold=0.0)
        assert wire.sent == [("K1", 200)]
        assert [m["memory"] for m in found] == ["I like tea."]  # same data, same process

        # the grace period ends: previous-api-key is removed, K0 is refused within ~10 s
        mounts.service_keys(K1, None)
        took = wait_until(lambda: not accepted(service, K0), 15, "the old key refused")
        assert took <= 12
        assert accepted(service, K1)
        wire.sent.clear()
        await client.add(
            [{"role": "user", "content": "And scones."}], {"user_id": "alice"}, infer=False
        )
        assert wire.sent == [("K1", 200)]
        assert service.thread is thread and thread.is_alive()  # never restarted
    finally:
        await factory.aclose()


async def test_an_agent_refreshed_before_the_service_falls_back_to_the_old_key(
    service: ServiceThread, mounts: Mounts
):
    wire = Wire({"K0": K0, "K1": K1})
    factory = agent_factory(service, mounts, wire)
    client = factory.client
    assert client is not None
    try:
        await client.ping()
        # kubelet refreshed the agent's mount first: the service does not know K1 yet
        write(mounts.agent, K1)
        wire.sent.clear()
        await client.ping()
        assert wire.sent == [("K1", 401), ("K0", 200)]
        assert client.breaker.state.name == "CLOSED"  # a rotation is no outage

        # now the service's mount: K1 current, K0 previous; K1 works, K0 is forgotten
        mounts.service_keys(K1, K0)
        wait_until(lambda: accepted(service, K1), 5, "the new key accepted")
        wire.sent.clear()
        await client.ping()
        assert wire.sent == [("K1", 200)]
        mounts.service_keys(K1, None)
        wait_until(lambda: not accepted(service, K0), 15, "the old key refused")
        wire.sent.clear()
        await client.ping()
        assert wire.sent == [("K1", 200)]
    finally:
        await factory.aclose()


async def test_a_key_nobody_knows_is_refused_and_never_shown(
    service: ServiceThread, mounts: Mounts
):
    write(mounts.agent, K2)  # say, a hand-edited Secret
    wire = Wire({"K0": K0, "K1": K1, "K2": K2})
    factory = agent_factory(service, mounts, wire)
    client = factory.client
    assert client is not None
    try:
        with pytest.raises(MemoryServiceError, match="HTTP 401") as caught:
            await client.ping()
        assert wire.sent == [("K2", 401)]  # no other key to try
        text = f"{caught.value!s} {caught.value!r}"
        assert K2 not in text and K0 not in text

        # a key that worked is tried once more after a refusal, and only while it works
        write(mounts.agent, K0)
        await client.ping()
        mounts.service_keys(K1, None)  # K0 rotated out with no grace left
        wait_until(lambda: not accepted(service, K0), 15, "the old key refused")
        write(mounts.agent, K2)
        wire.sent.clear()
        with pytest.raises(MemoryServiceError, match="HTTP 401"):
            await client.ping()
        assert wire.sent == [("K2", 401), ("K0", 401)]
    finally:
        await factory.aclose()


async def test_the_stock_mem0_flavour_picks_up_a_rotated_key(
    service: ServiceThread, mounts: Mounts
):
    cfg = ClientConfig(endpoint=service.url, api_key=SecretSource(file=str(mounts.agent)))
    factory = MemoryMiddlewareFactory(cfg, flavor="mem0")
    try:
        assert len(await factory("alice", "assistant", "s1")) == 1
        mem0_client = factory._mem0_client
        mounts.service_keys(K1, K0)
        write(mounts.agent, K1)
        mounts.service_keys(K1, None)
        wait_until(lambda: not accepted(service, K0), 15, "the old key refused")
        assert len(await factory("alice", "assistant", "s2")) == 1  # no rebuild
        assert factory._mem0_client is mem0_client
        listed = await mem0_client.get_all(filters={"user_id": "alice"})
        assert listed["results"] == []  # answered with the new key (K0 would be a 401)
    finally:
        await factory.aclose()
