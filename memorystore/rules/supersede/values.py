"""Values as the rules compare them: normalised ("the Hangzhou now." -> "hangzhou"), and
compared so that two values count as different only when they surely are.

Why so careful: a value wrongly read as different retires a true memory. Values in different
scripts ("杭州" / "Hangzhou"), one containing the other ("Hangzhou" / "Hangzhou, China") or
a region and a city ("California" / "San Francisco") never count as different.
"""

from __future__ import annotations

import re
import unicodedata

from memorystore.rules import lexicon
from memorystore.rules.scripts import HAN
from memorystore.rules.supersede.text import HAS_HAN, KEEP_COMMA, QUOTES, SPACES

__all__ = [
    "ALIASES",
    "EN_PLACES",
    "EN_REGIONS",
    "LIST_MARK",
    "PRONOUN_VALUES",
    "ZH_PLACES",
    "ZH_TRAILING",
    "contains",
    "is_cjk",
    "is_region",
    "names",
    "norm",
    "overlap",
    "same",
]

EN_REGIONS = lexicon.word_set("regions.en")
EN_PLACES = EN_REGIONS | lexicon.word_set("cities.en")
_ZH_REGIONS = lexicon.word_set("regions.zh")
# longest first: the place a value starts with is the longest that fits
ZH_PLACES = tuple(sorted(lexicon.word_set("places.zh"), key=lambda p: (-len(p), p)))
PRONOUN_VALUES = lexicon.word_set("pronoun_values")
ALIASES = lexicon.table("aliases")

_ARTICLE = re.compile(r"^(?:the|a|an|my|our|some|this|that)\s+")
_EN_TRAILING = re.compile(
    r"(?:\s+(?:now|already|too|again|anymore|any more|instead|though|then|lol|haha|"
    r"these days|nowadays|currently|at the moment|right now))+$"
)
ZH_TRAILING = re.compile(r"(?:了|啦|呀|啊|哦|呢|吧|的|咯|喽|嘛|~|\.|。|！|!)+$")
_VALUE_JUNK = re.compile(r"[\s\"'“”‘’《》「」『』【】()（）<>*_~.。,，、!！?？]+$")
LIST_MARK = re.compile(r"\band\b|\bor\b|&|/|、|和|与|跟|及|以及|或者|或|" + KEEP_COMMA)
_HAN_GAP = re.compile(rf"(?<=[{HAN}])\s+(?=[{HAN}])")
_TOKEN = re.compile(rf"[a-z0-9]+|[{HAN}]")
_ZH_REGION_SUFFIX = re.compile(r"(?:省|地区|自治区)$")


def norm(value: str) -> str:
    """A value as compared: NFKC, casefolded, articles and particles stripped."""
    v = unicodedata.normalize("NFKC", value).casefold().replace(KEEP_COMMA, ",")
    v = QUOTES.sub(" ", v)
    v = SPACES.sub(" ", v).strip(" ,.;:!?'\"-")
    for _ in range(3):  # until nothing more comes off ("the ... now." -> "...")
        before = v
        v = _ARTICLE.sub("", v)
        v = _EN_TRAILING.sub("", v)
        v = ZH_TRAILING.sub("", v).strip()
        v = _VALUE_JUNK.sub("", v).strip(" ,.;:!?'\"-")
        if v == before:
            break
    # spaces between Chinese characters carry nothing
    v = _HAN_GAP.sub("", v)
    return ALIASES.get(v, v)


def is_cjk(value: str) -> bool:
    return bool(HAS_HAN.search(value))


def _tokens(value: str) -> list[str]:
    return _TOKEN.findall(value)


def contains(big: str, small: str) -> bool:
    """`big` says at least what `small` says: equal, a CJK substring or a superset of words."""
    if not big or not small:
        return False
    if big == small:
        return True
    if is_cjk(big) != is_cjk(small):
        return False
    if is_cjk(big):
        return small.replace(" ", "") in big.replace(" ", "")
    words = set(_tokens(big))
    return bool(_tokens(small)) and set(_tokens(small)) <= words


def same(a: str, b: str) -> bool:
    """Not known to differ: one contains the other, or they can't be compared (scripts)."""
    if not a or not b:
        return True
    if is_cjk(a) != is_cjk(b):
        return True
    return contains(a, b) or contains(b, a)


def names(old_value: str, named: str) -> bool:
    """An old value is the one a switch/cancellation names (the old may be more specific)."""
    if not old_value or not named:
        return False
    if old_value == named:
        return True
    if LIST_MARK.search(old_value):
        return False  # "python and rust" is not retired by "no longer use rust"
    if is_cjk(named) and len(named.replace(" ", "")) < 2:
        return False
    return contains(old_value, named)


def is_region(value: str) -> bool:
    """A country, province, state or vague region rather than a city."""
    if is_cjk(value):
        return _ZH_REGION_SUFFIX.sub("", value) in _ZH_REGIONS
    return value.split(",")[0].strip() in EN_REGIONS


def overlap(a: str, b: str) -> bool:
    if not a or not b:
        return False
    if is_cjk(a) and is_cjk(b) and min(len(a), len(b)) < 2:
        return a == b
    return contains(a, b) or contains(b, a)
