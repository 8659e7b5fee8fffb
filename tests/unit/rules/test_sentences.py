"""One sentence splitter (`rules/sentences.py`) in its two readings, and the one lexicon loader
(`rules/lexicon.py`) with its data files."""

from __future__ import annotations

import json

import pytest

from memorystore.rules import lexicon
from memorystore.rules.sentences import sentences, split


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I use node.js. I live in Hangzhou…and more",
            ["I use node.js.", "I live in Hangzhou…", "and more"],
        ),
        ("我住在杭州。我喜欢茶！真的吗？", ["我住在杭州。", "我喜欢茶！", "真的吗？"]),
        ("Python 3.11 is out.\nNext line; last", ["Python 3.11 is out.", "Next line;", "last"]),
        ("  ", []),
    ],
)
def test_a_memory_text_ends_a_sentence_at_a_dot_only_before_a_space(text, expected):
    assert sentences(text) == expected


def test_the_every_dot_reading_cuts_at_each_dot_keeps_the_ellipsis_and_eats_the_spaces():
    assert split("I use node.js daily. Hi…there", every_dot=True) == [
        "I use node.",
        "js daily.",
        "Hi…there",
    ]
    assert split("a.\n\n b", every_dot=True) == ["a.", "b"]
    assert split("x\n  and I'm y", every_dot=True) == ["x", "  and I'm y"]


def test_words_is_the_one_word_list_helper():
    assert lexicon.words(" a b\n c  ") == frozenset({"a", "b", "c"})
    assert lexicon.words("new york| paris |", "|") == frozenset({"new york", "paris"})


@pytest.mark.parametrize("path", sorted(lexicon.FOLDER.iterdir()), ids=lambda p: p.name)
def test_every_lexicon_file_loads_with_unique_entries(path):
    if path.suffix == ".json":
        table = lexicon.table(path.stem)
        assert table and all(isinstance(v, str) for v in table.values())
        assert json.loads(path.read_text(encoding="utf-8")) == dict(table)
        return
    assert path.suffix == ".txt"
    lines = [
        line.strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert lines and lines == list(lexicon.entries(path.stem)), "an entry is listed twice"
    if path.stem != "acknowledgements":
        assert all("  " not in line for line in lines)  # one entry a line, no columns


def test_the_acknowledgements_say_which_readers_use_each_entry():
    readers = {"statements", "trivial", "value_end", "dedup"}
    for line in lexicon.entries("acknowledgements"):
        entry, _, used_by = line.partition("  ")
        assert entry and set(used_by.split()) <= readers and used_by.split(), line
    # de-duplication compares the entries as words: they must be plain text
    assert all(e.replace(" ", "").isalnum() for e in lexicon.tagged("acknowledgements", "dedup"))
    counts = {r: len(lexicon.tagged("acknowledgements", r)) for r in sorted(readers)}
    assert counts == {"dedup": 40, "statements": 58, "trivial": 28, "value_end": 3}
