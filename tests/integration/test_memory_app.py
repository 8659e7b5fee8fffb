"""The memory factory plugged into the REAL `create_app(extra_agent_middlewares=…)`.

The app runs in-process on SQLite / in-memory bus / local workspaces (support.agentscope_app)
and the memory service is real; only the chat model is a scripted stand-in. What a user of
the app would notice is checked: memory crosses sessions, the app's persisted state and
messages never hold a memory hint, a confirmed (parked) reply is written back with its
original question, and an unreachable memory service does not fail the chat.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from memorystore.middleware import MemoryMiddlewareFactory, SessionEndMiddleware
from support.agent_memory import HINT_HEADER, client_config, hints, key_file, stored
from support.agentscope_app import running_app
from support.scripted_agent_model import ToolCall

PREFERENCE = "Please make my charts in dark mode by default. I live in Hangzhou."
REQUEST = "Draw me a bar chart of monthly sales."

pytestmark = pytest.mark.timeout(180)


def factory_for(service, tmp_path: Path, **fields: Any) -> MemoryMiddlewareFactory:
    return MemoryMiddlewareFactory(
        client_config(service.url, key_file(tmp_path, service.api_key), **fields)
    )


async def test_memory_crosses_sessions_and_never_lands_in_persisted_state(
    service, http, tmp_path: Path
):
    factory = factory_for(service, tmp_path, mode="both")
    try:
        async with running_app(_app_dir(tmp_path), extra_agent_middlewares=factory) as app:
            first = await app.create_session("alice")
            await app.chat(first, PREFERENCE, script=["Noted: dark mode, Hangzhou."])
            await factory.drain()
            assert PREFERENCE in stored(http, user_id="alice")

            second = await app.create_session("alice", agent_id=first.agent_id)
            turn = await app.chat(second, REQUEST, script=["Here is your dark-mode chart."])
            (call,) = turn.model.calls
            (hint,) = hints(call)
            assert "dark mode" in hint and "Hangzhou" in hint
            assert {"search_memory", "add_memory"} <= set(call.tool_names), "tools via the app"

            for session in (first, second):
                state = await app.agent_state(session)
                assert HINT_HEADER not in state.model_dump_json()
                assert not any(
                    HINT_HEADER in (m.get_text_content() or "") for m in await app.messages(session)
                )
                assert "memorystore" not in state.middle_context

            # another user of the same app and tenant gets none of it
            bob = await app.create_session("bob")
            bob_turn = await app.chat(bob, REQUEST, script=["Here you go."])
            (bob_call,) = bob_turn.model.calls
            assert hints(bob_call) == []
            assert not any("dark mode" in text for text in bob_call.texts())
    finally:
        await factory.aclose()


@pytest.mark.parametrize(
    ("mode", "injects", "offers_tools", "writes_back"),
    [
        ("static_control", True, False, True),
        ("agent_control", False, True, False),
        ("both", True, True, True),
    ],
)
async def test_each_mode_through_the_app(
    service, http, tmp_path: Path, mode, injects, offers_tools, writes_back
):
    factory = factory_for(service, tmp_path, mode=mode)
    http.post(
        "/v3/memories/add/",
        json={"messages": [{"role": "user", "content": PREFERENCE}], "user_id": "alice"},
    ).raise_for_status()
    try:
        async with running_app(_app_dir(tmp_path), extra_agent_middlewares=factory) as app:
            session = await app.create_session("alice")
            turn = await app.chat(session, REQUEST, script=["Here is your chart."])
            await factory.drain()
            (call,) = turn.model.calls
            assert bool(hints(call)) is injects
            assert ("search_memory" in call.tool_names) is offers_tools
            assert (REQUEST in stored(http, user_id="alice")) is writes_back
    finally:
        await factory.aclose()


async def test_a_confirmed_add_memory_resumes_and_writes_the_original_question(
    service, http, tmp_path: Path
):
    factory = factory_for(service, tmp_path, mode="both", writePermission="ask")
    save = ToolCall("add_memory", {"thinking": "lasting preference", "content": [PREFERENCE]})
    try:
        async with running_app(_app_dir(tmp_path), extra_agent_middlewares=factory) as app:
            session = await app.create_session("alice")
            parked = await app.chat(session, PREFERENCE, script=[save, "Saved your preference."])
            await factory.drain()
            assert parked.status == "awaiting_permission"
            assert stored(http, user_id="alice") == [], "nothing written while parked"
            state = await app.agent_state(session)
            assert state.middle_context["memorystore"]["query"] == PREFERENCE

            done = await app.confirm(parked)
            await factory.drain()
            assert done.text == "Saved your preference."
            # add_memory stored the fact; the write-back the question (already known) + answer
            assert stored(http, user_id="alice") == sorted([PREFERENCE, "Saved your preference."])
            assert "memorystore" not in (await app.agent_state(session)).middle_context
    finally:
        await factory.aclose()


async def test_an_unreachable_memory_service_does_not_fail_the_chat(tmp_path: Path):
    key = key_file(tmp_path, "any-key")
    # nothing listens on port 9 (discard) on loopback: connection refused
    factory = MemoryMiddlewareFactory(client_config("http://127.0.0.1:9", key, timeoutSeconds=1))
    try:
        async with running_app(_app_dir(tmp_path), extra_agent_middlewares=factory) as app:
            session = await app.create_session("alice")
            turn = await app.chat(session, REQUEST, script=["Chart without memory."])
            assert turn.text == "Chart without memory."
            assert turn.end is not None and turn.end.finished_reason == "completed"
            (call,) = turn.model.calls
            assert "search_memory" not in call.tool_names, "memory is off for this run"
    finally:
        await factory.aclose()


async def test_a_deleted_session_is_consolidated_into_memory(service, http, tmp_path: Path):
    """Session capture through the real app: a session's exchanges become memory when
    AgentScope deletes the session (SessionEndMiddleware, the adapter for its route): the
    user's statement once, no assistant reply, no request."""
    factory = factory_for(service, tmp_path, mode="static_control", captureMode="session")

    def configure(app: FastAPI) -> None:
        app.add_middleware(SessionEndMiddleware, factory=factory)

    try:
        async with running_app(
            _app_dir(tmp_path), extra_agent_middlewares=factory, configure=configure
        ) as app:
            first = await app.create_session("alice")
            await app.chat(first, PREFERENCE, script=["Noted: dark mode, Hangzhou."])
            await app.chat(first, REQUEST, script=["Here is your chart."])
            await factory.drain()
            assert stored(http, user_id="alice") == [], "journalled, not memory, until the end"

            await app.request(
                "alice",
                "DELETE",
                f"/sessions/{first.session_id}",
                params={"agent_id": first.agent_id},
            )
            expected = ["I live in Hangzhou.", "Please make my charts in dark mode by default."]
            deadline = asyncio.get_running_loop().time() + 30
            while stored(http, user_id="alice") != expected:
                assert asyncio.get_running_loop().time() < deadline, stored(http, user_id="alice")
                await asyncio.sleep(0.2)

            second = await app.create_session("alice", agent_id=first.agent_id)
            turn = await app.chat(second, REQUEST, script=["Here is your dark-mode chart."])
            (hint,) = hints(turn.model.calls[0])
            assert "dark mode" in hint and "Hangzhou" in hint
            assert "Noted" not in hint and "chart of monthly sales" not in hint
    finally:
        await factory.aclose()


def _app_dir(tmp_path: Path) -> Path:
    path = tmp_path / "app"
    path.mkdir(exist_ok=True)
    return path
