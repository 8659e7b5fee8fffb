"""One definition of the scripts (`rules/scripts.py`): named ranges of assigned letters, the
composites built from them, and the readers that use them."""

from __future__ import annotations

import unicodedata

import pytest

from memorystore.recall import estimate_tokens
from memorystore.rules import scripts
from memorystore.rules.dedup import normalise
from memorystore.rules.supersede import Frame, frame
from memorystore.service.retrieval.language_means import language


def code_points(body: str) -> set[int]:
    """The code points of a class body written as "a-b" ranges."""
    assert len(body) % 3 == 0
    out: set[int] = set()
    for i in range(0, len(body), 3):
        assert body[i + 1] == "-" and body[i] <= body[i + 2], body[i : i + 3]
        out |= set(range(ord(body[i]), ord(body[i + 2]) + 1))
    return out


@pytest.mark.parametrize("name", scripts.__all__)
def test_every_class_holds_only_assigned_letters(name: str):
    categories = {unicodedata.category(chr(c)) for c in code_points(getattr(scripts, name))}
    assert categories <= {"Lo", "Lm", "Nl"}, categories  # no unassigned, mark or punctuation


def test_the_composites_are_unions_of_the_named_ranges():
    han = code_points(scripts.HAN)
    assert han == code_points(
        scripts.HAN_UNIFIED
        + scripts.HAN_EXTENSION_A
        + scripts.HAN_COMPATIBILITY
        + scripts.HAN_EXTENSIONS_B_TO_G
        + scripts.HAN_COMPATIBILITY_SUPPLEMENT
    )
    letters = code_points(scripts.CJK_LETTERS)
    assert letters == han | code_points(scripts.KANA_LETTERS + scripts.IDEOGRAPHIC_MARKS)
    assert code_points(scripts.TOKEN_PER_CHARACTER) == letters | code_points(
        scripts.HANGUL_SYLLABLES + scripts.HALFWIDTH_KATAKANA
    )
    assert {"杭", "㐀", "𠀀", "豈"} <= {chr(c) for c in han}
    assert not {"か", "カ", "한", "々", "。"} & {chr(c) for c in han}


def test_the_readers_share_the_definition():
    # Han of any plane makes a text Chinese for the language means and for supersession
    assert language("𠀀𠀁 and more") == language("我住在杭州") == "zh"
    assert language("ひらがなだけ") == "en"
    assert frame("我叫张𠀀") == Frame("name", "张𠀀")
    # de-duplication reads kana and Han as CJK letters, one token per character
    assert normalise("ひらがなabc") == "ひらがな abc"
    # the token estimate counts a token per character of Han, kana, Hangul
    assert [estimate_tokens(t) for t in ("こんにちは", "안녕하세요", "ｶﾀｶﾅ", "𠀀𠀁")] == [
        5,
        5,
        4,
        2,
    ]
