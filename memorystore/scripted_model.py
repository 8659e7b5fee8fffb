"""A STAND-IN chat model for AgentScope 2.0 agents, for the model providers we cannot reach here.

`ScriptedAgentModel` is a real `agentscope.model.ChatModelBase` subclass, so the `Agent`, its
middlewares, its toolkit and the provider formatter all run for real; only the provider call
is replaced by a script. Each call takes the next turn of the script:

- a `str`: the model replies with that text (which ends the agent's reply);
- a `ToolCall(name, input)`: the model calls that tool (the agent runs it and calls the
  model again with the tool result);
- a callable: it receives the formatted messages of this call and returns one of the above,
  for replies that depend on what the model was sent.

Messages are formatted by a real AgentScope formatter (OpenAI chat by default), so what is
recorded in `calls` is what a provider would have received: e.g. a middleware's `HintBlock`
shows up as a `user` message and a tool result as a `tool` message.

Used by the tests and by `memorystore demo` when no provider key is set; it is never a
substitute for a real model in production.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agentscope.credential import CredentialBase
from agentscope.formatter import FormatterBase, OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.tool import ToolChoice


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class ToolCall:
    """A scripted turn in which the model calls the tool `name` with `input`."""

    name: str
    input: dict[str, Any]
    # Fixed per turn so a test can match the tool result to its call.
    id: str = field(default_factory=_new_call_id)


Reply: TypeAlias = str | ToolCall
"""What the model answers on one call: a text reply or a tool call."""

Turn: TypeAlias = Reply | Callable[[list[dict[str, Any]]], Reply]
"""One step of the script: a reply, or a function of the formatted messages giving one."""


@dataclass
class ModelCall:
    """One call the agent made to the model: what it was sent and what the script answered."""

    messages: list[dict[str, Any]]
    """The formatted messages, as a provider would receive them."""
    tools: list[dict[str, Any]]
    """The tool schemas offered on this call."""
    reply: Reply

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools]

    def texts(self, role: str | None = None) -> list[str]:
        """The text of each message (optionally only those with `role`), for assertions."""
        return [text_of(m) for m in self.messages if role is None or m.get("role") == role]


def text_of(message: dict[str, Any]) -> str:
    """The text of one formatted message (string content or its text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content or []
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text")


class ScriptedAgentModel(ChatModelBase):
    """A chat model that plays back `turns` in order and records every call in `calls`.

    Running out of turns raises `AssertionError`: an agent that calls the model more often
    than the test expects is a failure, not something to paper over with a default reply.
    """

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        formatter: FormatterBase | None = None,
        model: str = "scripted",
    ) -> None:
        # No retries: a script error must surface at once, not be retried.
        super().__init__(
            credential=CredentialBase(),
            model=model,
            parameters=ChatModelBase.Parameters(),
            stream=True,
            max_retries=0,
        )
        # The agent reads `model.formatter` (supported input media), and `_call_api` uses it.
        self.formatter = formatter or OpenAIChatFormatter()
        self._turns: list[Turn] = list(turns)
        self.calls: list[ModelCall] = []

    @property
    def remaining_turns(self) -> int:
        return len(self._turns)

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[ChatResponse, None]:
        formatted = await self.formatter.format(messages)
        if not self._turns:
            raise AssertionError(
                f"ScriptedAgentModel ran out of turns after {len(self.calls)} call(s)"
            )
        turn = self._turns.pop(0)
        reply = turn(deepcopy(formatted)) if callable(turn) else turn
        self.calls.append(ModelCall(deepcopy(formatted), deepcopy(list(tools or [])), reply))
        return _stream(reply)


async def _stream(reply: Reply) -> AsyncGenerator[ChatResponse, None]:
    """Stream like a provider: deltas (`is_last=False`), then one `is_last=True` with it all."""
    block_id = _new_call_id()
    if isinstance(reply, ToolCall):
        arguments = json.dumps(reply.input)
        yield ChatResponse(
            content=[ToolCallBlock(id=reply.id, name=reply.name, input=arguments)], is_last=False
        )
        yield ChatResponse(
            content=[ToolCallBlock(id=reply.id, name=reply.name, input=arguments)], is_last=True
        )
        return
    half = len(reply) // 2
    for piece in (reply[:half], reply[half:]):
        if piece:
            yield ChatResponse(content=[TextBlock(id=block_id, text=piece)], is_last=False)
    yield ChatResponse(content=[TextBlock(id=block_id, text=reply)], is_last=True)
