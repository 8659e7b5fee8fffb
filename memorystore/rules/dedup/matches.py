"""The named de-duplication rules: when a new text repeats an old one, and which to keep.

Why named, with examples: the name is what an answer reports (`Duplicate.rule`), and each
rule's examples show the repeats it is for and the changes of value it must not take for one;
a plain edit distance or token overlap is unsafe ("cats"/"bats", "深色"/"浅色", "Bob reports to
Alice"), so each rule is narrower than its name suggests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rapidfuzz.distance import OSA, Levenshtein

from memorystore.rules.dedup.text import (
    CJK_HEDGES,
    CJK_NEGATION,
    CN_NUMBER,
    HEDGES,
    JOINERS,
    NEGATIONS,
    NOT_TYPOS,
    Text,
)

__all__ = [
    "CONTAINED",
    "CONTAINS",
    "EXACT",
    "GUARDED",
    "JACCARD",
    "LEVENSHTEIN",
    "RULES",
    "NamedRule",
    "Rules",
]


@dataclass(frozen=True)
class Rules:
    """Rules of the cascade (defaults = the measured, shipped values).

    - `jaccard`: least Jaccard similarity of the cores' unigrams and bigrams for a block
      move. A move to the start or end of an n-token text scores 1 - 1/n, one inside it
      (2n - 3) / (2n + 1): 0.7 rejects the moves in short texts, where order is most of the
      meaning ("Bob, Alice likes": 0.67), and accepts "On weekends, I go hiking" (0.8).
    - `levenshtein`: least character similarity of the cores for the typo rule; 0.8 lets
      one typo through in a two-word text of ten characters ("love suhsi") but not in a
      single word ("suhsi").
    - `short_chars`: texts up to this many normalised characters get the typo allowance;
      longer ones, usually written by an extractor that spells consistently, only match
      with equal cores (where every extra word is one more chance of a real-word pair such
      as trail/trial).
    """

    jaccard: float = 0.7
    levenshtein: float = 0.8
    short_chars: int = 100


def _keys_adjacent() -> frozenset[tuple[str, str]]:
    rows = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
    pairs: set[tuple[str, str]] = set()
    for r, row in enumerate(rows):
        for i, ch in enumerate(row):
            near = [row[i - 1 : i], row[i + 1 : i + 2]]
            if r > 0:
                near += [rows[r - 1][i : i + 2]]
            if r < 2:
                near += [rows[r + 1][max(i - 1, 0) : i + 1]]
            pairs.update((ch, k) for ks in near for k in ks)
    return frozenset(pairs | {(k, ch) for ch, k in pairs})


_ADJACENT_KEYS = _keys_adjacent()


def _typo(a: str, b: str) -> bool:
    """One word is a slip of the keyboard on the other, of the kinds that seldom make
    another real word: two neighbouring letters swapped ("suhsi"; 5+ letters, not the
    first letter: "alter"/"later"), a letter doubled or undoubled ("sushii", "adress"; 6+
    letters), or a letter replaced by its neighbour on the keyboard inside a long word
    ("definitrly"; 8+ letters, neither the first nor the last letter). Other single edits
    are too often another word: "tea"/"team", "sister"/"sisters", "smoke"/"smoked",
    "typical"/"atypical", "presented"/"prevented", "generated"/"generates". Numbers,
    number words and negations are never typos."""
    la, lb = len(a), len(b)
    if min(la, lb) < 5 or a in NOT_TYPOS or b in NOT_TYPOS:
        return False
    if not (a.isalpha() and b.isalpha()) or OSA.distance(a, b, score_cutoff=1) != 1:
        return False
    if la != lb:
        long, short = (a, b) if la > lb else (b, a)
        i = next((i for i, (x, y) in enumerate(zip(short, long, strict=False)) if x != y), la)
        i = min(i, len(short))  # the inserted letter is long[i]
        return i > 0 and len(long) >= 6 and long[i] == long[i - 1]
    i = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    if a[i + 1 : i + 2] == b[i : i + 1] and a[i] == b[i + 1 : i + 2]:  # swapped
        return i > 0
    return la >= 8 and 0 < i < la - 1 and (a[i], b[i]) in _ADJACENT_KEYS


def _split(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """`b` is `a` with one word written as two ("darkmode" / "dark mode")."""
    if len(b) != len(a) + 1:
        return False
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return (
        i < len(a)
        and b[i].isalpha()
        and b[i + 1].isalpha()
        and a[i] == b[i] + b[i + 1]
        and a[i + 1 :] == b[i + 2 :]
    )


def _near_equal(a: Text, b: Text, rules: Rules) -> bool:
    """Equal cores, or cores that differ by one typo or one split word."""
    if a.core == b.core:
        return True
    if len(a.core) == len(b.core):
        if max(len(a.norm), len(b.norm)) > rules.short_chars:
            return False
        diff = [i for i, (x, y) in enumerate(zip(a.core, b.core, strict=True)) if x != y]
        if len(diff) != 1 or not _typo(a.core[diff[0]], b.core[diff[0]]):
            return False
    elif not (_split(a.core, b.core) or _split(b.core, a.core)):
        return False
    sim = Levenshtein.normalized_similarity(" ".join(a.core), " ".join(b.core))
    return sim >= rules.levenshtein


def _within(short: Text, long: Text) -> bool:
    """`short`'s core is a run of `long`'s that starts a clause and ends one (or stops
    before a joining word), and the rest of `long` does not hedge it (`HEDGES`)."""
    s, lc = short.core, long.core
    k, n = len(s), len(lc)
    if k < 3 or k >= n:
        return False
    first = s[0]
    for i in range(n - k + 1):
        if lc[i] != first or not long.brk[i] or lc[i : i + k] != s:
            continue
        j = i + k
        if j == n or long.brk[j] or lc[j] in JOINERS:
            rest = lc[:i] + lc[j:]
            return not (HEDGES.intersection(rest) or CJK_HEDGES.search("".join(rest)))
    return False


def _moved(a: Text, b: Text, rules: Rules) -> bool:
    """One core is the other with two adjacent blocks swapped at clause boundaries."""
    x, y = a.core, b.core
    n = len(x)
    if n != len(y) or x == y or sorted(x) != sorted(y):
        return False
    p = 0
    while x[p] == y[p]:
        p += 1
    e = n
    while x[e - 1] == y[e - 1]:
        e -= 1
    mx, my = x[p:e], y[p:e]
    m = e - p
    for k in range(1, m):
        if mx[k:] + mx[:k] != my:
            continue
        if any(_negation(t) or t in NOT_TYPOS or _has_digit(t) or CN_NUMBER.match(t) for t in mx):
            return False
        cut_a = (p == 0 or a.brk[p]) and a.brk[p + k] and (e == n or a.brk[e])
        cut_b = (p == 0 or b.brk[p]) and b.brk[p + m - k] and (e == n or b.brk[e])
        if not (cut_a or cut_b):
            return False
        ga, gb = _grams(x), _grams(y)
        return len(ga & gb) / len(ga | gb) >= rules.jaccard
    return False


def _grams(core: tuple[str, ...]) -> set[tuple[str, ...]]:
    """A core's unigrams and bigrams."""
    return {*((t,) for t in core), *itertools.pairwise(core)}


def _negation(tok: str) -> bool:
    return tok in NEGATIONS or tok.endswith("n't") or CJK_NEGATION.match(tok) is not None


def _has_digit(tok: str) -> bool:
    return any(ch.isdigit() for ch in tok)


@dataclass(frozen=True)
class NamedRule:
    """A rule of the cascade: its name is reported in `Duplicate.rule` (and so in API answers:
    never rename one), `keep` which text survives, `prefer` its rank among the matches of
    several candidates (lowest first), `holds` the test on the analysed (new, old) texts."""

    name: str
    keep: Literal["old", "new"]
    prefer: int
    holds: Callable[[Text, Text, Rules], bool]
    positives: tuple[tuple[str, str], ...]  # (new, old) pairs the rule holds for
    negatives: tuple[tuple[str, str], ...]  # (new, old) pairs it must not hold for


EXACT = NamedRule(
    "exact",
    "old",
    0,
    # equal normalised texts: the only rule the guards do not veto (equal texts have equal
    # numbers and negations)
    lambda a, b, rules: a.norm == b.norm,
    positives=(
        ("I live in Hangzhou.", "i live in hangzhou"),
        ("Ｉ　ＬＩＫＥ　ＴＥＡ！", "I like tea"),
        ("Prefers dark mode for charts", "Prefers dark-mode for charts"),
        ("我用 Python 写代码", "我用Python写代码"),
    ),
    negatives=(
        ("I live in Hangzhou", "I live in Shanghai"),
        ("Battery at 50%", "Battery at 50"),
        ("I really like green tea", "I like green tea"),
    ),
)
LEVENSHTEIN = NamedRule(
    "levenshtein",
    "old",
    1,
    # equal cores, or cores equal but for one keyboard slip or one word written as two
    _near_equal,
    positives=(
        ("I love sushi", "I love suhsi"),
        ("I prefer darkmode", "I prefer dark mode"),
        ("I do not like tea", "I don't like tea"),
        ("我的图表默认用深色模式", "我的图表默认使用深色模式"),
        (
            "As I said, I live in Hangzhou and I love hiking.",
            "I live in Hangzhou and I love hiking.",
        ),
    ),
    negatives=(
        ("I like cats", "I like bats"),
        ("I live in Hangzou", "I live in Hangzhou"),
        ("suhsi", "sushi"),
        ("I work in data protection", "I work in data projection"),
    ),
)
CONTAINED = NamedRule(
    "contained",
    "old",
    2,
    # the new core is a whole clause-run of the old one, which the rest does not hedge
    lambda a, b, rules: _within(a, b),
    positives=(
        ("I live in Hangzhou", "I live in Hangzhou, near West Lake"),
        ("用matplotlib画图", "用matplotlib画图，配色用深色"),
    ),
    negatives=(
        ("I like tea", "I like tea ceremonies"),
        ("I stay home", "If it rains, I stay home"),
        ("lives in Paris", "My sister lives in Paris"),
        ("I like tea", "She said: I like tea"),
    ),
)
CONTAINS = NamedRule(
    "contains",
    "new",
    4,
    # the old core is a whole clause-run of the new one: the new says it and more
    lambda a, b, rules: _within(b, a),
    positives=(
        ("I live in Hangzhou, near West Lake", "I live in Hangzhou"),
        ("我住在杭州和上海", "我住在杭州"),
        ("I have 2 kids: Tom and Amy", "I have 2 kids"),
    ),
    negatives=(
        ("I like tea ceremonies", "I like tea"),
        ("If it rains, I stay home", "I stay home"),
        ("我喜欢猫头鹰", "我喜欢猫"),
    ),
)
JACCARD = NamedRule(
    "jaccard",
    "old",
    3,
    # the same tokens, a block moved at clause boundaries, similar enough
    _moved,
    positives=(
        ("Charts in dark mode by default", "By default, charts in dark mode"),
        ("On weekends, I go hiking", "I go hiking on weekends"),
        ("At work, I use Python", "I use Python at work"),
    ),
    negatives=(
        ("Bob reports to Alice", "Alice reports to Bob"),
        ("我周末去爬山", "周末我去爬山"),
        ("I moved to Berlin in 2020", "In 2020, I moved to Berlin"),
        ("I prefer tea over coffee", "I prefer coffee over tea"),
    ),
)
# the rules the guards veto, in the order they are tried
GUARDED = (LEVENSHTEIN, CONTAINED, CONTAINS, JACCARD)
RULES = (EXACT, *GUARDED)
