"""Each MEMORYSTORE_* toggle changes what an agent does, as docs/agent-side.md documents.

Every factory here is built the way an agent process builds it: `from_env(env)` reads a
client config YAML from MEMORYSTORE_CLIENT_CONFIG (as the operator mounts it) and applies
the toggles in `env` over it, so precedence env > file > defaults is exercised throughout.
The service is real (loopback); only the chat model is a scripted stand-in, and each test
reads the effect where it lands: what the model was sent, what the service stores, what the
agent side sent over the wire. TIMEOUT_SECONDS and FAIL_OPEN are covered elsewhere.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from memorystore.config import ConfigError
from memorystore.middleware import MemoryMiddlewareFactory
from memorystore.recall import estimate_tokens
from support.agent_memory import chat, client_fields, hints, key_file, stored
from support.fault_proxy import FaultProxy
from support.recording_transport import RecordingTransport
from support.scripted_agent_model import ModelCall, ScriptedAgentModel, ToolCall

pytestmark = pytest.mark.timeout(120)

PREFERENCE = "Please make my charts in dark mode by default."
ACK = "Noted: dark mode."
REQUEST = "Draw me a bar chart of monthly sales."
# Eight chart preferences: all score well above the default 0.3 threshold for REQUEST.
CHART_PREFS = [
    PREFERENCE,
    "I like bar charts with thin bars.",
    "My charts should use a blue colour palette.",
    "Label every chart axis in euros.",
    "I prefer charts with gridlines turned off.",
    "Put the chart legend at the bottom.",
    "Always start the chart's y axis at zero.",
    "Use a large font for chart titles.",
]
ADD = "/v3/memories/add/"


# --- helpers ------------------------------------------------------------------------------


@pytest.fixture
async def make_factory(service, tmp_path: Path):
    """`make(file={...}, TOGGLE="value", ...)`: write a client config, `from_env` over it."""
    key = key_file(tmp_path, service.api_key)
    made: list[MemoryMiddlewareFactory] = []
    numbers = itertools.count()

    def make(
        file: dict[str, Any] | None = None,
        *,
        endpoint: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        **toggles: str,
    ) -> MemoryMiddlewareFactory:
        path = tmp_path / f"client-{next(numbers)}.yaml"
        path.write_text(config_yaml(endpoint or service.url, key, **(file or {})))
        kwargs = {"transport": transport} if transport is not None else {}
        made.append(MemoryMiddlewareFactory.from_env(env_for(path, **toggles), **kwargs))
        return made[-1]

    yield make
    for factory in made:
        await factory.aclose()


def config_yaml(endpoint: str, key: Path, **fields: Any) -> str:
    """The client config as the operator mounts it: `client_fields` as a YAML file."""
    return yaml.safe_dump(client_fields(endpoint, key, **fields))


def env_for(config: Path, **toggles: str) -> dict[str, str]:
    """An agent process's environment: the mounted config's path plus MEMORYSTORE_* toggles."""
    return {"MEMORYSTORE_CLIENT_CONFIG": str(config)} | {
        f"MEMORYSTORE_{name}": value for name, value in toggles.items()
    }


def seed(http: httpx.Client, texts: Iterable[str], **ids: str) -> None:
    """Store each text as one memory, verbatim (no extraction)."""
    messages = [{"role": "user", "content": text} for text in texts]
    response = http.post(ADD, json={"messages": messages, **ids, "infer": False})
    response.raise_for_status()


def memory_lines(call: ModelCall) -> list[str]:
    """The recalled memories the model was sent on this call ([] when no hint)."""
    found = hints(call)
    assert len(found) <= 1, "at most one memory hint per call"
    return [line for text in found for line in text.splitlines() if line.startswith("- ")]


async def recalled(factory: MemoryMiddlewareFactory, **kwargs: Any) -> list[str]:
    """The memory lines injected for REQUEST in one fresh run."""
    _, model, _ = await chat(factory, REQUEST, ["Done."], **kwargs)
    (call,) = model.calls
    return memory_lines(call)


def tool_result(model: ScriptedAgentModel) -> str:
    """The text of the one tool result the model saw on its second call."""
    (text,) = model.calls[1].texts("tool")
    return text


async def search_result(factory: MemoryMiddlewareFactory) -> str:
    """What one `search_memory` call about charts returns to the model."""
    search = ToolCall("search_memory", {"keywords": ["charts", "chart preferences"], "limit": 20})
    _, model, _ = await chat(factory, REQUEST, [search, "Done."])
    return tool_result(model)


# --- ENABLED and precedence ---------------------------------------------------------------


async def test_enabled_false_in_env_beats_the_file_gives_no_middleware_and_no_request(
    service, make_factory, http
):
    """A Deployment can switch memory off even though its tenant's config says on."""
    host, port = urlsplit(service.url).hostname, urlsplit(service.url).port
    with FaultProxy(host, port) as proxy:
        on_file = {"enabled": True, "mode": "both"}
        sent = RecordingTransport()
        off = make_factory(on_file, endpoint=proxy.url, transport=sent, ENABLED="false")
        assert await off("alice", "assistant", "s1") == []
        assert off.client is None
        reply, model, _ = await chat(off, PREFERENCE, [ACK])
        assert reply.get_text_content() == ACK
        assert model.calls[0].tool_names == [], "no memory tools without memory"
        assert sent.sent == [] and proxy.connections == 0, "not one request to the service"
        assert stored(http, user_id="alice") == []

        # control: the same file without the toggle is on, and does reach the service
        sent_on = RecordingTransport()
        on = make_factory(on_file, endpoint=proxy.url, transport=sent_on)
        assert len(await on("alice", "assistant", "s1")) == 1
        assert sent_on.to("/v1/ping/") and proxy.connections >= 1


async def test_env_beats_file_beats_default_for_top_k(make_factory, http):
    """topK from the file applies unless MEMORYSTORE_TOP_K is set; an empty var is unset."""
    seed(http, CHART_PREFS, user_id="alice")
    quiet = {"mode": "static_control", "capture": False}
    assert len(await recalled(make_factory(quiet))) == 8, "default topK is 8"
    assert len(await recalled(make_factory({**quiet, "recall": {"topK": 2}}))) == 2
    assert len(await recalled(make_factory({**quiet, "recall": {"topK": 2}}, TOP_K="5"))) == 5
    assert len(await recalled(make_factory({**quiet, "recall": {"topK": 2}}, TOP_K=""))) == 2


# --- MODE ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "tools", "hint"),
    [("static_control", False, True), ("agent_control", True, False), ("both", True, True)],
)
async def test_mode_decides_tools_and_hint(make_factory, http, mode, tools, hint):
    """static_control injects only, agent_control offers tools only, both does both."""
    seed(http, [PREFERENCE], user_id="alice")
    other = "static_control" if mode == "agent_control" else "agent_control"
    factory = make_factory({"mode": other, "capture": False}, MODE=mode)  # env wins
    _, model, _ = await chat(factory, REQUEST, ["Done."])
    (call,) = model.calls
    offered = {"search_memory", "add_memory"} <= set(call.tool_names)
    assert offered is tools
    assert ("`search_memory`" in call.texts("system")[0]) is tools, "tool instructions"
    assert (f"- {PREFERENCE}" in memory_lines(call)) is hint


async def test_mode_in_env_beats_the_file(make_factory, http):
    """The file says agent_control; MEMORYSTORE_MODE=static_control wins."""
    seed(http, [PREFERENCE], user_id="alice")
    factory = make_factory({"mode": "agent_control", "capture": False}, MODE="static_control")
    _, model, _ = await chat(factory, REQUEST, ["Done."])
    (call,) = model.calls
    assert call.tool_names == []
    assert memory_lines(call) == [f"- {PREFERENCE}"]


# --- SCOPE --------------------------------------------------------------------------------


async def test_scope_user_shares_memory_between_one_users_agents(make_factory, http):
    """user scope: what the planner agent learnt, the charts agent recalls (env beats file)."""
    factory = make_factory({"mode": "static_control", "scope": "agent"}, SCOPE="user")
    await chat(factory, PREFERENCE, [ACK], agent_id="planner", session="s1")
    assert stored(http, user_id="alice") == sorted([PREFERENCE, ACK])
    assert f"- {PREFERENCE}" in await recalled(factory, agent_id="charts", session="s2")


async def test_scope_agent_keeps_each_agents_memory_apart(make_factory, http):
    """agent scope: the charts agent does not recall what alice told the planner agent."""
    factory = make_factory({"mode": "static_control", "scope": "user"}, SCOPE="agent")
    await chat(factory, PREFERENCE, [ACK], agent_id="planner", session="s1")
    assert stored(http, user_id="alice", agent_id="planner") == sorted([PREFERENCE, ACK])
    assert await recalled(factory, agent_id="charts", session="s2") == []
    # the memory is there for the agent that wrote it
    assert f"- {PREFERENCE}" in await recalled(factory, agent_id="planner", session="s3")


async def test_scope_project_never_captures_raw_turns(make_factory, http):
    """project scope: one user's raw words are never stored where every user recalls them.

    This service has no extraction model, so the write-back asks for extraction only and the
    service stores nothing; the tenant's memory still reaches every user (added explicitly).
    """
    sent = RecordingTransport()
    factory = make_factory({"mode": "static_control"}, transport=sent, SCOPE="project")
    await chat(factory, PREFERENCE, [ACK], user="alice", session="s1")
    await factory.drain()
    (write,) = sent.to(ADD)
    assert (write.body["infer"], write.body["raw_fallback"]) == (True, False)
    assert write.body["user_id"] == "project:acme"
    assert stored(http, user_id="project:acme") == [], "no raw turn in project memory"
    assert stored(http, user_id="alice") == [], "nothing under the user's own id"
    seed(http, [PREFERENCE], user_id="project:acme")  # what add_memory or extraction stores
    assert f"- {PREFERENCE}" in await recalled(factory, user="bob", session="s2")


def test_the_stock_flavor_is_refused_for_project_capture(tmp_path):
    """AgentScope's Mem0Middleware writes every raw turn: refused at start-up, not at a turn."""
    path = tmp_path / "client.yaml"
    path.write_text(config_yaml("http://127.0.0.1:9", key_file(tmp_path, "k"), scope="project"))
    with pytest.raises(ConfigError, match="scope: project with flavor mem0"):
        MemoryMiddlewareFactory.from_env(env_for(path), flavor="mem0")
    tools_only = env_for(path, MODE="agent_control")
    assert MemoryMiddlewareFactory.from_env(tools_only, flavor="mem0").enabled


# --- recall: TOP_K, THRESHOLD, TOKEN_BUDGET -----------------------------------------------


async def test_top_k_caps_the_injected_memories(make_factory, http):
    """Eight memories match; TOP_K=3 injects three, TOP_K=8 all eight."""
    seed(http, CHART_PREFS, user_id="alice")
    quiet = {"mode": "static_control", "capture": False}
    three = await recalled(make_factory(quiet, TOP_K="3"))
    assert len(three) == 3 and set(three) < {f"- {p}" for p in CHART_PREFS}
    assert len(await recalled(make_factory(quiet, TOP_K="8"))) == 8


async def test_threshold_one_injects_nothing_although_memories_match(make_factory, http):
    """No similarity reaches 1.0, so nothing passes the floor; 0 lets them through."""
    seed(http, CHART_PREFS, user_id="alice")
    quiet = {"mode": "static_control", "capture": False}
    assert await recalled(make_factory(quiet, THRESHOLD="1.0")) == []
    assert len(stored(http, user_id="alice")) == 8, "the memories are there"
    assert len(await recalled(make_factory(quiet, THRESHOLD="0"))) == 8


async def test_token_budget_bounds_the_injected_memories(make_factory, http):
    """A small budget injects fewer whole memories than a large one; 0 injects no hint."""
    seed(http, CHART_PREFS, user_id="alice")
    quiet = {"mode": "static_control", "capture": False}
    small = await recalled(make_factory(quiet, TOKEN_BUDGET="30"))
    large = await recalled(make_factory(quiet, TOKEN_BUDGET="512"))
    assert 1 <= len(small) < len(large) == 8
    assert sum(estimate_tokens(line) for line in small) <= 30
    assert set(small) <= {f"- {p}" for p in CHART_PREFS}, "whole memories only"

    _, model, _ = await chat(make_factory(quiet, TOKEN_BUDGET="0"), REQUEST, ["Done."])
    assert hints(model.calls[0]) == []


# --- the search_memory tool: TOOL_TOKEN_BUDGET, TOOL_RESULT_MAX_BYTES ---------------------


async def test_tool_token_budget_shrinks_the_search_result(make_factory, http):
    """search_memory packs its result into MEMORYSTORE_TOOL_TOKEN_BUDGET tokens."""
    seed(http, CHART_PREFS, user_id="alice")
    tools = {"mode": "agent_control"}
    full = (await search_result(make_factory(tools))).splitlines()
    small = (await search_result(make_factory(tools, TOOL_TOKEN_BUDGET="30"))).splitlines()
    assert len(full) == 8
    assert 1 <= len(small) < len(full)
    assert set(small) <= set(full)
    assert sum(estimate_tokens(line) for line in small) <= 30


async def test_tool_result_max_bytes_caps_the_search_result_and_counts_the_cut(make_factory, http):
    """The result is at most that many bytes and ends with how many memories were left out."""
    prefs = [f"{p} This matters for chart report {i}." for i, p in enumerate(CHART_PREFS)]
    seed(http, prefs, user_id="alice")
    tools = {"mode": "agent_control"}
    full = await search_result(make_factory(tools))
    assert len(full.splitlines()) == 8 and len(full.encode()) > 256

    capped = await search_result(make_factory(tools, TOOL_RESULT_MAX_BYTES="256"))
    assert len(capped.encode()) <= 256
    *kept, marker = capped.splitlines()
    assert kept and set(kept) < set(full.splitlines())
    assert marker == f"(… {8 - len(kept)} more not shown)"


# --- WRITE_PERMISSION ---------------------------------------------------------------------

FACT = "Alice's charts use a dark theme."
SAVE = {"thinking": "a lasting preference", "content": [FACT]}


async def test_write_permission_allow_stores_the_fact(make_factory, http):
    """The file denies writes; MEMORYSTORE_WRITE_PERMISSION=allow wins and the fact is saved."""
    file = {"mode": "agent_control", "writePermission": "deny"}
    factory = make_factory(file, WRITE_PERMISSION="allow")
    _, model, _ = await chat(factory, PREFERENCE, [ToolCall("add_memory", SAVE), "Saved."])
    assert tool_result(model).startswith("Saved 1 memory")
    assert stored(http, user_id="alice") == [FACT]


async def test_write_permission_deny_refuses_the_tool_and_stores_nothing(make_factory, http):
    """The file allows writes; MEMORYSTORE_WRITE_PERMISSION=deny wins and the call is refused."""
    file = {"mode": "agent_control", "writePermission": "allow"}
    factory = make_factory(file, WRITE_PERMISSION="deny")
    _, model, _ = await chat(factory, PREFERENCE, [ToolCall("add_memory", SAVE), "Not saved."])
    result = tool_result(model)
    assert "Saved" not in result
    assert "deny" in result.lower() or "denied" in result.lower(), result
    assert stored(http, user_id="alice") == []


async def test_write_permission_ask_parks_the_reply(make_factory, http):
    """ask: the reply stops to ask the user; nothing is stored until they confirm."""
    factory = make_factory({"mode": "agent_control"}, WRITE_PERMISSION="ask")
    reply, model, agent = await chat(factory, PREFERENCE, [ToolCall("add_memory", SAVE)])
    assert "waiting for your permission" in reply.get_text_content()
    assert len(model.calls) == 1, "the model is not called again until the user answers"
    (pending,) = agent.state.get_awaiting_tool_calls("assistant")
    assert pending.name == "add_memory"
    assert stored(http, user_id="alice") == []


async def test_write_permission_defaults_to_ask(make_factory, http):
    """Neither file nor env says: add_memory asks (a persisted prompt injection needs a human)."""
    factory = make_factory({"mode": "agent_control"})
    reply, _, agent = await chat(factory, PREFERENCE, [ToolCall("add_memory", SAVE)])
    assert "waiting for your permission" in reply.get_text_content()
    (pending,) = agent.state.get_awaiting_tool_calls("assistant")
    assert pending.name == "add_memory"
    assert stored(http, user_id="alice") == []


# --- CAPTURE, CAPTURE_INFER ---------------------------------------------------------------


async def test_capture_false_writes_nothing_back(make_factory, http):
    """The file says capture; MEMORYSTORE_CAPTURE=false wins: no add request at all."""
    sent = RecordingTransport()
    off = make_factory({"mode": "static_control", "capture": True}, transport=sent, CAPTURE="false")
    reply, _, _ = await chat(off, PREFERENCE, [ACK])
    assert reply.get_text_content() == ACK
    assert sent.to(ADD) == [] and sent.to("/v1/recall/"), "recall still runs"
    assert stored(http, user_id="alice") == []

    on = make_factory({"mode": "static_control"}, CAPTURE="true")
    await chat(on, PREFERENCE, [ACK])
    assert stored(http, user_id="alice") == sorted([PREFERENCE, ACK])


@pytest.mark.parametrize(("toggle", "infer"), [("true", True), ("false", False)])
async def test_capture_infer_sets_the_write_backs_infer_flag(make_factory, http, toggle, infer):
    """The file says the opposite; the env value is what goes on the wire."""
    sent = RecordingTransport()
    file = {"mode": "static_control", "captureInfer": not infer}
    factory = make_factory(file, transport=sent, CAPTURE_INFER=toggle)
    await chat(factory, PREFERENCE, [ACK])
    (write,) = sent.to(ADD)
    assert write.body["infer"] is infer
    assert write.body["user_id"] == "alice"
    assert [m["content"] for m in write.body["messages"]] == [PREFERENCE, ACK]


async def test_capture_mode_session_journals_the_exchange_and_ends_the_session(make_factory, http):
    """The file says turn; MEMORYSTORE_CAPTURE_MODE=session wins: the exchange is journalled
    (no add), nothing is memory until the session ends, then the user's statement is."""
    sent = RecordingTransport()
    factory = make_factory({"mode": "static_control"}, transport=sent, CAPTURE_MODE="session")
    await chat(factory, PREFERENCE, [ACK])
    assert sent.to(ADD) == []
    (journalled,) = [r for r in sent.sent if r.path.startswith("/v1/sessions/")]
    assert journalled.path == "/v1/sessions/s1/exchanges/"
    assert [m["content"] for m in journalled.body["messages"]] == [PREFERENCE, ACK]
    assert journalled.body["user_id"] == "alice" and journalled.body["saved"] is False
    assert stored(http, user_id="alice") == []

    result = await factory.end_session("alice", "assistant", "s1", wait=True)
    assert result is not None and result["exchanges"] == 1
    assert ACK not in stored(http, user_id="alice")
    assert stored(http, user_id="alice")  # the user's own statements
    assert (await factory.end_session("alice", "assistant", "s1", wait=True))["exchanges"] == 0


# --- invalid values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toggle", "value"),
    [
        ("TOP_K", "zero"),
        ("TOP_K", "0"),
        ("MODE", "sometimes"),
        ("SCOPE", "team"),
        ("ENABLED", "perhaps"),
        ("THRESHOLD", "1.5"),
        ("TOKEN_BUDGET", "-1"),
        ("TOOL_TOKEN_BUDGET", "lots"),
        ("TOOL_RESULT_MAX_BYTES", "100"),
        ("WRITE_PERMISSION", "maybe"),
        ("CAPTURE", "sometimes"),
        ("CAPTURE_INFER", "2"),
        ("CAPTURE_MODE", "sometimes"),
    ],
)
def test_an_invalid_toggle_fails_start_up_naming_the_variable(tmp_path, toggle, value):
    path = tmp_path / "client.yaml"
    path.write_text(config_yaml("http://127.0.0.1:9", key_file(tmp_path, "k")))
    with pytest.raises(ConfigError, match=re.escape(f"MEMORYSTORE_{toggle}={value!r}")):
        MemoryMiddlewareFactory.from_env(env_for(path, **{toggle: value}))


def test_an_invalid_file_value_names_the_field_not_a_variable(tmp_path):
    """The same check on a value from the file names the file and the field instead."""
    path = tmp_path / "client.yaml"
    path.write_text(config_yaml("http://127.0.0.1:9", key_file(tmp_path, "k"), mode="sometimes"))
    with pytest.raises(ConfigError, match=r"client\.yaml: mode: ") as caught:
        MemoryMiddlewareFactory.from_env(env_for(path))
    assert "MEMORYSTORE_" not in str(caught.value)
    # an env value for the same field replaces the bad one
    assert MemoryMiddlewareFactory.from_env(env_for(path, MODE="both")).cfg.mode == "both"


# --- one process, many users and runs -----------------------------------------------------

USERS = {
    "alice": "Alice wants her charts in dark mode.",
    "bob": "Bob wants his charts with a pastel palette.",
    "carol": "Carol wants her charts as stacked area charts.",
    "dave": "Dave wants his charts labelled in yen.",
}


async def test_concurrent_users_never_see_each_others_memories(make_factory, http):
    """One factory, four users replying at once: each model is sent only its user's memory."""
    for user, fact in USERS.items():
        seed(http, [fact], user_id=user)
    factory = make_factory({"mode": "static_control"}, SCOPE="user")

    async def run(user: str, session: str) -> tuple[str, str]:
        text = f"Draw {user} a bar chart of monthly sales."
        _, model, _ = await chat(factory, text, [f"Chart for {user}."], user=user, session=session)
        (call,) = model.calls
        return user, "\n".join(call.texts()).lower()

    for session in ("s1", "s2"):
        runs = [run(user, session) for user in USERS for _ in range(2)]
        for user, sent in await asyncio.gather(*runs):
            assert USERS[user].lower() in sent, f"{user} did not recall their own memory"
            others = [o for o in USERS if o != user and (o in sent or USERS[o].lower() in sent)]
            assert others == [], f"{user}'s model was sent {others}'s memory"
            if session == "s2":
                assert f"- draw {user} a bar chart" in sent, "s1's write-back, recalled"

    for user in USERS:  # every write-back went to the user whose run it was
        memories = " ".join(stored(http, user_id=user)).lower()
        assert [o for o in USERS if o in memories] == [user]


class Recorder:
    """Wraps the factory to keep every middleware it hands out."""

    def __init__(self, factory: MemoryMiddlewareFactory) -> None:
        self.factory = factory
        self.made: list[Any] = []

    async def __call__(self, *args: Any) -> list[Any]:
        middlewares = await self.factory(*args)
        self.made.extend(middlewares)
        return middlewares

    async def drain(self) -> None:
        await self.factory.drain()


async def test_a_hundred_runs_share_one_client_and_a_handful_of_connections(
    service, make_factory, http
):
    """Every run's middleware uses the factory's one client, so its keep-alive pool is reused.

    No RecordingTransport here: a custom transport brings its own pool, and it is the
    client's own pool that is under test.
    """
    host, port = urlsplit(service.url).hostname, urlsplit(service.url).port
    with FaultProxy(host, port) as proxy:
        factory = make_factory({"mode": "static_control"}, endpoint=proxy.url)
        recorder = Recorder(factory)
        recalls = 0
        for run in range(100):
            user, session = f"user-{run % 10}", f"s{run // 10}"
            _, model, _ = await chat(recorder, REQUEST, ["Done."], user=user, session=session)  # type: ignore[arg-type]
            recalls += bool(memory_lines(model.calls[0]))
        assert len(recorder.made) == 100
        assert all(mw.client is factory.client for mw in recorder.made)
        # real traffic went through: every run after a user's first recalled its write-back
        assert recalls == 90
        for user in range(10):
            assert stored(http, user_id=f"user-{user}") == sorted([REQUEST, "Done."])
        assert proxy.connections <= 2, f"{proxy.connections} connections for ~200 requests"
