"""Helpers for the agent-side tests: a client config for the running service, one agent turn.

Each turn is what the app does per run: ask the factory for middleware bound to the user,
build a brand-new `Agent` (optionally from a saved state) with the middleware's tools, reply.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from agentscope.agent import Agent, ReActConfig
from agentscope.message import Msg, UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit

from memorystore.config import ClientConfig
from memorystore.middleware import MemoryMiddlewareFactory
from support.scripted_agent_model import ModelCall, ScriptedAgentModel, Turn

HINT_HEADER = "## Memories about the user from earlier conversations"


# The agent side's time limit per call in tests that are not about time limits: the default
# (2 s) fails open, and a CI machine with a load of 8 on 2 cores once took longer than that
# for one recall, so the turn went on without memory and the test read that as a wrong answer.
SLOW_MACHINE_TIMEOUT_S = 30


def client_fields(endpoint: str, key_file: Path, **fields: Any) -> dict[str, Any]:
    """A client config's fields as the operator renders them (camelCase), for `endpoint`.

    Capture is per turn unless `captureMode` is given: most agent-side tests check what one
    turn writes; the session-capture tests ask for `captureMode="session"`. Calls may take
    SLOW_MACHINE_TIMEOUT_S unless `timeoutSeconds` is given (the fault tests give it)."""
    base = {"endpoint": endpoint, "tenant": "acme", "apiKey": {"file": str(key_file)}}
    return {**base, "captureMode": "turn", "timeoutSeconds": SLOW_MACHINE_TIMEOUT_S, **fields}


def client_config(endpoint: str, key_file: Path, **fields: Any) -> ClientConfig:
    """`client_fields` as the model the factory takes."""
    return ClientConfig.model_validate(client_fields(endpoint, key_file, **fields))


@asynccontextmanager
async def factories(
    endpoint: str, key: Path
) -> AsyncIterator[Callable[..., MemoryMiddlewareFactory]]:
    """`make(**config fields)` builds factories for `endpoint`; all are closed at the end."""
    made: list[MemoryMiddlewareFactory] = []

    def make(**fields: Any) -> MemoryMiddlewareFactory:
        made.append(MemoryMiddlewareFactory(client_config(endpoint, key, **fields)))
        return made[-1]

    try:
        yield make
    finally:
        for factory in made:
            await factory.aclose()


def key_file(tmp_path: Path, api_key: str) -> Path:
    path = tmp_path / "api-key"
    path.write_text(api_key)
    path.chmod(0o600)
    return path


async def agent_for(
    factory: MemoryMiddlewareFactory,
    turns: Sequence[Turn],
    *,
    user: str = "alice",
    agent_id: str = "assistant",
    session: str = "s1",
    state: AgentState | None = None,
    max_iters: int | None = None,
    model: ScriptedAgentModel | None = None,
) -> tuple[Agent, ScriptedAgentModel]:
    middlewares = await factory(user, agent_id, session)
    model = model or ScriptedAgentModel(turns)
    tools = [tool for mw in middlewares for tool in await mw.list_tools()]
    react = ReActConfig(max_iters=max_iters) if max_iters else None
    agent = Agent(
        name="assistant",
        system_prompt="You are a charting assistant.",
        model=model,
        toolkit=Toolkit(tools=tools),
        middlewares=middlewares,
        state=state,
        react_config=react,
    )
    return agent, model


async def chat(
    factory: MemoryMiddlewareFactory, text: str, turns: Sequence[Turn], **kwargs: Any
) -> tuple[Msg, ScriptedAgentModel, Agent]:
    """One run: fresh middleware and a fresh agent answer `text`; write-backs are drained."""
    agent, model = await agent_for(factory, turns, **kwargs)
    reply = await agent.reply(UserMsg(name="user", content=text))
    await factory.drain()
    return reply, model, agent


def hints(call: ModelCall) -> list[str]:
    """The memory hints the model was sent on this call."""
    return [text for text in call.texts("user") if text.startswith(HINT_HEADER)]


def stored(http: httpx.Client, **ids: str) -> list[str]:
    """The memory texts the service holds for these entity ids, sorted."""
    response = http.post("/v3/memories/", params={"page_size": 100}, json={"filters": ids})
    response.raise_for_status()
    return sorted(m["memory"] for m in response.json()["results"])


def memory_messages(agent: Agent) -> list[Msg]:
    """Any memory hint left in the agent's state (there must never be one after a reply)."""
    return [m for m in agent.state.context if m.name == "memory"]
