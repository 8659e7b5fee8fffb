"""The REAL `agentscope.app.create_app`, in-process, on its lightest backends, for tests.

`running_app(tmp_path, extra_agent_middlewares=...)` starts the app (lifespan included) on
SQLite (`sqlite+aiosqlite`), an `InMemoryMessageBus` and a `LocalWorkspaceManager`, with no
scheduler, channel worker or index worker. Requests go through the app's own HTTP routes over
`httpx.ASGITransport`, as a client would, with the user in the `X-User-ID` header.

Only the chat model is a stand-in: sessions point at a credential of a test-only type
(`ScriptedCredential`) whose "model class" hands back the harness's current
`ScriptedAgentModel`, so a test scripts each turn (`script()` or `chat(script=...)`) and reads
what the model was sent from `.calls`.

A chat run is fire-and-forget in the app (`POST /chat/` returns at once; events go to the
session's message-bus channel that `GET /sessions/{id}/stream` relays as SSE). `chat()` and
`confirm()` subscribe to that same channel before posting, so no event is missed, wait for the
reply to end or park, then wait for the session lock to be released (the run has persisted).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import httpx
from agentscope.app import create_app
from agentscope.app.message_bus import InMemoryMessageBus, MessageBusKeys
from agentscope.app.storage import AsyncSQLAlchemyStorage
from agentscope.app.workspace_manager import LocalWorkspaceManager
from agentscope.credential import CredentialBase
from agentscope.event import (
    AgentEvent,
    ConfirmResult,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from agentscope.message import Msg, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatModelBase
from agentscope.state import AgentState
from fastapi import FastAPI
from pydantic import TypeAdapter

from support.scripted_agent_model import ScriptedAgentModel, Turn

MiddlewareFactory = Callable[..., Awaitable[list[MiddlewareBase]]]
"""`(user_id, agent_id, session_id[, workspace]) -> list[MiddlewareBase]`, as create_app takes."""

SCRIPTED_CREDENTIAL_TYPE = "memorystore_test_scripted"
_EVENTS: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
# Events after which a run has nothing more to say: the reply ended, or it parked on the user.
_TERMINAL = (ReplyEndEvent, RequireUserConfirmEvent, RequireExternalExecutionEvent)


class _ScriptedModelSource:
    """Stands where the app expects a chat model class: "constructing" it returns the current
    `ScriptedAgentModel` of the harness named by the credential's `harness_id`."""

    Parameters = ChatModelBase.Parameters

    def __new__(cls, credential: ScriptedCredential, **_: Any) -> ChatModelBase:
        harness = AgentScopeApp.running.get(credential.harness_id)
        if harness is None:
            raise RuntimeError(f"no running test harness {credential.harness_id!r}")
        return harness.model

    @classmethod
    def list_models(cls) -> list[Any]:
        return []  # no model card: the app keeps the model's own defaults


class ScriptedCredential(CredentialBase):
    """A test-only credential type; the app resolves it to the harness's scripted model."""

    type: Literal["memorystore_test_scripted"] = SCRIPTED_CREDENTIAL_TYPE
    harness_id: str = ""
    """The harness whose model to use: its data directory, so a restarted app finds it."""

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return cast(type[ChatModelBase], _ScriptedModelSource)


@dataclass(frozen=True)
class ChatSession:
    """One app session: who talks (`X-User-ID`), to which agent, in which session."""

    user_id: str
    agent_id: str
    session_id: str


@dataclass
class TurnResult:
    """What one chat run produced, read back as a client would see it."""

    session: ChatSession
    events: list[AgentEvent]
    """Every event the run published on the session's channel (what the SSE stream relays)."""
    reply: Msg | None
    """The reply message as persisted (`GET /sessions/{id}/messages`), after the run ended."""
    status: str
    """The session's status once the run released it: `idle`, `awaiting_permission`, ..."""
    model: ScriptedAgentModel
    """The scripted model that was current during the run (inspect `.calls`)."""

    @property
    def text(self) -> str:
        """The reply's text as persisted (all its text blocks, joined)."""
        return (self.reply.get_text_content() or "") if self.reply is not None else ""

    @property
    def end(self) -> ReplyEndEvent | None:
        """The run's `ReplyEndEvent`; `None` when the reply parked on the user."""
        ends = [e for e in self.events if isinstance(e, ReplyEndEvent)]
        return ends[-1] if ends else None

    @property
    def pending_confirmation(self) -> RequireUserConfirmEvent | None:
        """The tool calls the run parked on for user confirmation, if it parked."""
        asks = [e for e in self.events if isinstance(e, RequireUserConfirmEvent)]
        return asks[-1] if asks else None

    def of_type(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


class AppRunError(AssertionError):
    """A chat run ended in error (or never ended) where the test expected it to work."""


@dataclass
class AgentScopeApp:
    """A started create_app plus the helpers a test needs; build it with `running_app`."""

    running: ClassVar[dict[str, AgentScopeApp]] = {}

    app: FastAPI
    http: httpx.AsyncClient
    storage: AsyncSQLAlchemyStorage
    bus: InMemoryMessageBus
    harness_id: str
    model: ScriptedAgentModel = field(default_factory=lambda: ScriptedAgentModel([]))
    """The model every run resolves to until `script()` replaces it."""
    _credentials: dict[str, str] = field(default_factory=dict)

    def script(self, turns: Sequence[Turn]) -> ScriptedAgentModel:
        """Make a fresh `ScriptedAgentModel(turns)` the model for the following runs."""
        self.model = ScriptedAgentModel(turns)
        return self.model

    async def request(self, user_id: str, method: str, url: str, **kwargs: Any) -> Any:
        """One HTTP call as `user_id`; fails the test on a non-2xx answer; returns the JSON."""
        response = await self.http.request(method, url, headers={"X-User-ID": user_id}, **kwargs)
        if response.is_error:
            raise AppRunError(f"{method} {url} -> {response.status_code}: {response.text}")
        return response.json() if response.content else None

    async def create_agent(
        self, user_id: str, *, name: str = "assistant", system_prompt: str = "You help."
    ) -> str:
        """`POST /agent/`: a new agent owned by `user_id`; returns its id."""
        body = {"name": name, "system_prompt": system_prompt}
        return (await self.request(user_id, "POST", "/agent/", json=body))["agent_id"]

    async def create_session(self, user_id: str, agent_id: str | None = None) -> ChatSession:
        """`POST /sessions/` on the scripted model (and a new agent unless `agent_id` is given).

        The session is named, so the app does not spend a model call auto-naming it.
        """
        agent_id = agent_id or await self.create_agent(user_id)
        body = {
            "agent_id": agent_id,
            "name": "test session",
            "chat_model_config": {
                "type": SCRIPTED_CREDENTIAL_TYPE,
                "credential_id": await self._credential(user_id),
                "model": "scripted",
                "parameters": {},
            },
        }
        created = await self.request(user_id, "POST", "/sessions/", json=body)
        return ChatSession(user_id, agent_id, created["session_id"])

    async def chat(
        self,
        session: ChatSession,
        text: str,
        *,
        script: Sequence[Turn] | None = None,
        check: bool = True,
        timeout: float = 30,
    ) -> TurnResult:
        """`POST /chat/` one user message and wait for the run to finish (or park)."""
        if script is not None:
            self.script(script)
        message = UserMsg(name=session.user_id, content=text).model_dump(mode="json")
        return await self._run(session, message, check=check, timeout=timeout)

    async def confirm(
        self, turn: TurnResult, *, confirmed: bool = True, check: bool = True, timeout: float = 30
    ) -> TurnResult:
        """Answer the confirmation `turn` parked on (all its tool calls) and wait for the resume.

        The answer is a `UserConfirmResultEvent` posted to `POST /chat/`, which the app queues
        for its wake-up dispatcher; the resumed run continues the same reply.
        """
        ask = turn.pending_confirmation
        if ask is None:
            raise AppRunError("the turn did not park on a user confirmation")
        answer = UserConfirmResultEvent(
            reply_id=ask.reply_id,
            confirm_results=[
                ConfirmResult(confirmed=confirmed, tool_call=call) for call in ask.tool_calls
            ],
        )
        return await self._run(
            turn.session, answer.model_dump(mode="json"), check=check, timeout=timeout
        )

    async def messages(self, session: ChatSession) -> list[Msg]:
        """`GET /sessions/{id}/messages`: the session's persisted messages, oldest first."""
        body = await self.request(
            session.user_id,
            "GET",
            f"/sessions/{session.session_id}/messages",
            params={"agent_id": session.agent_id, "limit": 200},
        )
        return [Msg.model_validate(m) for m in body["messages"]]

    async def status(self, session: ChatSession) -> str:
        """`GET /sessions/{id}/status`: running / idle / awaiting_permission / ..."""
        body = await self.request(
            session.user_id,
            "GET",
            f"/sessions/{session.session_id}/status",
            params={"agent_id": session.agent_id},
        )
        return body["status"]

    async def agent_state(self, session: ChatSession) -> AgentState:
        """The agent state the app persisted for the session (context, middle_context, ...).

        Read from storage: the API only ever returns it with `context` stripped.
        """
        record = await self.storage.get_session(
            session.user_id, session.agent_id, session.session_id
        )
        if record is None:
            raise AppRunError(f"no session {session.session_id!r} in storage")
        return record.state

    async def _credential(self, user_id: str) -> str:
        # Credentials are owner-scoped: one per user, pointing at this harness's model.
        if user_id not in self._credentials:
            data = {"type": SCRIPTED_CREDENTIAL_TYPE, "harness_id": self.harness_id}
            created = await self.request(user_id, "POST", "/credential/", json={"data": data})
            self._credentials[user_id] = created["credential_id"]
        return self._credentials[user_id]

    async def _run(
        self, session: ChatSession, chat_input: Any, *, check: bool, timeout: float
    ) -> TurnResult:
        model = self.model
        async with self._subscription(session.session_id) as (events, done):
            body = {
                "agent_id": session.agent_id,
                "session_id": session.session_id,
                "input": chat_input,
            }
            await self.request(session.user_id, "POST", "/chat/", json=body)
            try:
                await asyncio.wait_for(done.wait(), timeout)
                # The terminal event is published under the session lock; the run persists
                # the reply and state before releasing it.
                status = await asyncio.wait_for(self._settled(session), timeout)
            except TimeoutError:
                raise AppRunError(
                    f"the run did not finish in {timeout} s; events: {events!r}"
                ) from None
        reply_ids = {e.reply_id for e in events if hasattr(e, "reply_id")}
        replies = [m for m in await self.messages(session) if m.id in reply_ids]
        result = TurnResult(session, list(events), replies[-1] if replies else None, status, model)
        if check and result.end is not None and result.end.finished_reason != "completed":
            raise AppRunError(f"the run ended {result.end.finished_reason}: {result.end.error}")
        return result

    async def _settled(self, session: ChatSession) -> str:
        while (status := await self.status(session)) == "running":
            await asyncio.sleep(0.02)
        return status

    @contextlib.asynccontextmanager
    async def _subscription(
        self, session_id: str
    ) -> AsyncIterator[tuple[list[AgentEvent], asyncio.Event]]:
        """Collect the session's events from the bus (the SSE stream's source) until closed."""
        events: list[AgentEvent] = []
        ready, done = asyncio.Event(), asyncio.Event()

        async def collect() -> None:
            key = MessageBusKeys.session_events(session_id)
            async for payload in self.bus.subscribe(key, on_ready=ready.set):
                payload.pop("_entry_id", None)
                event = _EVENTS.validate_python(payload)
                events.append(event)
                if isinstance(event, _TERMINAL):
                    done.set()

        task = asyncio.create_task(collect())
        try:
            await asyncio.wait_for(ready.wait(), 5)
            yield events, done
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.asynccontextmanager
async def running_app(
    tmp_path: Path,
    *,
    extra_agent_middlewares: MiddlewareFactory | None = None,
    configure: Callable[[FastAPI], None] | None = None,
    **create_app_kwargs: Any,
) -> AsyncIterator[AgentScopeApp]:
    """Start create_app (lifespan included) with its data under `tmp_path`; stop it on exit.

    A second `running_app` on the same `tmp_path` after the first has stopped is the same
    deployment restarted: same SQLite file, same workspaces, and its sessions still resolve
    to the (new) harness's scripted model. `configure(app)` runs before the app starts (e.g.
    to add an ASGI middleware, as a deployment would).
    """
    harness_id = str(tmp_path.resolve())
    if harness_id in AgentScopeApp.running:
        raise RuntimeError(f"an app is already running on {tmp_path}")
    storage = AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{tmp_path / 'agentscope.db'}")
    bus = InMemoryMessageBus()
    app = create_app(
        storage=storage,
        message_bus=bus,
        workspace_manager=LocalWorkspaceManager(basedir=str(tmp_path / "workspaces")),
        enable_index_worker=False,
        enable_scheduler=False,
        enable_channel_worker=False,
        extra_credentials=[ScriptedCredential],
        extra_agent_middlewares=extra_agent_middlewares,
        **create_app_kwargs,
    )
    if configure is not None:
        configure(app)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://agentscope.test") as http,
    ):
        harness = AgentScopeApp(app, http, storage, bus, harness_id)
        AgentScopeApp.running[harness_id] = harness
        try:
            yield harness
        finally:
            del AgentScopeApp.running[harness_id]
