"""When a query asks about, and when a memory happened: the time cue of hybrid search.

A question like "What did Maria donate in December 2023?" names a period; the memory that
answers it was said or written in that period. Dense and keyword search barely see this
(the keyword tokenizer has no term for "2023", and "May" is an English stopword), so the
search ranks the memories whose time falls in a period the query names higher
(`retrieval.timeWeight`).

- A query's periods come from named rules per language (`RULES`, each with the examples
  its unit test checks), the month names from `rules/lexicons/months.json`. A period is a
  year, a month or a day; what it leaves out matches anything ("in June": June of any year).
- A memory's time is its metadata `date` (ISO 8601, "8 May, 2023", "1:56 pm on 8 May, 2023",
  "May 8, 2023", "2023年5月8日"), or else when it was written (`created_at`).

Relative expressions ("last week") are not resolved: on the LoCoMo dev split, resolving
them in the stored turns against their session's date changed no question's ranking that
the session's date did not already decide (docs/retrieval.md).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from memorystore.rules import lexicon

__all__ = ["RULES", "Period", "Rule", "memory_date", "query_periods"]


@dataclass(frozen=True)
class Period:
    """A year, a month or a day; a field left None matches any value."""

    year: int | None = None
    month: int | None = None
    day: int | None = None

    def contains(self, when: date) -> bool:
        return (
            (self.year is None or when.year == self.year)
            and (self.month is None or when.month == self.month)
            and (self.day is None or when.day == self.day)
        )


@dataclass(frozen=True)
class Rule:
    """One way a language writes a period: a pattern with named groups `year`, `month`,
    `day`, and examples of what it reads (checked by the rule's unit test)."""

    name: str
    language: str
    pattern: re.Pattern[str]
    examples: Mapping[str, Period]


def _months(language: str) -> str:
    names = [n for n in lexicon.table("months") if n.isascii() == (language == "en")]
    return "|".join(sorted(names, key=len, reverse=True))


_EN = _months("en")
_ZH = _months("zh")
_DAY = r"(?P<day>[12]\d|3[01]|0?[1-9])"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_IN = r"(?:in|during|of|since|until|by|early|late|mid|this|last|next|around)"
_I = re.IGNORECASE

RULES: tuple[Rule, ...] = (
    Rule(
        "ISO 8601 day",
        "any",
        re.compile(rf"\b{_YEAR}-(?P<month>1[0-2]|0[1-9])-(?P<day>[12]\d|3[01]|0[1-9])\b"),
        {"on 2023-05-08": Period(2023, 5, 8)},
    ),
    Rule(
        "day month [year]",
        "en",
        re.compile(
            rf"\b{_DAY}(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{_EN}),?(?:\s+{_YEAR})?\b", _I
        ),
        {"on 8 May, 2023": Period(2023, 5, 8), "the 3rd of june": Period(None, 6, 3)},
    ),
    Rule(
        "month day [year]",
        "en",
        re.compile(rf"\b(?P<month>{_EN})\s+{_DAY}(?:st|nd|rd|th)?\b(?:,?\s+{_YEAR})?", _I),
        {"on October 13, 2023": Period(2023, 10, 13), "May 8th": Period(None, 5, 8)},
    ),
    Rule(
        "month year",
        "en",
        re.compile(rf"\b(?P<month>{_EN}),?\s+{_YEAR}\b", _I),
        {"in December 2023": Period(2023, 12)},
    ),
    Rule(
        "in month",
        "en",
        re.compile(rf"\b{_IN}\s+(?P<month>{_EN})\b", _I),
        {"camping in June": Period(None, 6), "during july": Period(None, 7)},
    ),
    Rule(
        "in year",
        "en",
        re.compile(rf"\b{_IN}\s+{_YEAR}\b", _I),
        {"the beach in 2023": Period(2023)},
    ),
    Rule(
        "年月日",
        "zh",
        re.compile(
            r"(?:(?P<year>(?:19|20)\d\d)年)?(?P<month>1[0-2]|0?[1-9])月(?P<day>[12]\d|3[01]|0?[1-9])[日号]"
        ),
        {"2023年5月8日": Period(2023, 5, 8), "5月8号": Period(None, 5, 8)},
    ),
    Rule(
        "年月",
        "zh",
        re.compile(
            rf"(?:(?P<year>(?:19|20)\d\d)年)?(?:(?P<month>1[0-2]|0?[1-9])月|(?P<named>{_ZH}))"
        ),
        {"2023年12月": Period(2023, 12), "七月": Period(None, 7), "在十一月": Period(None, 11)},
    ),
    Rule(
        "年",
        "zh",
        re.compile(r"(?P<year>(?:19|20)\d\d)年"),
        {"2023年": Period(2023)},
    ),
)


def _period(match: re.Match[str]) -> Period:
    groups = match.groupdict()
    month = groups.get("month") or groups.get("named")
    if month is not None and not month.isdigit():
        month = lexicon.table("months")[month.lower()]
    year, day = groups.get("year"), groups.get("day")
    return Period(
        int(year) if year else None,
        int(month) if month else None,
        int(day) if day else None,
    )


def _found(text: str) -> list[tuple[int, int, Period]]:
    """(start, end, period) of every rule's matches, the longest kept where they overlap
    (the most specific reading: "in December 2023" is December 2023, not December)."""
    spans = []
    for rule in RULES:
        for match in rule.pattern.finditer(text):
            if _bare_may(match):
                continue
            spans.append((match.start(), match.end(), _period(match)))
    kept: list[tuple[int, int, Period]] = []
    for span in sorted(spans, key=lambda s: (s[0] - s[1], s[0])):
        if all(span[1] <= other[0] or span[0] >= other[1] for other in kept):
            kept.append(span)
    return sorted(kept, key=lambda s: s[0])


def _bare_may(match: re.Match[str]) -> bool:
    """'may' the verb, not the month: lower case ("you may 8 …" stays no date)."""
    month = match.groupdict().get("month")
    return month is not None and month == "may"


@functools.lru_cache(maxsize=1024)
def query_periods(query: str) -> tuple[Period, ...]:
    """Every period the query names, in order (none: the query names no time)."""
    return tuple(period for _, _, period in _found(query))


_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


@functools.lru_cache(maxsize=65536)
def _parsed(text: str) -> date | None:
    iso = _ISO.match(text.strip())
    if iso:
        try:
            return date(int(iso[1]), int(iso[2]), int(iso[3]))
        except ValueError:
            return None
    for _, _, period in _found(text):
        if period.year and period.month and period.day:
            try:
                return date(period.year, period.month, period.day)
            except ValueError:
                return None
    return None


def memory_date(payload: Mapping[str, Any]) -> date | None:
    """The day a memory happened: its metadata `date`, else the day it was written."""
    for key in ("date", "created_at"):
        value = payload.get(key)
        if isinstance(value, datetime):
            return value.date()
        if isinstance(value, str) and value:
            found = _parsed(value)
            if found is not None:
                return found
    return None
