"""`memorystore demo`: a real agent, the real middleware and service; memory crosses sessions.

The demo runs in-process on the embedded default with the scripted stand-in model (no
provider key here). The checks read what it printed: session 2's recall hint holds what
session 1 taught, and the stand-in's answer, built from what reached it, uses it.
"""

from __future__ import annotations

import pytest
from agentscope.model import DashScopeChatModel, OpenAIChatModel

from memorystore.demo import SCRIPTED_NOTICE, SCRIPTS, chat_model, run_demo, scripted_session2
from memorystore.middleware.memory import HINT_HEADER
from memorystore.scripted_model import ToolCall

pytestmark = pytest.mark.timeout(120)

PROVIDER_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DASHSCOPE_API_KEY",
    "DASHSCOPE_BASE_URL",
    "MEMORYSTORE_DEMO_MODEL",
)


@pytest.fixture(autouse=True)
def no_provider(monkeypatch):
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)


def session(out: str, name: str) -> str:
    """The printed block of one session, up to the next session or the final line."""
    start = out.index(f"== session {name} ")
    ends = [i for i in (out.find("== session", start + 1), out.find("\ndone:", start)) if i > 0]
    return out[start : min(ends)]


def block_after(text: str, header: str) -> list[str]:
    """The indented lines (4 spaces) right after the line starting with `header`."""
    lines = text.splitlines()
    (index,) = [i for i, line in enumerate(lines) if line.strip().startswith(header)]
    found = []
    for line in lines[index + 1 :]:
        if not line.startswith("    "):
            break
        found.append(line.strip())
    return found


@pytest.mark.parametrize(
    ("language", "facts", "dark"),
    [
        ("en", ("dark mode", "matplotlib", "Hangzhou"), "dark mode"),
        ("zh", ("深色模式", "matplotlib", "杭州"), "深色模式"),
    ],
)
def test_session_two_starts_empty_and_answers_from_session_one(capsys, language, facts, dark):
    assert run_demo(language) == 0
    out = capsys.readouterr().out
    script = SCRIPTS[language]

    assert SCRIPTED_NOTICE in out
    first, second = session(out, "s1"), session(out, "s2")

    # Session 1: nothing to recall yet; the agent saves the facts through its tool; the
    # finished exchange is journalled, and the session's end stores nothing more: the agent
    # saved its facts itself, and the reply (an echo of them) is never stored.
    assert "memory → context: nothing relevant stored yet" in first
    assert "tool call: add_memory" in first
    assert block_after(first, "tool result (add_memory, success)")[0].startswith("Saved 3 memories")
    assert "exchange journalled" in first
    assert "session s1 ended: 1 exchange(s), nothing new to remember" in first

    # Session 2: a new agent with an empty context; every fact comes back through recall.
    recalled = block_after(second, "memory → context")
    assert recalled and all(line.startswith("- ") for line in recalled)
    # each fact once: no user turn or assistant echo repeating it (issue 15's before: 5 lines)
    assert sorted(recalled) == sorted(f"- {fact}" for fact in script.facts)
    for fact in facts:
        assert any(fact in line for line in recalled), f"{fact!r} was not recalled"
    # the right memory first: a chart request recalls a chart preference, not where they live
    assert dark in recalled[0] or "matplotlib" in recalled[0], f"first recalled: {recalled[0]}"
    for fact in script.facts:
        assert f"- {fact}" in recalled  # what add_memory stored in session 1
    assert "tool call: search_memory" in second

    # The stand-in answers from what reached it: dark mode and matplotlib, from memory.
    answer = block_after(second, "assistant:")
    assert dark in answer[0] and "matplotlib" in answer[0]
    assert 'plt.style.use("dark_background")' in answer
    # a request is not a statement about the user: session 2 adds nothing to memory
    assert "session s2 ended: 1 exchange(s), nothing new to remember" in second

    # The steps appear in the order they happen.
    steps = ["memory → context", "tool call:", "tool result", "assistant:", "session s2 ended"]
    positions = [second.index(step) for step in steps]
    assert positions == sorted(positions)


def answer_to(messages: list[dict]) -> str:
    """What the session-2 stand-in answers after its search, given the messages it was sent."""
    search, answer = scripted_session2(SCRIPTS["en"])
    assert isinstance(search, ToolCall) and search.name == "search_memory"
    return answer(messages)


def test_the_stand_in_answer_depends_on_the_memory_it_was_sent():
    request = {"role": "user", "content": SCRIPTS["en"].session2}
    nothing = {"role": "tool", "content": "(no relevant memories found)"}
    plain = answer_to([request, nothing])
    assert "dark" not in plain and "(I know none of your preferences yet)" in plain

    hint = {"role": "user", "content": f"{HINT_HEADER}\n- The user wants charts in dark mode."}
    assert "dark mode as you prefer" in answer_to([request, hint, nothing])
    # a preference in the user's own request is not memory: it does not count
    asked = {"role": "user", "content": "matplotlib in dark mode please"}
    assert "dark" not in answer_to([asked, nothing])


def test_model_selection_without_a_key_uses_the_stand_in():
    model, line = chat_model()
    assert model is None and line.startswith(SCRIPTED_NOTICE)


def test_model_selection_openai_honours_base_url_and_model(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MEMORYSTORE_DEMO_MODEL", "my-model")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-other")  # OpenAI wins when both are set
    model, line = chat_model()
    assert isinstance(model, OpenAIChatModel)
    assert model.model == "my-model"
    assert str(model.client.base_url).rstrip("/") == "http://127.0.0.1:9/v1"
    assert model.client.api_key == "sk-test"
    assert "OpenAIChatModel 'my-model'" in line and "sk-test" not in line


def test_model_selection_dashscope_defaults_to_qwen_plus(monkeypatch):
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    model, line = chat_model()
    assert isinstance(model, DashScopeChatModel)
    assert model.model == "qwen-plus"
    assert "dashscope.aliyuncs.com/compatible-mode/v1" in str(model.client.base_url)
    assert model.client.api_key == "sk-ds"
    assert "sk-ds" not in line
