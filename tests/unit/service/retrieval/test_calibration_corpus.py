"""The language-calibration corpus is well formed, in the right languages and independent.

Why: the service subtracts each language's mean embedding, computed from this corpus, to remove
the embedding model's language bias. A sentence in the wrong group shifts that mean towards the
other language, and a corpus that borrows from the benchmark data would let the correction be
tuned on the very texts the multilingual benchmark scores.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from typing import Any

from memorystore.rules import scripts
from support.paths import REPO

ROOT = REPO
CORPUS_PATH = ROOT / "service/retrieval/calibration.json"
BENCH_PATH = ROOT / "dev/memorystore_dev/bench/multilingual_data.json"

GROUPS = ("zh", "mixed", "en")
MIN_COUNTS = {"zh": 240, "mixed": 120, "en": 300}
MIN_CJK_SHARE = 0.6
CHINESE_CHARS = (6, 60)
ENGLISH_WORDS = (4, 30)
# the longest run a corpus sentence may share with a benchmark text, plus one
CHAR_RUN = 8
WORD_RUN = 5

CJK = re.compile(f"[{scripts.HAN}]")
LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


@cache
def load() -> dict[str, Any]:
    """The corpus, parsed once per session."""
    return json.loads(CORPUS_PATH.read_text(encoding="utf-8"))


@cache
def bench_texts() -> tuple[str, ...]:
    """Every memory and query text of the benchmark data set."""
    data = json.loads(BENCH_PATH.read_text(encoding="utf-8"))
    texts = [memory["text"] for user in data["users"] for memory in user["memories"]]
    texts += [query["text"] for query in data["queries"]]
    return tuple(text.strip() for text in texts)


def sentences() -> list[tuple[str, str]]:
    """Every corpus sentence with the group it belongs to."""
    return [(group, text) for group in GROUPS for text in load()[group]]


def char_runs(text: str) -> set[str]:
    """All substrings of CHAR_RUN characters."""
    return {text[i : i + CHAR_RUN] for i in range(len(text) - CHAR_RUN + 1)}


def word_runs(text: str) -> set[tuple[str, ...]]:
    """All runs of WORD_RUN consecutive lower-cased words."""
    words = WORD.findall(text.lower())
    return {tuple(words[i : i + WORD_RUN]) for i in range(len(words) - WORD_RUN + 1)}


def test_schema() -> None:
    """The service reads exactly these keys; anything else is a typo that would be ignored."""
    data = load()
    assert set(data) == {"name", "version", "description", "licence", *GROUPS}, sorted(data)
    assert data["name"] == "memorystore-language-calibration"
    assert data["version"] == 1
    for key in ("description", "licence"):
        assert isinstance(data[key], str) and data[key].strip(), key
    for group in GROUPS:
        assert isinstance(data[group], list), group
        for text in data[group]:
            assert isinstance(text, str) and text == text.strip() and text, (group, text)


def test_counts() -> None:
    """A mean over too few sentences captures their topics, not the language."""
    for group, minimum in MIN_COUNTS.items():
        assert len(load()[group]) >= minimum, f"{group}: {len(load()[group])} < {minimum}"


def test_lengths() -> None:
    """Sentences stay within the length of typical memories, so no single one dominates."""
    low, high = CHINESE_CHARS
    for group, text in sentences():
        if group == "en":
            words = len(text.split())
            assert ENGLISH_WORDS[0] <= words <= ENGLISH_WORDS[1], f"{words} words: {text!r}"
        else:
            assert low <= len(text) <= high, f"{group}: {len(text)} characters: {text!r}"


def test_zh_is_chinese() -> None:
    """The Chinese mean must come from text that is mostly Han characters."""
    for text in load()["zh"]:
        letters = sum(ch.isalpha() for ch in text)
        share = len(CJK.findall(text)) / letters if letters else 0.0
        assert share >= MIN_CJK_SHARE, f"CJK share {share:.2f} in {text!r}"


def test_mixed_is_code_switched() -> None:
    """Mixed text counts as Chinese in the service, so it needs Han characters and Latin words."""
    for text in load()["mixed"]:
        assert CJK.search(text), f"no Han characters: {text!r}"
        assert LATIN_WORD.search(text), f"no Latin word: {text!r}"


def test_en_has_no_han() -> None:
    """Any Han character would route the text to the Chinese mean instead."""
    for text in load()["en"]:
        assert not CJK.search(text), f"Han characters in English text: {text!r}"


def test_no_duplicates() -> None:
    """A repeated sentence silently weighs twice in the mean."""
    counts = Counter(text for _, text in sentences())
    duplicates = sorted(text for text, n in counts.items() if n > 1)
    assert not duplicates, duplicates


def test_independent_of_benchmark_verbatim() -> None:
    """Calibrating on benchmark texts would flatter the benchmark score."""
    bench = set(bench_texts())
    reused = [text for _, text in sentences() if text in bench]
    assert not reused, reused


def test_independent_of_benchmark_fragments() -> None:
    """Close paraphrases leak benchmark content too, so shared long runs are not allowed."""
    bench_chars = set().union(*(char_runs(text) for text in bench_texts()))
    bench_words = set().union(*(word_runs(text) for text in bench_texts()))
    shared: list[tuple[str, Any]] = []
    for group, text in sentences():
        if group == "en":
            overlap: set[Any] = word_runs(text) & bench_words
        else:
            overlap = char_runs(text) & bench_chars
        if overlap:
            shared.append((text, sorted(overlap)))
    assert not shared, shared
