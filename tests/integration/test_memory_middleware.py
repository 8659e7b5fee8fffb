"""The memory middleware in a real AgentScope `Agent` against the real memory service.

Only the chat model is a scripted stand-in. Each test reads the effect where it lands: what
the model was sent (recorded by the scripted model), what the agent's state holds after the
reply, and what the service stores.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentscope.event import ConfirmResult, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.types import ReplyFinishedReason

from memorystore.middleware import MemoryMiddlewareFactory
from support.agent_memory import (
    agent_for,
    chat,
    client_config,
    factories,
    hints,
    key_file,
    memory_messages,
    stored,
)
from support.scripted_agent_model import ScriptedAgentModel, ToolCall

PREFERENCE = "Please make my charts in dark mode by default."
ACK = "Noted: dark mode."
REQUEST = "Draw me a bar chart of monthly sales."

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def make_factory(service, tmp_path: Path):
    async with factories(service.url, key_file(tmp_path, service.api_key)) as make:
        yield make


async def test_static_control_recalls_into_a_new_session_and_writes_back(make_factory, http):
    factory = make_factory(mode="static_control")
    _, model, _ = await chat(factory, PREFERENCE, [ACK], session="s1")
    (call,) = model.calls
    assert hints(call) == [], "nothing stored yet, so nothing to inject"
    assert "search_memory" not in call.tool_names, "static_control offers no tools"
    assert stored(http, user_id="alice") == sorted([PREFERENCE, ACK])

    reply, model, agent = await chat(factory, REQUEST, ["Here it is, in dark mode."], session="s2")
    (call,) = model.calls
    (hint,) = hints(call)
    assert f"- {PREFERENCE}" in hint
    users = call.texts("user")
    assert users[users.index(REQUEST) + 1] == hint, "the hint sits right after this turn's input"
    assert memory_messages(agent) == [], "the hint is gone from the state after the reply"
    assert reply.get_text_content() == "Here it is, in dark mode."


async def test_agent_control_offers_tools_but_neither_injects_nor_writes_back(make_factory, http):
    factory = make_factory(mode="agent_control")
    http.post(
        "/v3/memories/add/",
        json={"messages": [{"role": "user", "content": PREFERENCE}], "user_id": "alice"},
    ).raise_for_status()
    search = ToolCall("search_memory", {"keywords": ["chart colours"], "limit": 3})

    def answer(messages: list[dict[str, Any]]) -> str:
        (result,) = [m["content"] for m in messages if m["role"] == "tool"]
        return "Dark mode it is." if "dark mode" in result else "Default colours."

    reply, model, _ = await chat(factory, REQUEST, [search, answer])
    first, _ = model.calls
    assert {"search_memory", "add_memory"} <= set(first.tool_names)
    assert "`search_memory`" in first.texts("system")[0]
    assert hints(first) == []
    assert reply.get_text_content() == "Dark mode it is."
    assert stored(http, user_id="alice") == [PREFERENCE], "no automatic write-back"


async def test_both_injects_and_offers_tools(make_factory, http):
    factory = make_factory(mode="both")
    await chat(factory, PREFERENCE, [ACK], session="s1")
    _, model, _ = await chat(factory, REQUEST, ["Done."], session="s2")
    (call,) = model.calls
    assert len(hints(call)) == 1 and {"search_memory", "add_memory"} <= set(call.tool_names)


async def test_no_hint_accumulates_over_ten_turns(make_factory, http):
    factory = make_factory(mode="static_control")
    await chat(factory, PREFERENCE, [ACK], session="s0")
    state: AgentState | None = None
    for turn in range(10):
        text = f"Turn {turn}: draw chart number {turn} for me."
        agent, model = await agent_for(factory, [f"Chart {turn} drawn."], state=state)
        await agent.reply(UserMsg(name="user", content=text))
        await factory.drain()
        (call,) = model.calls
        assert len(hints(call)) == 1, f"turn {turn}: exactly one hint, this turn's"
        assert memory_messages(agent) == []
        # what the app persists between runs: the state, through JSON
        state = AgentState.model_validate_json(agent.state.model_dump_json())
        assert [m.role for m in state.context] == ["user", "assistant"] * (turn + 1)
    assert "## Memories" not in state.model_dump_json()


async def test_error_and_max_iterations_are_not_written_back(make_factory, http):
    factory = make_factory(mode="static_control")

    def fail(_: list[dict[str, Any]]) -> str:
        raise RuntimeError("provider exploded")

    agent, _ = await agent_for(factory, [fail])
    with pytest.raises(RuntimeError, match="provider exploded"):
        await agent.reply(UserMsg(name="user", content="This turn will fail."))
    await factory.drain()
    assert memory_messages(agent) == []

    loop = ToolCall("search_memory", {"keywords": ["anything"]})
    # static_control has no tools: use mode both for a tool loop that hits max_iters
    looping = make_factory(mode="both")
    agent, _ = await agent_for(looping, [loop, loop, "unused"], max_iters=1)
    reply = await agent.reply(UserMsg(name="user", content="Loop until you give up."))
    await looping.drain()
    assert reply.finished_reason == ReplyFinishedReason.EXCEED_MAX_ITERS
    assert stored(http, user_id="alice") == []


class StallingModel(ScriptedAgentModel):
    """Its one model call hangs until cancelled: the user presses stop mid-reply."""

    def __init__(self) -> None:
        super().__init__([])
        self.started = asyncio.Event()

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        self.started.set()
        await asyncio.sleep(3600)


async def test_an_interrupted_reply_is_not_written_back(make_factory, http):
    factory = make_factory(mode="static_control")
    model = StallingModel()
    agent, _ = await agent_for(factory, [], model=model)
    task = asyncio.create_task(agent.reply(UserMsg(name="user", content=PREFERENCE)))
    await asyncio.wait_for(model.started.wait(), 30)
    task.cancel()
    reply = await task
    await factory.drain()
    assert reply.finished_reason == ReplyFinishedReason.INTERRUPTED
    assert stored(http, user_id="alice") == []
    assert memory_messages(agent) == []


async def test_a_parked_reply_writes_nothing_until_resumed_then_writes_the_original_input(
    make_factory, http
):
    factory = make_factory(mode="both", writePermission="ask")
    save = ToolCall("add_memory", {"thinking": "a lasting preference", "content": [PREFERENCE]})
    agent, _ = await agent_for(factory, [save])
    parked = await agent.reply(UserMsg(name="user", content=PREFERENCE))
    await factory.drain()
    assert "waiting for your permission" in parked.get_text_content()
    assert stored(http, user_id="alice") == [], "a parked reply writes nothing"
    assert memory_messages(agent) == []
    assert agent.state.middle_context["memorystore"]["query"] == PREFERENCE

    # the app persists the state and resumes in a new run, with a new agent
    state = AgentState.model_validate_json(agent.state.model_dump_json())
    (pending,) = state.get_awaiting_tool_calls("assistant")
    resumed, _ = await agent_for(factory, ["Saved: dark mode from now on."], state=state)
    confirm = UserConfirmResultEvent(
        reply_id=state.reply_id,
        confirm_results=[ConfirmResult(confirmed=True, tool_call=pending)],
    )
    final = await resumed.reply(confirm)
    await factory.drain()
    assert final.get_text_content() == "Saved: dark mode from now on."
    # the confirmed tool stored the fact; the write-back stored the ORIGINAL input + answer
    assert stored(http, user_id="alice") == sorted([PREFERENCE, "Saved: dark mode from now on."])
    assert "memorystore" not in resumed.state.middle_context
    assert memory_messages(resumed) == []


async def test_the_same_config_yields_agentscopes_stock_mem0_middleware(service, tmp_path, http):
    from agentscope.middleware import Mem0Middleware

    cfg = client_config(service.url, key_file(tmp_path, service.api_key), mode="static_control")
    factory = MemoryMiddlewareFactory(cfg, flavor="mem0")
    try:
        (middleware,) = await factory("alice", "assistant", "s1")
        assert isinstance(middleware, Mem0Middleware)
        await chat(factory, PREFERENCE, [ACK])
        _, model, _ = await chat(factory, REQUEST, ["Done."], session="s2")
        (call,) = model.calls
        assert any(PREFERENCE in text for text in call.texts("user")), "stock recall works"
        assert PREFERENCE in stored(http, user_id="alice")
    finally:
        await factory.aclose()


async def test_add_memory_keeps_extracted_facts_and_falls_back_to_raw_when_none(
    tmp_path, monkeypatch
):
    """With an extraction model (a scripted OpenAI-compatible stand-in) behind the service."""
    from memorystore.config import SecretSource, ServiceLLM
    from memorystore.service.ops.runner import ServiceThread, UvicornThread, embedded_config
    from support.scripted_models import build_app

    monkeypatch.setenv("SCRIPTED_KEY", "sk-scripted")
    with UvicornThread(build_app([])) as models:
        llm = ServiceLLM(
            provider="openai",
            model="scripted-1",
            base_url=f"{models.url}/v1",
            api_key=SecretSource(env="SCRIPTED_KEY"),
        )
        with ServiceThread(embedded_config(tmp_path / "data", llm=llm)) as svc:
            async with factories(svc.url, key_file(tmp_path, svc.api_key)) as make:
                factory = make(mode="agent_control", writePermission="allow")
                facts = ToolCall(
                    "add_memory",
                    {"thinking": "where they live", "content": ["I moved to Hangzhou."]},
                )
                nothing = ToolCall(
                    "add_memory",
                    {"thinking": "an odd request", "content": ["Ask me about the weather."]},
                )
                _, model, _ = await chat(factory, "Remember these.", [facts, nothing, "Saved."])
                first, second = (
                    m["content"] for m in model.calls[-1].messages if m["role"] == "tool"
                )
                assert "Lives in Hangzhou" in first and "Is based in China" in first
                assert "Ask me about the weather." in second, "nothing extracted: stored raw"
                with httpx.Client(
                    base_url=svc.url, headers={"Authorization": f"Token {svc.api_key}"}
                ) as client:
                    assert stored(client, user_id="alice") == [
                        "Ask me about the weather.",
                        "Is based in China",
                        "Lives in Hangzhou",
                    ]


async def test_compression_never_folds_the_hint_into_the_summary(make_factory):
    """The compress hook takes the hint out while the agent compresses, then puts it back."""
    from memorystore.middleware.memory import Turn

    factory = make_factory(mode="static_control")
    agent, _ = await agent_for(factory, [])
    (middleware,) = agent._compress_context_middlewares
    user = UserMsg(name="user", content=REQUEST)
    agent.state.context.append(user)
    hint = middleware._inject(agent, Turn(REQUEST, user.id), "- Prefers dark mode.")
    assert agent.state.context == [user, hint]

    seen: list[list[Any]] = []

    async def compress(**_: Any) -> None:
        seen.append(list(agent.state.context))

    await agent.compress_context()  # the real chain (nothing to compress yet) keeps it in place
    assert agent.state.context == [user, hint]
    await middleware.on_compress_context(agent, {}, compress)
    assert seen == [[user]], "the summariser never sees the hint"
    assert agent.state.context == [user, hint], "and it is back for this turn's model call"

    async def summarise_everything(**_: Any) -> None:
        agent.state.context.clear()

    await middleware.on_compress_context(agent, {}, summarise_everything)
    assert agent.state.context == [], "the turn's message was summarised: the hint goes too"
