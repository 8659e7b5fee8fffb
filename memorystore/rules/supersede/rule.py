"""A supersession rule: a named pattern anchored after a clause's lead, the builder that turns
its match into frames, and the examples that show what it reads and what it must not.

Why named records: a pair that retires wrongly (or fails to) is traced by `explain` to the
rule that read it, and a test runs every rule on its own examples.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from memorystore.rules.supersede.frame import Frame

__all__ = ["Builder", "Clause", "Example", "Lead", "Rule", "rule"]

# "subj": after a subject ("I", "the user", "我"); "poss": after a possessive ("my", "我的");
# "free": with no subject of its own ("Inception is my favourite movie", "日本不去了")
Lead = Literal["subj", "poss", "free"]


@dataclass(frozen=True)
class Clause:
    text: str  # the clause as written (NFKC), for capitalisation
    low: str  # lowercased, same offsets
    rest: int  # where the text after the lead (prefixes, subject) starts
    chg: bool  # "from now on", "以后": a change marker
    topic: str  # "when it comes to coffee", "咖啡的话"
    all_lower: bool  # the whole memory has no capital letter: don't ask for one


# a match and its clause -> the frames it states; `single_ok` is false when the clause says
# the fact holds alongside another ("also", "part-time", "周末"), so no single value is stated
Builder = Callable[[re.Match[str], Clause, bool], list[Frame]]


@dataclass(frozen=True)
class Example:
    text: str
    frames: tuple[Frame, ...]  # what the rule alone reads from the text


@dataclass(frozen=True)
class Rule:
    name: str  # "<language>.<slot>.<what it reads>", unique
    slot: str  # a fixed slot, or a family whose slot the builder completes
    lead: Lead
    triggers: frozenset[str]  # a cheap test: the rule is tried only when one of these occurs
    pattern: re.Pattern[str]
    build: Builder
    positives: tuple[Example, ...]
    negatives: tuple[str, ...]  # texts the rule must not read a frame from


def rule(
    name: str,
    slot: str,
    lead: Lead,
    triggers: str,
    pattern: str,
    build: Builder,
    positives: Iterable[tuple[str, Frame | tuple[Frame, ...]]],
    negatives: Iterable[str],
) -> Rule:
    """A rule, tried on a clause only when one of its `|`-separated trigger strings occurs."""
    examples = tuple(
        Example(text, frames if isinstance(frames, tuple) else (frames,))
        for text, frames in positives
    )
    return Rule(
        name,
        slot,
        lead,
        frozenset(triggers.split("|")),
        re.compile(pattern),
        build,
        examples,
        tuple(negatives),
    )
