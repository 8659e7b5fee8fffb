"""AgentScope's stock `Mem0Middleware`, over the real `mem0.AsyncMemoryClient`, unchanged.

A real AgentScope 2.0 `Agent` (reply loop, middlewares, toolkit, OpenAI chat formatter) talks
to our memory service through mem0's hosted-platform client; only the chat model is a scripted
stand-in. The middleware swallows mem0 errors (it only logs them), so every check looks at the
effect instead: what the service holds (listed over HTTP) and what the model was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
import pytest
from agentscope.agent import Agent
from agentscope.message import Msg, UserMsg
from agentscope.middleware import Mem0Middleware
from agentscope.tool import Toolkit
from mem0 import AsyncMemoryClient

from support.scripted_agent_model import ModelCall, ScriptedAgentModel, ToolCall, Turn

PREFERENCE = "Please make my charts in dark mode by default."
ACK = "Noted: dark mode."
REQUEST = "Draw me a bar chart of monthly sales."
# The header the middleware puts on the memories it injects (its default).
MEMORY_HEADER = "## Relevant memories from past conversations"

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def client(service) -> AsyncIterator[AsyncMemoryClient]:
    # The constructor pings the service with a blocking request: keep it off the event loop.
    mem0_client = await asyncio.to_thread(
        AsyncMemoryClient, api_key=service.api_key, host=service.url
    )
    yield mem0_client
    await mem0_client.async_client.aclose()


def stored(http: httpx.Client, user_id: str) -> list[dict[str, Any]]:
    """The user's memories as the service lists them (`POST /v3/memories/`)."""
    response = http.post(
        "/v3/memories/", params={"page_size": 100}, json={"filters": {"user_id": user_id}}
    )
    response.raise_for_status()
    body = response.json()
    assert body["count"] == len(body["results"])
    return body["results"]


async def chat(
    client: AsyncMemoryClient,
    user_id: str,
    mode: Literal["static_control", "agent_control", "both"],
    turns: list[Turn],
    text: str,
) -> tuple[Msg, ScriptedAgentModel]:
    """One session: a brand-new agent (empty context) with a new middleware answers `text`."""
    middleware = Mem0Middleware(user_id=user_id, client=client, mode=mode)
    model = ScriptedAgentModel(turns)
    agent = Agent(
        name="assistant",
        system_prompt="You are a charting assistant.",
        model=model,
        # A plain Agent never asks a middleware for its tools: hand them over explicitly.
        toolkit=Toolkit(tools=await middleware.list_tools()),
        middlewares=[middleware],
    )
    reply = await agent.reply(UserMsg(name="user", content=text))
    assert model.remaining_turns == 0, "the agent stopped before the script was played out"
    return reply, model


def memory_hints(call: ModelCall) -> list[str]:
    return [text for text in call.texts("user") if MEMORY_HEADER in text]


async def test_static_control_writes_the_exchange_back(client, http):
    reply, model = await chat(client, "alice", "static_control", [ACK], PREFERENCE)

    assert reply.get_text_content() == ACK
    (call,) = model.calls
    assert memory_hints(call) == [], "nothing was stored yet, so nothing may be injected"
    assert "search_memory" not in call.tool_names, "static_control offers no memory tools"
    # The middleware wrote (user text, final reply) through the client; stored as written.
    memories = stored(http, "alice")
    assert sorted((m["role"], m["memory"]) for m in memories) == [
        ("assistant", ACK),
        ("user", PREFERENCE),
    ]
    assert all(m["user_id"] == "alice" for m in memories)


async def test_a_new_session_recalls_the_memory_and_other_users_do_not_see_it(client, http):
    await chat(client, "alice", "static_control", [ACK], PREFERENCE)

    # Session 2: a fresh agent; the only way "dark mode" can reach the model is recall.
    reply, model = await chat(client, "alice", "static_control", ["Here is your chart."], REQUEST)
    assert reply.get_text_content() == "Here is your chart."
    (call,) = model.calls
    assert not any("dark mode" in text for text in call.texts("system"))
    (hint,) = memory_hints(call)
    assert f"- {PREFERENCE}" in hint and f"- {ACK}" in hint
    # The hint sits right after the user's request, as a separate user-role message.
    user_texts = call.texts("user")
    assert user_texts[user_texts.index(REQUEST) + 1] == hint

    # Bob, same question, same service: none of alice's memories reach his model.
    _, bob_model = await chat(client, "bob", "static_control", ["Here you go, Bob."], REQUEST)
    (bob_call,) = bob_model.calls
    assert memory_hints(bob_call) == []
    assert not any("dark mode" in text for text in bob_call.texts())
    assert sorted(m["memory"] for m in stored(http, "bob")) == sorted(
        [REQUEST, "Here you go, Bob."]
    )


async def test_agent_control_search_tool_returns_the_users_memory(client, http):
    await client.add([{"role": "user", "content": PREFERENCE}], user_id="alice")
    await client.add([{"role": "user", "content": "I like light mode charts."}], user_id="bob")

    search = ToolCall("search_memory", {"keywords": ["chart colour theme"], "limit": 3})

    def answer(messages: list[dict[str, Any]]) -> str:
        # A reply that depends on what the tool returned, as a real model's would.
        (result,) = [m["content"] for m in messages if m["role"] == "tool"]
        return "Drawing it in dark mode." if "dark mode" in result else "Drawing it."

    reply, model = await chat(client, "alice", "agent_control", [search, answer], REQUEST)

    first, second = model.calls
    assert {"search_memory", "add_memory"} <= set(first.tool_names)
    assert "`search_memory`" in first.texts("system")[0], "the tool nudge is in the prompt"
    # agent_control injects nothing: the memory can only arrive through the tool.
    assert memory_hints(first) == [] and not any("dark mode" in t for t in first.texts())
    (tool_message,) = [m for m in second.messages if m["role"] == "tool"]
    assert tool_message["tool_call_id"] == search.id
    assert tool_message["name"] == "search_memory"
    assert tool_message["content"] == f"- {PREFERENCE}", "alice's memory only, not bob's"
    assert reply.get_text_content() == "Drawing it in dark mode."
    # agent_control does not write the exchange back: the store is unchanged.
    assert [m["memory"] for m in stored(http, "alice")] == [PREFERENCE]
