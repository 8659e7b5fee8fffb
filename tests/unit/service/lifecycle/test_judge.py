"""The model-as-judge of outdated memories: its prompt and the strict reading of its answer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorystore.service.lifecycle.judge import (
    JUDGE_HEADER,
    JudgeError,
    Verdict,
    judge,
    listed,
    parse,
    prompt,
)

NEW = [("n1", "Lives in Shanghai"), ("n2", "Works at Tencent")]
OLD = [("o1", "Lives in Hangzhou"), ("o2", "Works at a fintech startup"), ("o3", "Likes hiking")]


def test_the_prompt_numbers_memories_and_never_shows_ids():
    system, user = prompt(NEW, OLD)
    assert system["role"] == "system" and system["content"].startswith(JUDGE_HEADER)
    assert user["content"].splitlines() == [
        "NEW facts:",
        "1. Lives in Shanghai",
        "2. Works at Tencent",
        "",
        "EXISTING memories:",
        "1. Lives in Hangzhou",
        "2. Works at a fintech startup",
        "3. Likes hiking",
    ]
    assert not any(i in user["content"] for i, _ in NEW + OLD)


def test_verdicts_map_back_to_ids():
    answer = {
        "outdated": [
            {"existing": 1, "by": 1, "reason": "moved"},
            {"existing": 2, "by": 2},
            {"existing": 1, "by": 2, "reason": "a second verdict on one memory is ignored"},
        ]
    }
    assert parse(json.dumps(answer), NEW, OLD) == [
        Verdict("o1", "n1", "moved"),
        Verdict("o2", "n2", "outdated by a new fact"),
    ]


def test_a_fenced_answer_is_read():
    fenced = '```json\n{"outdated": [{"existing": 3, "by": 1, "reason": "x"}]}\n```'
    assert parse(fenced, NEW, OLD) == [Verdict("o3", "n1", "x")]


@pytest.mark.parametrize(
    "answer", ["", "not json", "[]", '{"outdated": 1}', '{"memory": []}', "null"]
)
def test_an_answer_that_is_not_the_json_asked_for_is_an_error(answer):
    with pytest.raises(JudgeError):
        parse(answer, NEW, OLD)


def test_nothing_to_compare_asks_no_model():
    def never(_: list[dict]) -> str:
        raise AssertionError("no call expected")

    assert judge(never, NEW, []) == [] and judge(never, [], OLD) == []


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 6) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
_entry = st.fixed_dictionaries(
    {"existing": _json | st.integers(-2, 6), "by": _json | st.integers(-2, 4)},
    optional={"reason": _json},
)


_same = st.fixed_dictionaries({"new": _json | st.integers(-2, 4), "existing": _json})


@given(
    st.one_of(
        _json,
        st.fixed_dictionaries(
            {"outdated": st.lists(_entry | _json)}, optional={"same": st.lists(_same | _json)}
        ),
    )
)
def test_any_answer_yields_only_listed_ids_or_a_judge_error(answer):
    """Whatever a model says, only memories that were listed can be retired, each once."""
    try:
        verdicts = parse(json.dumps(answer), NEW, OLD)
    except (JudgeError, ValueError):
        return  # ValueError: json.dumps of NaN is fine, but some floats are not JSON
    assert {v.old_id for v in verdicts} <= {i for i, _ in OLD}
    assert {v.new_id for v in verdicts} <= {i for i, _ in NEW}
    outdated = [v.old_id for v in verdicts if v.kind == "outdated"]
    repeats = [v.new_id for v in verdicts if v.kind == "same"]
    assert len(set(outdated)) == len(outdated) and len(set(repeats)) == len(repeats)
    # a repeat is dropped: nothing it says retires a memory
    assert not {v.new_id for v in verdicts if v.kind == "outdated"} & set(repeats)
    assert all(isinstance(v.reason, str) and len(v.reason) <= 200 for v in verdicts)


def test_a_repeat_is_reported_and_retires_nothing():
    answer = {
        "same": [{"new": 2, "existing": 2}, {"new": 9, "existing": 1}],
        "outdated": [{"existing": 1, "by": 2, "reason": "from a repeat: ignored"}],
    }
    assert parse(json.dumps(answer), NEW, OLD) == [Verdict("o2", "n2", "said before", "same")]


def test_listed_reads_back_what_prompt_lists():
    """The stand-in models read the listing with `listed`: it must be prompt's inverse."""
    _, user = prompt(NEW, OLD)
    assert listed(user["content"]) == ([t for _, t in NEW], [t for _, t in OLD])
