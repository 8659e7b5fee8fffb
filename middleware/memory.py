"""The memory middleware: recall before a turn, a temporary hint, write-back of finished replies.

Improvements over AgentScope's stock `Mem0Middleware` that this file exists for:
- the recalled memories go in as one hint message next to this turn's user message and are
  taken out again (by identity) when the reply ends, so nothing accumulates across turns and
  no stale memory is persisted with the agent's state;
- recall is the service's token-budgeted `/v1/recall/`, started as soon as the turn begins so
  it overlaps the agent's own set-up;
- only a completed reply is written back, after it has been delivered; an interrupted,
  failed, max-iteration or parked (human-in-the-loop) reply is not. A parked turn keeps its
  user input in `state.middle_context`, and the resumed turn writes it with the final answer;
- every write carries an idempotency key derived from tenant, user, agent, session and reply,
  so a retried write never stores the exchange twice;
- service errors and timeouts fail open (warning + metric) unless `failOpen` is off, and a
  shared circuit breaker stops calling a failing service. Cancellation always propagates.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentscope.event import (
    ExternalExecutionResultEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from agentscope.message import AssistantMsg, HintBlock, Msg
from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolBase
from agentscope.types import ReplyFinishedReason

from memorystore.config import CaptureMode, ClientConfig
from memorystore.middleware import metrics
from memorystore.middleware.client import MemoryClient, MemoryServiceError
from memorystore.middleware.tools import AddMemoryTool, SearchMemoryTool
from memorystore.scope import scope_ids
from memorystore.spec import Mode, Scope

if TYPE_CHECKING:
    from agentscope.agent import Agent

log = logging.getLogger("memorystore.middleware")

STATE_KEY = "memorystore"
HINT_NAME = "memory"
HINT_HEADER = (
    "## Memories about the user from earlier conversations\n"
    "Use them only where they help with the current request."
)
TOOL_INSTRUCTIONS = (
    "## Long-term memory\n"
    "`search_memory` looks up what you know about the user from earlier conversations; "
    "`add_memory` saves a durable fact or preference they tell you. Never save secrets."
)


Observer = Callable[[str, dict[str, Any]], None]
"""Told what memory did ("recall": query/context, "capture": messages/results), e.g. for the
demo's narration; it must be cheap and must not raise."""


@dataclass
class Turn:
    """What a write-back needs from the turn that asked: kept in state while a reply is parked."""

    query: str
    user_msg_id: str
    reply_id: str = ""

    def to_state(self) -> dict[str, str]:
        return {"query": self.query, "user_msg_id": self.user_msg_id, "reply_id": self.reply_id}

    @classmethod
    def from_state(cls, data: Any) -> Turn | None:
        if isinstance(data, dict) and isinstance(data.get("query"), str):
            return cls(
                data["query"], str(data.get("user_msg_id") or ""), str(data.get("reply_id") or "")
            )
        return None


class MemoryMiddleware(MiddlewareBase):
    """Bound to one user / agent / session; built per run by the factory, sharing its client."""

    def __init__(
        self,
        client: MemoryClient,
        cfg: ClientConfig,
        *,
        user_id: str,
        agent_id: str,
        session_id: str,
        observer: Observer | None = None,
    ) -> None:
        self.client = client
        self.observer = observer
        self.cfg = cfg
        self.user_id = user_id
        self.agent_id = agent_id
        self.session_id = session_id
        # the scope's entity ids: from the authenticated request, never from model output
        self.ids = scope_ids(cfg.scope, user_id, agent_id, cfg.tenant)
        self._live: tuple[Msg, str] | None = None  # the hint in the context, and its anchor
        self.saved_this_turn = False  # add_memory stored something during this reply
        self._tools: list[ToolBase] = (
            [] if cfg.mode == Mode.STATIC_CONTROL else [SearchMemoryTool(self), AddMemoryTool(self)]
        )

    async def get_middleware_key(self) -> str:
        return STATE_KEY

    async def list_tools(self) -> list[ToolBase]:
        return list(self._tools)

    async def on_system_prompt(self, agent: Agent, current_prompt: str) -> str:
        if self.cfg.mode == Mode.STATIC_CONTROL:
            return current_prompt
        return f"{current_prompt}\n\n{TOOL_INSTRUCTIONS}"

    async def on_reply(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[Any, None]],
    ) -> AsyncGenerator[Any, None]:
        if self.cfg.mode == Mode.AGENT_CONTROL:
            async for item in next_handler(**input_kwargs):
                yield item
            return

        inputs = input_kwargs.get("inputs")
        parked = Turn.from_state(agent.state.middle_context.pop(STATE_KEY, None))
        resumed = isinstance(inputs, (UserConfirmResultEvent, ExternalExecutionResultEvent))
        if resumed:
            turn = parked
        elif isinstance(inputs, UserInterruptEvent):
            turn = None  # the parked reply is abandoned: nothing to recall, nothing to write
        else:
            turn = _user_turn(inputs)

        recall: asyncio.Task[str] | None = None
        if turn is not None:
            recall = asyncio.get_running_loop().create_task(self._recall(turn.query))
        hint: Msg | None = None
        end: ReplyEndEvent | None = None
        final: Msg | None = None
        try:
            if resumed and turn is not None and recall is not None:
                # no ReplyStartEvent on resume: the context is already there
                hint = self._inject(agent, turn, await recall)
            async for item in next_handler(**input_kwargs):
                if isinstance(item, ReplyStartEvent) and turn is not None and recall is not None:
                    turn.reply_id = item.reply_id
                    # the user message is in the context now; the first model call comes next
                    hint = self._inject(agent, turn, await recall)
                elif isinstance(item, ReplyEndEvent):
                    end = item
                elif isinstance(item, Msg) and item.role == "assistant":
                    final = item
                yield item
        finally:
            if recall is not None:
                if recall.done() and not recall.cancelled():
                    recall.exception()  # an unawaited failure is retrieved, not logged at exit
                else:
                    recall.cancel()
            _remove(agent, hint)
            self._live = None

        if turn is None:
            return
        if end is None and agent.state.has_awaiting_tool_calls(agent.name):
            # parked for the user: keep the question for the turn that resumes it
            agent.state.middle_context[STATE_KEY] = turn.to_state()
            return
        completed = end is not None and end.finished_reason == ReplyFinishedReason.COMPLETED
        answer = final.get_text_content() if final is not None else None
        if completed and answer and self.cfg.capture and self.cfg.mode != Mode.AGENT_CONTROL:
            await self._write_back(turn, answer, end.reply_id if end else turn.reply_id)

    def _inject(self, agent: Agent, turn: Turn, memories: str) -> Msg | None:
        if not memories:
            return None
        hint = AssistantMsg(name=HINT_NAME, content=[HintBlock(hint=f"{HINT_HEADER}\n{memories}")])
        if not _place(agent, hint, turn.user_msg_id):
            return None
        self._live = (hint, turn.user_msg_id)
        return hint

    async def on_compress_context(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[None]],
    ) -> None:
        """Compression must never fold the temporary hint into the persisted summary.

        The hint is taken out while the context is compressed and put back after this turn's
        user message; if compression summarised that message away, the hint goes too.
        """
        live = self._live
        if live is None or not _remove(agent, live[0]):
            await next_handler(**input_kwargs)
            return
        try:
            await next_handler(**input_kwargs)
        finally:
            if not _place(agent, *live):
                self._live = None

    async def _recall(self, query: str) -> str:
        """The packed memory lines for this query; '' when there are none or memory is down."""
        recall = self.cfg.recall
        try:
            result = await self.client.recall(
                query,
                self.ids,
                top_k=recall.top_k,
                threshold=recall.threshold,
                token_budget=recall.token_budget,
                max_memory_chars=recall.max_memory_chars,
            )
        except MemoryServiceError as exc:
            if not self.cfg.fail_open:
                raise
            metrics.FAIL_OPEN.labels("recall").inc()
            log.warning("turn goes on without recalled memory: %s", exc)
            return ""
        context = str(result.get("context") or "")
        if self.observer is not None:
            self.observer("recall", {"query": query, "context": context})
        return context

    async def _write_back(self, turn: Turn, answer: str, reply_id: str) -> None:
        messages = [
            {"role": "user", "content": turn.query},
            {"role": "assistant", "content": answer},
        ]
        key = idempotency_key(
            self.cfg.tenant, self.user_id, self.agent_id, self.session_id, reply_id
        )
        write = self._capture(messages, key)
        if not self.cfg.fail_open:
            await write  # strict: the caller sees a failed write
            return
        self.client.spawn(_logged(write))

    async def _capture(self, messages: list[dict[str, str]], key: str) -> None:
        # Project memory is shared by every user of the tenant: one user's raw words must
        # never be recalled to another, so only facts an extraction model keeps are stored.
        project = self.cfg.scope == Scope.PROJECT
        metadata = {"source": "capture", "session": self.session_id}
        if self.cfg.capture_mode == CaptureMode.SESSION:
            # journalled: the session's end consolidates its exchanges into memory
            await self.client.journal(
                self.session_id,
                messages,
                self.ids,
                saved=self.saved_this_turn,
                raw_fallback=not project,
                metadata=metadata,
                idempotency_key=key,
            )
            if self.observer is not None:
                self.observer("journal", {"messages": messages})
            return
        results = await self.client.add(
            messages,
            self.ids,
            infer=self.cfg.capture_infer or project,
            raw_fallback=not project,
            metadata=metadata,
            idempotency_key=key,
        )
        if self.observer is not None:
            self.observer("capture", {"messages": messages, "results": results})


def idempotency_key(
    tenant: str, user_id: str, agent_id: str, session_id: str, reply_id: str
) -> str:
    """One key per reply: a retried or replayed write-back of the same reply is stored once."""
    raw = "\x1f".join(("capture", tenant, user_id, agent_id, session_id, reply_id))
    return hashlib.sha256(raw.encode()).hexdigest()[:48]


async def _logged(write: Any) -> None:
    try:
        await write
    except MemoryServiceError as exc:
        metrics.FAIL_OPEN.labels("capture").inc()
        log.warning("reply not written to memory: %s", exc)


def _user_turn(inputs: Any) -> Turn | None:
    """The text of this turn's user message(s); None when there is nothing to recall for."""
    msgs = inputs if isinstance(inputs, list) else [inputs]
    users = [m for m in msgs if isinstance(m, Msg) and m.role == "user"]
    text = "\n".join(t for t in (m.get_text_content() for m in users) if t)
    if not text.strip():
        return None
    return Turn(text.strip(), users[-1].id)


def _place(agent: Agent, hint: Msg, user_msg_id: str) -> bool:
    """Put the hint right after this turn's user message (the agent copies inputs, ids stay)."""
    context = agent.state.context
    for index in range(len(context) - 1, -1, -1):
        if context[index].id == user_msg_id:
            context.insert(index + 1, hint)
            return True
    return False


def _remove(agent: Agent, hint: Msg | None) -> bool:
    """Take the hint out by identity; False when it is not (or no longer) there."""
    if hint is None:
        return False
    context = agent.state.context
    for index, msg in enumerate(context):
        if msg is hint:
            del context[index]
            return True
    return False
