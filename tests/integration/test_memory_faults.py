"""How the agent side behaves when the memory service fails: on the network, for real.

A `FaultProxy` sits between the middleware and the real service and refuses, hangs, or loses
a response. Fail-open turns go on without memory (warning + metric), the breaker stops
calling a failing service and probes it after the cool-down, strict mode raises, a retried
write is stored once, and cancellation is never swallowed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from agentscope.message import UserMsg
from prometheus_client import REGISTRY

from memorystore.middleware.client import MemoryServiceError
from support.agent_memory import agent_for, chat, factories, hints, key_file, stored
from support.fault_proxy import FaultProxy

PREFERENCE = "Please make my charts in dark mode by default."
REQUEST = "Draw me a bar chart of monthly sales."

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def proxy(service) -> Iterator[FaultProxy]:
    url = urlsplit(service.url)
    with FaultProxy(url.hostname or "127.0.0.1", url.port or 80) as fault_proxy:
        yield fault_proxy


@pytest.fixture
async def make_factory(service, proxy: FaultProxy, tmp_path: Path):
    async with factories(proxy.url, key_file(tmp_path, service.api_key)) as make:
        yield make


def fail_open_count(op: str) -> float:
    return REGISTRY.get_sample_value("memorystore_agent_fail_open_total", {"op": op}) or 0.0


async def test_a_stopped_service_fails_open_with_a_warning_and_a_metric(
    make_factory, proxy, http, caplog
):
    factory = make_factory(mode="static_control")
    await chat(factory, PREFERENCE, ["Noted."], session="s1")  # reachable: memory is on
    before = (fail_open_count("recall"), fail_open_count("capture"))

    proxy.mode = "refuse"
    with caplog.at_level(logging.WARNING, logger="memorystore.middleware"):
        reply, model, _ = await chat(factory, REQUEST, ["Chart without memory."], session="s2")
    assert reply.get_text_content() == "Chart without memory."
    (call,) = model.calls
    assert hints(call) == []
    assert fail_open_count("recall") == before[0] + 1
    assert fail_open_count("capture") == before[1] + 1
    assert "without recalled memory" in caplog.text and "not written to memory" in caplog.text
    assert "Token" not in caplog.text, "the service key never reaches a log line"
    proxy.mode = "forward"
    assert REQUEST not in stored(http, user_id="alice")


async def test_a_hanging_service_costs_the_turn_at_most_the_timeout(make_factory, proxy):
    factory = make_factory(mode="static_control", timeoutSeconds=0.5)
    await chat(factory, PREFERENCE, ["Noted."], session="s1")
    proxy.mode = "hang"
    started = time.monotonic()
    reply, _, _ = await chat(factory, REQUEST, ["Chart without memory."], session="s2")
    assert reply.get_text_content() == "Chart without memory."
    # recall and write-back each give up after 0.5 s (the hang would last an hour)
    assert time.monotonic() - started < 10


async def test_the_breaker_skips_a_failing_service_then_probes_and_recovers(
    make_factory, proxy, http
):
    factory = make_factory(
        mode="static_control", breaker={"failureThreshold": 2, "cooldownSeconds": 0.5}
    )
    await chat(factory, PREFERENCE, ["Noted."], session="s1")
    proxy.mode = "refuse"
    # recall fails, then the background write-back fails: two failures open the breaker
    await chat(factory, REQUEST, ["No memory."], session="s2")
    assert factory.client is not None and factory.client.breaker.state == "open"

    tried = proxy.connections
    assert await factory("alice", "assistant", "s3") == [], "open breaker: memory off, no call"
    assert proxy.connections == tried

    proxy.mode = "forward"
    await asyncio.sleep(0.6)
    # after the cool-down the next run's recall is the probe; it succeeds and closes the breaker
    _, model, _ = await chat(factory, REQUEST, ["Dark-mode chart."], session="s4")
    (call,) = model.calls
    assert any("dark mode" in hint for hint in hints(call))
    assert factory.client.breaker.state == "closed"


async def test_strict_mode_raises_instead_of_going_on_without_memory(make_factory, proxy):
    factory = make_factory(mode="static_control", failOpen=False)
    await chat(factory, PREFERENCE, ["Noted."], session="s1")
    proxy.mode = "refuse"
    agent, _ = await agent_for(factory, ["never reached"], session="s2")
    with pytest.raises(MemoryServiceError, match="memory service recall"):
        await agent.reply(UserMsg(name="user", content=REQUEST))

    cold = make_factory(mode="static_control", failOpen=False)  # never reached the service
    with pytest.raises(MemoryServiceError, match="memory service ping"):
        await cold("alice", "assistant", "s3")


async def test_a_write_whose_response_is_lost_is_retried_and_stored_once(make_factory, proxy, http):
    factory = make_factory(mode="static_control")
    proxy.lose_response_to = "/v3/memories/add/"
    await chat(factory, PREFERENCE, ["Noted."], session="s1")
    adds = [r for r in proxy.requests if r == "POST /v3/memories/add/"]
    assert len(adds) == 2, "the lost response made the client send the write again"
    assert proxy.lose_response_to is None
    # the service ran the first attempt; the retry carried the same key and was replayed
    assert stored(http, user_id="alice") == sorted([PREFERENCE, "Noted."])


async def test_cancellation_propagates_through_a_slow_recall(make_factory, proxy):
    factory = make_factory(mode="static_control", timeoutSeconds=30)
    await chat(factory, PREFERENCE, ["Noted."], session="s1")
    proxy.mode = "hang"
    agent, model = await agent_for(factory, ["never reached"], session="s2")
    task = asyncio.create_task(agent.reply(UserMsg(name="user", content=REQUEST)))
    await asyncio.sleep(0.3)  # the turn is waiting on recall now
    task.cancel()
    # the middleware never turns a cancellation into "go on without memory"
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.calls == [], "the turn stopped; it did not go on to the model"
