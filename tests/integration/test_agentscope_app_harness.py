"""The `support.agentscope_app` harness drives the REAL `agentscope.app.create_app`.

Each test starts the app in-process (SQLite, in-memory bus, local workspaces), talks to it over
its HTTP routes as a client would, and checks an effect only a real app run can produce: the
middleware factory's arguments, what the scripted model was sent, what was persisted, whether a
tool ran.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import pytest
from agentscope.event import ReplyEndEvent, ToolResultEndEvent
from agentscope.message import TextBlock, ToolResultState
from agentscope.middleware import MiddlewareBase
from agentscope.permission import PermissionBehavior, PermissionContext, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk

from support.agentscope_app import AppRunError, ChatSession, running_app
from support.scripted_agent_model import ToolCall

pytestmark = pytest.mark.timeout(120)

Ids = tuple[str, str, str]


class RecordingMiddleware(MiddlewareBase):
    """Passes every reply event through, noting the ones it saw; optionally offers tools."""

    def __init__(self, built_for: Ids, tools: list[ToolBase]) -> None:
        self.built_for = built_for
        self.tools = tools
        self.seen: list[str] = []

    async def on_reply(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]
    ) -> AsyncGenerator:
        async for event in next_handler(**input_kwargs):
            self.seen.append(type(event).__name__)
            yield event

    async def list_tools(self) -> list[ToolBase]:
        return self.tools


class Recorder:
    """A middleware factory for create_app that keeps every middleware it built."""

    def __init__(self, tools: Callable[[], list[ToolBase]] = list) -> None:
        self.tools = tools
        self.built: list[RecordingMiddleware] = []

    async def __call__(self, user_id: str, agent_id: str, session_id: str) -> list[MiddlewareBase]:
        middleware = RecordingMiddleware((user_id, agent_id, session_id), self.tools())
        self.built.append(middleware)
        return [middleware]

    @property
    def built_for(self) -> list[Ids]:
        return [m.built_for for m in self.built]


def ids(session: ChatSession) -> Ids:
    return (session.user_id, session.agent_id, session.session_id)


class GuardedNote(ToolBase):
    """A tool whose every call needs the user's confirmation (`check_permissions` says ASK)."""

    name = "save_note"
    description = "Save a note for the user."
    input_schema = {  # noqa: RUF012 - ToolBase declares it as a plain class attribute
        "type": "object",
        "properties": {"note": {"type": "string"}},
        "required": ["note"],
    }
    is_read_only = False
    is_concurrency_safe = False

    def __init__(self, saved: list[str]) -> None:
        super().__init__()
        self.saved = saved

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        return PermissionDecision(behavior=PermissionBehavior.ASK, message="Save this note?")

    async def call(self, note: str) -> ToolChunk:
        self.saved.append(note)
        return ToolChunk(content=[TextBlock(text=f"saved: {note}")], state=ToolResultState.SUCCESS)


def tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "tool"]


async def test_factory_runs_once_per_run_for_the_x_user_id_user(tmp_path: Path):
    factory = Recorder()
    async with running_app(tmp_path, extra_agent_middlewares=factory) as app:
        alice = await app.create_session("alice")
        assert factory.built == [], "creating agents and sessions runs no agent"

        turn = await app.chat(alice, "Hello there.", script=["Hi Alice!"])

        assert turn.text == "Hi Alice!"
        assert turn.status == "idle"
        assert turn.end is not None and turn.end.finished_reason == "completed"
        assert factory.built_for == [ids(alice)]
        # The middleware sat in the reply chain: it saw the reply end on its way out.
        (middleware,) = factory.built
        assert middleware.seen[0] == "ReplyStartEvent" and "ReplyEndEvent" in middleware.seen
        (call,) = turn.model.calls
        assert "Hello there." in call.texts("user")

        # Another user, another session: the factory gets bob, from his X-User-ID header.
        bob = await app.create_session("bob")
        bob_turn = await app.chat(bob, "Hi, I'm Bob.", script=["Hello Bob."])
        assert bob_turn.text == "Hello Bob."
        assert factory.built_for == [ids(alice), ids(bob)]
        assert bob.user_id == "bob" and bob.session_id != alice.session_id
        (bob_call,) = bob_turn.model.calls
        assert not any("Hello there." in text for text in bob_call.texts()), "alice's turn leaked"

        # Sessions are owner-scoped: bob cannot even see alice's.
        with pytest.raises(AppRunError, match="404"):
            await app.request(
                "bob",
                "GET",
                f"/sessions/{alice.session_id}/status",
                params={"agent_id": alice.agent_id},
            )


async def test_second_turn_sees_the_first_through_persisted_state(tmp_path: Path):
    factory = Recorder()
    async with running_app(tmp_path, extra_agent_middlewares=factory) as app:
        session = await app.create_session("alice")
        await app.chat(session, "My name is Ada.", script=["Nice to meet you, Ada."])
        second = await app.chat(session, "What is my name?", script=["Your name is Ada."])

        (call,) = second.model.calls
        assert call.texts("user")[0] == "My name is Ada."
        assert call.texts("user")[-1] == "What is my name?"
        assert "Nice to meet you, Ada." in call.texts("assistant")
        assert second.text == "Your name is Ada."
        assert factory.built_for == [ids(session), ids(session)]

        # The persisted state holds both exchanges, read back from storage.
        state = await app.agent_state(session)
        texts = [m.get_text_content() for m in state.context]
        assert texts == [
            "My name is Ada.",
            "Nice to meet you, Ada.",
            "What is my name?",
            "Your name is Ada.",
        ]

    # Restart the app on the same SQLite file: the session carries on where it was.
    async with running_app(tmp_path, extra_agent_middlewares=factory) as restarted:
        third = await restarted.chat(session, "And again?", script=["Still Ada."])
        (call,) = third.model.calls
        assert call.texts("user")[0] == "My name is Ada."
        assert "Your name is Ada." in call.texts("assistant")
        assert third.text == "Still Ada."
        assert len((await restarted.agent_state(session)).context) == 6


async def test_ask_tool_parks_the_run_until_confirmed_then_runs(tmp_path: Path):
    saved: list[str] = []
    factory = Recorder(tools=lambda: [GuardedNote(saved)])
    save = ToolCall("save_note", {"note": "buy milk"})

    def answer(messages: list[dict[str, Any]]) -> str:
        (result,) = tool_messages(messages)
        return f"Done ({result['content']})."

    async with running_app(tmp_path, extra_agent_middlewares=factory) as app:
        session = await app.create_session("alice")
        parked = await app.chat(session, "Remember to buy milk.", script=[save, answer])

        # Parked: the model asked for the tool, the app asks the user, the tool has not run.
        assert parked.status == "awaiting_permission"
        assert parked.end is None
        ask = parked.pending_confirmation
        assert ask is not None
        assert [(c.id, c.name) for c in ask.tool_calls] == [(save.id, "save_note")]
        assert saved == []
        assert len(parked.model.calls) == 1
        assert "save_note" in parked.model.calls[0].tool_names, "the middleware's tool is offered"
        state = await app.agent_state(session)
        assert [c.id for c in state.get_awaiting_tool_calls("assistant")] == [save.id]

        done = await app.confirm(parked)

        assert saved == ["buy milk"]
        assert done.text == "Done (saved: buy milk)."
        assert done.status == "idle"
        assert done.end is not None and done.end.reply_id == ask.reply_id, "same reply resumed"
        (result,) = done.of_type(ToolResultEndEvent)
        assert result.tool_call_id == save.id and result.state == ToolResultState.SUCCESS
        assert done.model.remaining_turns == 0
        # The resume is a run of its own: the factory built a middleware for it too.
        assert factory.built_for == [ids(session), ids(session)]
        first, resumed = factory.built
        # The parked reply never ended inside the agent; the resumed one never started there:
        # the ReplyStartEvent the client sees on resume is the app's synthetic continuation.
        assert "RequireUserConfirmEvent" in first.seen and "ReplyEndEvent" not in first.seen
        assert "ReplyStartEvent" not in resumed.seen and "ReplyEndEvent" in resumed.seen
        assert [type(e).__name__ for e in done.events[:2]] == [
            "UserConfirmResultEvent",
            "ReplyStartEvent",
        ]
        assert not (await app.agent_state(session)).has_awaiting_tool_calls("assistant")


async def test_rejected_ask_tool_never_runs(tmp_path: Path):
    saved: list[str] = []
    factory = Recorder(tools=lambda: [GuardedNote(saved)])
    save = ToolCall("save_note", {"note": "sell the car"})
    seen_results: list[str] = []

    def answer(messages: list[dict[str, Any]]) -> str:
        (result,) = tool_messages(messages)
        seen_results.append(result["content"])
        return "Okay, I won't."

    async with running_app(tmp_path, extra_agent_middlewares=factory) as app:
        session = await app.create_session("alice")
        parked = await app.chat(session, "Note: sell the car.", script=[save, answer])
        assert parked.status == "awaiting_permission"

        done = await app.confirm(parked, confirmed=False)

        assert saved == []
        assert done.text == "Okay, I won't."
        assert done.status == "idle"
        assert [e.finished_reason for e in done.of_type(ReplyEndEvent)] == ["completed"]
        (result,) = done.of_type(ToolResultEndEvent)
        assert result.tool_call_id == save.id and result.state == ToolResultState.DENIED
        (denial,) = seen_results
        assert "denied by user" in denial
