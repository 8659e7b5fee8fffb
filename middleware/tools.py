"""The memory tools an agent gets in agent_control / both: `search_memory` and `add_memory`.

Their schemas carry no user, agent, session or key: those come from the authenticated
request the middleware was built for, so a model can never read or write another user's
memory by choosing an argument.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agentscope.message import TextBlock, ToolResultState
from agentscope.permission import PermissionBehavior, PermissionContext, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk

from memorystore.middleware import metrics
from memorystore.middleware.client import MemoryServiceError
from memorystore.recall import clip, pack

if TYPE_CHECKING:
    from memorystore.middleware.memory import MemoryMiddleware

log = logging.getLogger("memorystore.middleware")

MAX_KEYWORDS = 5
MAX_KEYWORD_CHARS = 200
MAX_LIMIT = 20
MAX_FACTS = 20

_BEHAVIOUR = {
    "allow": PermissionBehavior.ALLOW,
    "ask": PermissionBehavior.ASK,
    "deny": PermissionBehavior.DENY,
}


class _MemoryTool(ToolBase):
    def __init__(self, mw: MemoryMiddleware) -> None:
        super().__init__()
        self._mw = mw

    def _unavailable(self, op: str, exc: MemoryServiceError) -> ToolChunk:
        """Fail-open: the model hears memory is unavailable and goes on; strict: an error."""
        if not self._mw.cfg.fail_open:
            raise exc
        metrics.FAIL_OPEN.labels(op).inc()
        log.warning("%s without memory: %s", op, exc)
        return _text("Memory is unavailable right now; continue without it.")


class SearchMemoryTool(_MemoryTool):
    name = "search_memory"
    description = (
        "Search the user's long-term memory (facts and preferences from earlier "
        "conversations). Give a few short keywords or phrases; results are merged, best first."
    )

    # an attribute, not a ClassVar: ToolBase declares it so (hence the noqa)
    input_schema: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "keywords": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": MAX_KEYWORDS,
                "description": "Short search phrases, e.g. a name, a place, a topic.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": 5,
                "description": "Most memories to return per keyword.",
            },
        },
        "required": ["keywords"],
    }
    is_concurrency_safe = True
    is_read_only = True

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        return PermissionDecision(PermissionBehavior.ALLOW, "reading the user's own memory")

    async def call(self, keywords: list[str], limit: int = 5) -> ToolChunk:
        queries = list(dict.fromkeys(k.strip()[:MAX_KEYWORD_CHARS] for k in keywords if k.strip()))
        if not queries:
            return _error("`keywords` is empty: give at least one search phrase.")
        queries = queries[:MAX_KEYWORDS]
        limit = max(1, min(int(limit), MAX_LIMIT))
        mw = self._mw
        try:
            found = await asyncio.gather(
                *(mw.client.search(q, mw.ids, limit, mw.cfg.recall.threshold) for q in queries)
            )
        except MemoryServiceError as exc:
            return self._unavailable("search_memory", exc)
        best: dict[str, dict[str, Any]] = {}
        for results in found:
            for memory in results:
                kept = best.get(memory["id"])
                if kept is None or (memory.get("score") or 0) > (kept.get("score") or 0):
                    best[memory["id"]] = memory
        # All keywords share one budget, then one byte cap: the result never floods the context.
        packed = pack(
            list(best.values()),
            token_budget=mw.cfg.recall.tool_token_budget,
            max_memory_chars=mw.cfg.recall.max_memory_chars,
        )
        if not packed.context:
            if best:
                return _text("(memories matched, but none fits the tool token budget)")
            return _text("(no relevant memories found)")
        return _text(_cap_bytes(packed.context, mw.cfg.tool_result_max_bytes))


class AddMemoryTool(_MemoryTool):
    name = "add_memory"
    description = (
        "Save durable facts about the user (preferences, circumstances, decisions) to "
        "long-term memory so later conversations can use them. Only `content` is stored."
    )

    # an attribute, not a ClassVar: ToolBase declares it so (hence the noqa)
    input_schema: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "thinking": {
                "type": "string",
                "description": "Why this is worth remembering (not stored).",
            },
            "content": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": MAX_FACTS,
                "description": "Facts to remember, one complete sentence each.",
            },
        },
        "required": ["thinking", "content"],
    }
    is_concurrency_safe = False
    is_read_only = False

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        """MEMORYSTORE_WRITE_PERMISSION: allow runs, deny refuses, ask leaves it to the user."""
        setting = self._mw.cfg.write_permission
        return PermissionDecision(
            _BEHAVIOUR[setting],
            f"add_memory: write permission is '{setting}' (MEMORYSTORE_WRITE_PERMISSION)",
        )

    async def call(self, thinking: str, content: list[str]) -> ToolChunk:
        facts = [" ".join(c.split()) for c in content if c and c.strip()][:MAX_FACTS]
        if not facts:
            return _error("`content` is empty: give at least one fact to remember.")
        mw = self._mw
        messages = [{"role": "user", "content": fact} for fact in facts]
        metadata = {"source": "add_memory", "session": mw.session_id}
        try:
            results = await mw.client.add(messages, mw.ids, infer=True, metadata=metadata)
            if not results:
                # extraction found nothing to keep: store what the agent chose to save, raw
                results = await mw.client.add(messages, mw.ids, infer=False, metadata=metadata)
        except MemoryServiceError as exc:
            return self._unavailable("add_memory", exc)
        mw.saved_this_turn = True
        saved = [r for r in results if r.get("event") == "ADD"]
        known = sum(r.get("event") == "NONE" for r in results)
        retired = [r for r in results if r.get("event") == "DELETE"]
        text = f"Saved {len(saved)} memor{'y' if len(saved) == 1 else 'ies'}"
        if known:
            text += f" ({known} already known)"
        kept = [r for r in results if r.get("event") != "DELETE"]
        text += ": " + "; ".join(clip(str(r.get("memory", "")), 200) for r in kept)
        if retired:
            outdated = "; ".join(clip(str(r.get("memory", "")), 200) for r in retired)
            text += f". Retired as outdated: {outdated}"
        return _text(text)


def _cap_bytes(text: str, max_bytes: int) -> str:
    """Whole lines while they fit; a marker says how many were cut."""
    if len(text.encode()) <= max_bytes:
        return text
    lines = text.split("\n")
    room = max(max_bytes - 40, 0)  # leave space for the marker
    kept: list[str] = []
    used = 0
    for line in lines:
        size = len(line.encode()) + 1
        if used + size > room:
            break
        kept.append(line)
        used += size
    cut = len(lines) - len(kept)
    if not kept:  # one memory alone is over the cap: cut it on a character boundary
        kept = [lines[0].encode()[:room].decode(errors="ignore") + "…"]
        cut -= 1
    return "\n".join(kept + ([f"(… {cut} more not shown)"] if cut else []))


def _text(message: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(type="text", text=message)])


def _error(message: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(type="text", text=message)], state=ToolResultState.ERROR)
