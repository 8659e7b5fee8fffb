"""The keyword tokenizer on CJK, Latin, mixed-script and emoji text (`retrieval/lexical.py`).

Terms are hashed by the engine, so each case compares the terms of two texts: a query matches
a memory when it shares a term with it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorystore.service.retrieval.lexical import encoder, terms
from memorystore.spec import LexicalTokenizer

ML = LexicalTokenizer.MULTILINGUAL
WORD = LexicalTokenizer.WORD


def matches(query: str, memory: str, tokenizer: LexicalTokenizer = ML) -> bool:
    return bool(terms(query, tokenizer) & terms(memory, tokenizer))


@pytest.mark.parametrize(
    ("query", "memory"),
    [
        ("杭州", "我住在杭州"),  # Chinese segmented into words
        ("杭州", "用户住在杭州西湖区，骑车上班。"),
        ("乌龙茶", "用户喜欢喝无糖的乌龙茶"),
        ("matplotlib", "用matplotlib画图"),  # mixed script split at the script boundary
        ("画图", "用matplotlib画图"),
        ("OKR", "周五之前要把Q3的OKR发给Tom"),
        ("tom", "周五之前要把Q3的OKR发给Tom"),  # case-folded
        ("running", "She runs every morning"),  # English stemming
        ("Hangzhou", "I live in Hangzhou."),
        ("爬山", "周末去爬山了🏔️"),  # an emoji beside CJK text
    ],
)
def test_a_word_of_the_memory_matches_it(query: str, memory: str):
    assert matches(query, memory), f"{query!r} should match {memory!r}"


@pytest.mark.parametrize(
    ("query", "memory"),
    [
        ("上海", "我住在杭州"),
        ("python", "用matplotlib画图"),
        ("the", "the user lives in Hangzhou"),  # English stopword
        ("的", "用户喜欢喝无糖的乌龙茶"),  # Chinese stopword
        ("🏔️", "周末去爬山了🏔️"),  # an emoji alone is no term
    ],
)
def test_unrelated_words_and_stopwords_do_not_match(query: str, memory: str):
    assert not matches(query, memory), f"{query!r} should not match {memory!r}"


def test_the_word_tokenizer_keeps_a_cjk_run_whole():
    """Why the default changed: with `word`, "杭州" never finds "我住在杭州"."""
    assert not matches("杭州", "我住在杭州", WORD)
    assert matches("杭州", "我住在杭州", ML)
    assert matches("Hangzhou", "I live in Hangzhou.", WORD)


def test_empty_and_symbol_only_text_has_no_terms():
    for text in ("", "   ", "🙂🙂", "！？。，", "---"):
        assert terms(text, ML) == frozenset(), repr(text)


def test_one_encoder_per_tokenizer():
    assert encoder(ML) is encoder(ML)
    assert encoder(ML) is not encoder(WORD)


@given(st.text(max_size=200))
def test_any_text_tokenises_and_a_query_matches_its_own_text(text: str):
    """Generated text of every script, emoji and control characters included: never an error,
    and a text with terms always matches itself (document and query sides agree)."""
    found = terms(text, ML)
    vector = encoder(ML).embed_document(text) if text else None
    if vector is not None:
        assert frozenset(vector.indices) == found
    if found:
        assert matches(text, text)
