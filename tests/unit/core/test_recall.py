"""Packing recalled memories into a token budget."""

from __future__ import annotations

from memorystore.recall import ELLIPSIS, clip, estimate_tokens, pack


def mem(text: str, score: float) -> dict:
    return {"memory": text, "score": score}


def test_token_estimate_counts_cjk_per_character_and_words_by_length():
    assert estimate_tokens("我住在杭州") == 5
    assert estimate_tokens("dark mode") == 1 + 1
    assert estimate_tokens("matplotlib") == 3  # ceil(10 / 4)
    assert estimate_tokens("a, b.") == 4
    assert estimate_tokens("") == 0


def test_best_first_whole_memories_under_budget():
    memories = [mem("low score fact", 0.4), mem("best fact here", 0.9), mem("middle fact", 0.6)]
    packed = pack(memories, token_budget=1000, max_memory_chars=100)
    assert packed.context.splitlines() == ["- best fact here", "- middle fact", "- low score fact"]
    assert packed.tokens == sum(estimate_tokens(line) for line in packed.context.splitlines())


def test_budget_drops_what_does_not_fit_and_keeps_smaller_ones():
    big = "word " * 40
    memories = [mem("tiny", 0.9), mem(big, 0.8), mem("also small", 0.7)]
    packed = pack(memories, token_budget=10, max_memory_chars=1000)
    assert [m["memory"] for m in packed.memories] == ["tiny", "also small"]
    assert packed.dropped == 1
    assert packed.tokens <= 10


def test_best_first_and_zero_budget_injects_nothing():
    memories = [mem("lower", 0.1), mem("higher", 0.5)]
    assert [m["memory"] for m in pack(memories, 100, 100).memories] == ["higher", "lower"]
    assert pack(memories, 0, 100).context == ""


def test_clip_marks_the_cut():
    assert clip("x" * 50, 10) == "x" * 9 + ELLIPSIS
    assert clip("  a \n b  ", 10) == "a b"


def test_token_estimate_counts_kana_and_hangul_per_character_too():
    # one token per character of `rules.scripts.TOKEN_PER_CHARACTER`, any plane
    assert estimate_tokens("こんにちは") == 5
    assert estimate_tokens("안녕하세요") == 5
    assert estimate_tokens("我用Python画图") == 2 + 2 + 2  # 我用, ceil(6 / 4), 画图
