"""What a session keeps of the user's words without a model: their own statements
(`rules/statements.py`, used by session consolidation)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorystore.rules.statements import statements


def said(*texts: str, role: str = "user") -> list[dict]:
    return [{"role": role, "content": t} for t in texts]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("I live in Hangzhou.", ["I live in Hangzhou."]),
        (
            "We moved to Shanghai last week. Can you recommend a mover?",
            ["We moved to Shanghai last week."],
        ),
        ("My favourite editor is Neovim", ["My favourite editor is Neovim"]),
        (
            "Please make my charts in dark mode by default.",
            ["Please make my charts in dark mode by default."],
        ),
        ("我住在杭州。", ["我住在杭州。"]),
        ("我们上周搬到上海了。你能推荐个搬家公司吗？", ["我们上周搬到上海了。"]),
        ("Draw me a bar chart of monthly sales.", []),
        ("Can you help me with my report?", []),
        ("What's the weather like?", []),
        ("Thanks!", []),
        ("好的", []),
        ("帮我画一张柱状图", []),
        ("我应该去哪里吃饭呢", []),
        ("The report is due Friday.", []),  # no first person: not about the user
    ],
)
def test_statements_are_kept_questions_requests_and_acks_are_not(text, kept):
    assert statements(said(text)) == kept


def test_assistant_replies_are_never_statements():
    assert statements(said("Got it, I will remember you live in Hangzhou.", role="assistant")) == []


def test_a_repeat_within_the_session_is_kept_once():
    assert statements(said("I live in Hangzhou.", "I live in Hangzhou.")) == ["I live in Hangzhou."]


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]), st.text()), max_size=6))
def test_statements_are_sentences_the_user_wrote(messages):
    found = statements([{"role": r, "content": c} for r, c in messages])
    users = " ".join(c for r, c in messages if r == "user")
    assert all(s and s in users for s in found)
    assert len(found) == len(set(found))
