"""The README's first command: an AgentScope agent that remembers the user across sessions.

Everything is real except, without a provider key, the chat model:
- the memory service runs in-process on the embedded default (in-process Qdrant engine,
  SQLite history, offline embedder) in a temporary directory;
- the agent side is built the way a platform builds it: a client config file (camelCase
  fields of `ClientConfig`) and a 0600 key file, read by `MemoryMiddlewareFactory.from_env`;
- each session is a brand-new `agentscope.agent.Agent` with the factory's middleware and its
  `search_memory` / `add_memory` tools (mode `both`).

The model is `OpenAIChatModel` when OPENAI_API_KEY is set (OPENAI_BASE_URL and
MEMORYSTORE_DEMO_MODEL honoured), else `DashScopeChatModel` when DASHSCOPE_API_KEY is set
(DASHSCOPE_BASE_URL and MEMORYSTORE_DEMO_MODEL honoured), else the scripted stand-in
(`memorystore.scripted_model`). The stand-in's session-2 answer is built from the memories
that actually reached it, so what it prints depends on recall. mem0 runs only inside the
service, whose package turns its telemetry off before importing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from agentscope.agent import Agent
from agentscope.credential import DashScopeCredential, OpenAICredential
from agentscope.event import (
    ReplyEndEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from agentscope.message import UserMsg
from agentscope.model import ChatModelBase, DashScopeChatModel, OpenAIChatModel
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from agentscope.types import ReplyFinishedReason

from memorystore.middleware import MemoryMiddlewareFactory
from memorystore.middleware.memory import HINT_HEADER
from memorystore.recall import clip
from memorystore.scripted_model import ScriptedAgentModel, ToolCall, Turn, text_of
from memorystore.service.ops.runner import ServiceThread, embedded_config

USER = "alice"
AGENT_ID = "assistant"
SCRIPTED_NOTICE = "no OPENAI_API_KEY / DASHSCOPE_API_KEY: using a scripted stand-in model"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_DASHSCOPE_MODEL = "qwen-plus"

SYSTEM_PROMPT = (
    "You are a charting assistant. When the user tells you a lasting preference or a fact "
    "about themselves, save it with `add_memory`. When asked for a chart, answer with "
    "Python code that follows what you know about the user. Answer in the user's language."
)

# Loggers that would interleave INFO lines with the narration; warnings still show.
_QUIET_LOGGERS = (
    "memorystore.service",
    "mem0",
    "httpx",
    "httpcore",
    "openai",
    "agentscope",
    "uvicorn",
)


@dataclass(frozen=True)
class Script:
    """What the user says, and what the stand-in model needs to play its part."""

    session1: str
    session2: str
    facts: tuple[str, ...]  # what the stand-in saves with add_memory in session 1
    why: str  # add_memory's `thinking` argument (not stored)
    saved: str  # session-1 answer once add_memory reported the facts saved
    not_saved: str  # session-1 answer when saving failed
    search: tuple[str, ...]  # search_memory keywords in session 2: none names a preference
    dark: str  # the words that show each preference reached the model
    library: str
    chart_intro: str
    colon: str
    with_library: str
    in_dark: str
    no_memory: str
    title: str
    months: tuple[str, ...]
    ylabel: str


SCRIPTS = {
    "en": Script(
        session1="Please make my charts in dark mode by default, use matplotlib, "
        "and by the way, I live in Hangzhou.",
        session2="Draw me a bar chart of our monthly sales.",
        facts=(
            "The user wants charts in dark mode by default.",
            "The user makes charts with matplotlib.",
            "The user lives in Hangzhou.",
        ),
        why="Lasting chart preferences and where the user lives: useful in later sessions.",
        saved="Got it: dark mode by default, matplotlib, and you live in Hangzhou. "
        "I've saved that for our next conversations.",
        not_saved="Got it for this conversation, but I could not save it to long-term memory.",
        search=("chart style", "plotting library"),
        dark="dark mode",
        library="matplotlib",
        chart_intro="Here is a bar chart of your monthly sales",
        colon=":",
        with_library=" in matplotlib",
        in_dark=", in dark mode as you prefer",
        no_memory=" (I know none of your preferences yet)",
        title="Monthly sales",
        months=("Jan", "Feb", "Mar", "Apr", "May", "Jun"),
        ylabel="Sales",
    ),
    "zh": Script(
        session1="我的图表默认用深色模式，用 matplotlib，我住在杭州。",
        session2="帮我画一张月度销售额的柱状图。",
        facts=("用户的图表默认使用深色模式。", "用户用 matplotlib 画图。", "用户住在杭州。"),
        why="长期有效的画图偏好和用户的居住地，以后的会话用得上。",
        saved="好的：图表默认深色模式、用 matplotlib，你住在杭州。已记下，以后的对话也会用上。",
        not_saved="好的，本次对话照此办理，但没能存入长期记忆。",
        search=("图表风格", "画图工具"),
        dark="深色模式",
        library="matplotlib",
        chart_intro="这是月度销售额的柱状图",
        colon="：",
        with_library="，用 matplotlib 画",
        in_dark="，按你的习惯用深色模式",
        no_memory="（我还不知道你的偏好）",
        title="月度销售额",
        months=("1月", "2月", "3月", "4月", "5月", "6月"),
        ylabel="销售额",
    ),
}


# --- the model ------------------------------------------------------------------------------


def chat_model() -> tuple[ChatModelBase | None, str]:
    """The agent's model and a line saying which one it is: a real provider when a key is set."""
    name = os.environ.get("MEMORYSTORE_DEMO_MODEL", "").strip()
    if os.environ.get("OPENAI_API_KEY"):
        base_url = os.environ.get("OPENAI_BASE_URL") or None
        model_name = name or DEFAULT_OPENAI_MODEL
        credential = OpenAICredential(api_key=os.environ["OPENAI_API_KEY"], base_url=base_url)
        where = f" at {base_url}" if base_url else ""
        return OpenAIChatModel(credential=credential, model=model_name), (
            f"model: OpenAIChatModel '{model_name}'{where} (OPENAI_API_KEY is set)"
        )
    if os.environ.get("DASHSCOPE_API_KEY"):
        model_name = name or DEFAULT_DASHSCOPE_MODEL
        extra = {"base_url": url} if (url := os.environ.get("DASHSCOPE_BASE_URL")) else {}
        dashscope = DashScopeCredential(api_key=os.environ["DASHSCOPE_API_KEY"], **extra)
        where = f" at {url}" if url else ""
        return DashScopeChatModel(credential=dashscope, model=model_name), (
            f"model: DashScopeChatModel '{model_name}'{where} (DASHSCOPE_API_KEY is set)"
        )
    return None, SCRIPTED_NOTICE + " (memory, agent, tools and service are all real)"


def scripted_session1(script: Script) -> list[Turn]:
    """Session 1: save the three facts with add_memory, then confirm what the tool reported."""
    save = ToolCall("add_memory", {"thinking": script.why, "content": list(script.facts)})

    def confirm(messages: list[dict[str, Any]]) -> str:
        result = _tool_results(messages)
        if "Saved" in result:
            return script.saved
        return script.not_saved

    return [save, confirm]


def scripted_session2(script: Script) -> list[Turn]:
    """Session 2: search memory, then answer from whatever memory actually arrived."""
    search = ToolCall("search_memory", {"keywords": list(script.search), "limit": 2})
    return [search, lambda messages: chart_answer(script, _memory_seen(messages))]


def chart_answer(script: Script, memory: str) -> str:
    """The chart reply: matplotlib and dark mode only if the memory it was sent says so."""
    dark = script.dark in memory
    library = script.library in memory
    intro = script.chart_intro
    if library:
        intro += script.with_library
    if dark:
        intro += script.in_dark
    if not (dark or library):
        intro += script.no_memory
    months = ", ".join(json.dumps(m, ensure_ascii=False) for m in script.months)
    code = [
        "import matplotlib.pyplot as plt",
        *(['plt.style.use("dark_background")'] if dark else []),
        "",
        f"months = [{months}]",
        "sales = [120, 135, 128, 150, 162, 171]",
        "fig, ax = plt.subplots()",
        f'ax.bar(months, sales, color="{"#4cc9f0" if dark else "#1f77b4"}")',
        f"ax.set_title({json.dumps(script.title, ensure_ascii=False)})",
        f"ax.set_ylabel({json.dumps(script.ylabel, ensure_ascii=False)})",
        "plt.show()",
    ]
    return intro + script.colon + "\n```python\n" + "\n".join(code) + "\n```"


def _tool_results(messages: list[dict[str, Any]]) -> str:
    return "\n".join(text_of(m) for m in messages if m.get("role") == "tool")


def _memory_seen(messages: list[dict[str, Any]]) -> str:
    """What memory reached the model: the middleware's recall hint and the tool results."""
    hints = [text_of(m) for m in messages if m.get("role") == "user"]
    return "\n".join([t for t in hints if t.startswith(HINT_HEADER)] + [_tool_results(messages)])


# --- narration ------------------------------------------------------------------------------


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def observe(event: str, data: dict[str, Any]) -> None:
    """The middleware's observer: what memory put into the context, and what it took out."""
    if event == "recall":
        context = data.get("context") or ""
        if context:
            print("  memory → context (recalled before the first model call):")
            print(_indent(context))
        else:
            print("  memory → context: nothing relevant stored yet")
    elif event == "capture":
        print("  context → memory (the finished exchange, written back after the reply):")
        for item in data.get("results") or []:
            print(f"    [{item.get('event')}] {clip(str(item.get('memory', '')), 100)}")
    elif event == "journal":
        print("  exchange journalled: the session's end turns it into memory")
    elif event == "session_end":
        result = data.get("result") or {}
        items = result.get("results") or []
        done = f"  session {data.get('session_id')} ended: {result.get('exchanges', 0)} exchange(s)"
        if not items:
            print(
                f"{done}, nothing new to remember (replies, requests and what the agent "
                "already saved are not stored again)"
            )
        else:
            print(f"{done} consolidated into memory:")
        for item in items:
            print(f"    [{item.get('event')}] {clip(str(item.get('memory', '')), 100)}")


async def play_turn(agent: Agent, text: str) -> bool:
    """One user message through `agent.reply_stream`, narrating tool calls and the answer."""
    print(f"user: {text}")
    names: dict[str, str] = {}
    arguments: dict[str, str] = {}
    results: dict[str, str] = {}
    texts: dict[str, str] = {}
    finished = None
    async for event in agent.reply_stream(UserMsg(name=USER, content=text)):
        if isinstance(event, ToolCallStartEvent):
            names[event.tool_call_id] = event.tool_call_name
        elif isinstance(event, ToolCallDeltaEvent):
            arguments[event.tool_call_id] = arguments.get(event.tool_call_id, "") + event.delta
        elif isinstance(event, ToolCallEndEvent):
            name = names.get(event.tool_call_id, "?")
            print(f"  tool call: {name} {_compact(arguments.get(event.tool_call_id, ''))}")
        elif isinstance(event, ToolResultStartEvent):
            names.setdefault(event.tool_call_id, event.tool_call_name)
        elif isinstance(event, ToolResultTextDeltaEvent):
            results[event.tool_call_id] = results.get(event.tool_call_id, "") + event.delta
        elif isinstance(event, ToolResultEndEvent):
            name = names.get(event.tool_call_id, "?")
            print(f"  tool result ({name}, {event.state}):")
            print(_indent(results.get(event.tool_call_id, "").strip() or "(empty)"))
        elif isinstance(event, TextBlockDeltaEvent):
            texts[event.block_id] = texts.get(event.block_id, "") + event.delta
        elif isinstance(event, TextBlockEndEvent):
            answer = event.text if event.text is not None else texts.get(event.block_id, "")
            print("assistant:")
            print(_indent(answer.strip()))
        elif isinstance(event, ReplyEndEvent):
            finished = event.finished_reason
    if finished != ReplyFinishedReason.COMPLETED:
        print(f"  the reply did not complete (finished: {finished})")
        return False
    return True


def _compact(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return arguments


# --- the scenario ---------------------------------------------------------------------------


def write_client_config(directory: Path, endpoint: str, api_key: str) -> Path:
    """The files a platform mounts into an agent pod: the client config and the key (0600)."""
    directory.mkdir(parents=True, exist_ok=True)
    key_file = directory / "api-key"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(api_key)
    config = {
        "endpoint": endpoint,
        "tenant": "local",
        "apiKey": {"file": str(key_file)},
        "mode": "both",
        "scope": "user",
        "writePermission": "allow",
        # generous for a cold laptop; a cluster's config keeps the 2 s default
        "timeoutSeconds": 10,
    }
    path = directory / "client.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


async def play(config_path: Path, script: Script) -> bool:
    factory = MemoryMiddlewareFactory.from_env(
        {"MEMORYSTORE_CLIENT_CONFIG": str(config_path)}, observer=observe
    )
    real_model, model_line = chat_model()
    print(model_line)
    sessions = [
        ("s1", script.session1, scripted_session1(script), "a new agent"),
        ("s2", script.session2, scripted_session2(script), "a brand-new agent, empty context"),
    ]
    try:
        for session, text, turns, how in sessions:
            print(f"\n== session {session} (user {USER}, {how}) ==")
            middlewares = await factory(USER, AGENT_ID, session)
            if not middlewares:
                print("  memory is off: the factory returned no middleware")
                return False
            tools = [tool for mw in middlewares for tool in await mw.list_tools()]
            agent = Agent(
                name="assistant",
                system_prompt=SYSTEM_PROMPT,
                model=real_model or ScriptedAgentModel(turns),
                toolkit=Toolkit(tools=tools),
                middlewares=middlewares,
                state=AgentState(session_id=session),
            )
            try:
                completed = await play_turn(agent, text)
            except Exception as exc:  # a provider's error: report it, not a traceback
                print(f"  the model call failed: {type(exc).__name__}: {exc}")
                completed = False
            await factory.drain()  # the write-back runs after the reply: wait, then go on
            if not completed:
                return False
            # the session is over (a chat UI's close, AgentScope's session delete, or the
            # service's idle sweep): its exchanges are consolidated into memory
            await factory.end_session(USER, AGENT_ID, session, wait=True)
    finally:
        await factory.aclose()
    return True


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """Raise noisy loggers to WARNING for the demo, and put them back afterwards."""
    loggers = [logging.getLogger(name) for name in _QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def run_demo(language: str = "en") -> int:
    script = SCRIPTS[language]
    with quiet_logs(), tempfile.TemporaryDirectory(prefix="memorystore-demo-") as tmp:
        cfg = embedded_config(Path(tmp) / "data")
        print(
            "MemoryStore demo: an AgentScope agent with long-term memory, two sessions.\n"
            "Memory service on the embedded default: in-process Qdrant engine, SQLite history, "
            f"offline '{cfg.embedder.provider}' embedder, no extraction model (text stored as "
            "written). Data in a temporary directory."
        )
        with ServiceThread(cfg) as svc:
            config_path = write_client_config(Path(tmp) / "agent", svc.url, svc.api_key)
            print(f"memory service listening on {svc.url}")
            print(f"agent client config: {config_path} (mode both, scope user)")
            ok = asyncio.run(play(config_path, script))
    if not ok:
        print("\ndemo failed: a reply did not complete (see above)")
        return 1
    print("\ndone: session s2 started with an empty context and used what s1 taught it.")
    return 0
