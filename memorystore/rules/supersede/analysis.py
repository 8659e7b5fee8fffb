"""A memory text read into frames: sentences, clauses, whose each clause is, and which rules
read it.

Why the text as a whole: "he"/"she" are the user's only in a memory that names nobody else, a
question or a hypothetical states nothing, and an old memory is retired only when every fact
it states is superseded and it says nothing else (`covered`). Analyses are cached per text,
so the older memories, analysed when they were written, cost microseconds on each write.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NamedTuple

from memorystore.rules.sentences import sentences
from memorystore.rules.supersede import en, zh
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.leads import (
    MODIFIER,
    PRONOUNS,
    TRIVIAL,
    USER_SUBJECTS,
    WE,
    WE_SLOTS,
    is_prefix_only,
    lead,
)
from memorystore.rules.supersede.rule import Clause, Rule
from memorystore.rules.supersede.supersession import supersedes
from memorystore.rules.supersede.text import (
    EN_ALSO,
    EN_OTHER_PERSON,
    EN_OTHER_START,
    HAS_HAN,
    ZH_ALSO,
    ZH_OTHER_PERSON,
    ZH_OTHER_START,
    en_clauses,
    is_hypothetical,
    is_question,
    lower,
    prepare,
    zh_clauses,
)
from memorystore.rules.supersede.values import norm

__all__ = ["MAX_CHARS", "RULES", "Analysis", "Reading", "analyse", "read_by"]

RULES: tuple[Rule, ...] = en.RULES + zh.RULES
# A memory is a short text; a longer one is left alone (and the rules stay fast).
MAX_CHARS = 500


class Reading(NamedTuple):
    """A frame of a text and the name of the rule that read it."""

    rule: str
    frame: Frame


def _trigger_index(rules: tuple[Rule, ...]) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]]:
    """Every trigger of a language's rules, and for each the (indices of the) rules it lets
    be tried: a clause is tested against a few substrings, not every rule's regex."""
    triggers = tuple(sorted(frozenset().union(*(r.triggers for r in rules))))
    rules_of = {t: tuple(i for i, r in enumerate(rules) if t in r.triggers) for t in triggers}
    return triggers, rules_of


_EN_TRIGGERS = _trigger_index(en.RULES)
_ZH_TRIGGERS = _trigger_index(zh.RULES)
# most memories ("周五之前要把Q3的OKR发给Tom") contain no trigger at all: skip them early
_ANY_TRIGGER = re.compile(
    "|".join(re.escape(t) for t in sorted({*_EN_TRIGGERS[0], *_ZH_TRIGGERS[0]}, key=len))
)


def _candidates(rest: str, cjk: bool) -> list[Rule]:
    """The rules worth trying on a clause, in their order."""
    triggers, rules_of = _ZH_TRIGGERS if cjk else _EN_TRIGGERS
    found = {i for t in triggers if t in rest for i in rules_of[t]}
    rules = zh.RULES if cjk else en.RULES
    return [rules[i] for i in sorted(found)]


@dataclass(frozen=True)
class Analysis:
    readings: tuple[Reading, ...]  # the text's frames in text order, each with its rule
    covered: bool  # every sentence/clause is a frame or trivial: nothing else would be lost
    key: str  # the prepared text, to recognise a restatement

    @property
    def frames(self) -> tuple[Frame, ...]:
        return tuple(r.frame for r in self.readings)


def _clause_frames(
    clause: str, carry_user: bool, seen_other: bool, all_lower: bool, only: Rule | None
) -> tuple[list[Reading], str]:
    """Frames of one clause, and who it is about: "user", "other" or "" (no subject)."""
    low = lower(clause)
    cjk = bool(HAS_HAN.search(clause))
    m, subj = lead(low, cjk)
    chg = bool(m.group("chg"))
    topic = norm(m.group("topic")) if m.group("topic") else ""
    we = subj in WE
    if subj in USER_SUBJECTS or we:
        about = "user"
    elif subj in PRONOUNS:
        about = "other" if seen_other else "user"
    else:
        about = ""
    is_poss = bool(m.group("poss"))
    rest = low[m.end() :]
    c = Clause(clause, low, m.end(), chg, topic, all_lower)
    also = (ZH_ALSO if cjk else EN_ALSO).search(low) is not None or bool(m.group("fut"))
    out: list[Reading] = []
    if about == "other" or (about == "" and not carry_user):
        return out, about or ("other" if not is_prefix_only(low, cjk) else "")
    for rule in _candidates(rest, cjk):
        if only is not None and rule is not only:
            continue
        if we and rule.slot not in WE_SLOTS:
            continue
        if rule.lead == "free":
            if about:
                continue
        elif rule.lead == "poss":
            if about and not is_poss:
                continue
        elif about and is_poss:
            continue
        match = rule.pattern.match(rest)
        if match is None:
            continue
        for f in rule.build(match, c, not also):
            _add(out, Reading(rule.name, f))
    if not out:
        if is_poss or (about and (ZH_OTHER_START if cjk else EN_OTHER_START).match(rest)):
            about = "other"  # "my sister ...", "我妈妈...": about someone else
        elif not about and not is_prefix_only(low, cjk):
            about = "other"  # an unknown subject ("Tom lives in Paris"): it isn't the user's
    return out, about


def _add(out: list[Reading], new: Reading) -> None:
    """Add a clause's frame; of two readings of the same value keep the more specific."""
    f = new.frame
    key = f.value or f.previous
    for i, (_, g) in enumerate(out):
        if g == f:
            return
        if (g.value or g.previous) != key or g.cancel != f.cancel:
            continue
        if _specificity(f) > _specificity(g):
            out[i] = new
        return
    out.append(new)


def _specificity(f: Frame) -> int:
    score = 2 if f.previous else 1 if f.previous == "" else 0
    return score * 4 + (0 if f.slot.startswith(("usage:", "like:")) else 1)


def _merge_prefixes(clauses: list[str], cjk: bool) -> list[str]:
    """A clause that is only a prefix ("Last month", "from now on", "咖啡的话") leads the next."""
    merged: list[str] = []
    pending = ""
    for cl in clauses:
        low_cl = lower(cl)
        if is_prefix_only(low_cl, bool(HAS_HAN.search(cl))) and not TRIVIAL.match(low_cl):
            pending = f"{pending} {cl}".strip() if not cjk else f"{pending}{cl}"
            continue
        if pending:
            cl = f"{pending} {cl}" if not cjk else f"{pending}{cl}"
            pending = ""
        merged.append(cl)
    return merged


def _analyse(text: str, only: Rule | None) -> Analysis:
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_CHARS:
        return Analysis((), False, text if isinstance(text, str) else "")
    prepared = prepare(text)
    if not _ANY_TRIGGER.search(lower(prepared)):
        return Analysis((), False, prepared)
    all_lower = not any(ch.isupper() for ch in prepared)
    found: list[Reading] = []
    covered = True
    carry_user = True
    # "he"/"she" are the user's only in a memory that names nobody else
    seen_other = bool(ZH_OTHER_PERSON.search(prepared) or EN_OTHER_PERSON.search(lower(prepared)))
    for sentence in sentences(prepared):
        low_sentence = lower(sentence)
        cjk = bool(HAS_HAN.search(sentence))
        other_here = (ZH_OTHER_PERSON if cjk else EN_OTHER_PERSON).search(low_sentence)
        if is_question(sentence, low_sentence):
            # a question states nothing about the user that retiring the memory would lose
            seen_other = seen_other or bool(other_here)
            continue
        if is_hypothetical(low_sentence, cjk):
            covered = False
            seen_other = seen_other or bool(other_here)
            continue
        clauses = zh_clauses(sentence) if cjk else en_clauses(sentence)
        for cl in _merge_prefixes(clauses, cjk):
            readings, about = _clause_frames(cl, carry_user, seen_other, all_lower, only)
            if about == "user":
                carry_user = True
            elif about == "other":
                carry_user = False
                seen_other = True
            if readings:
                found.extend(readings)
            elif not is_prefix_only(lower(cl), bool(HAS_HAN.search(cl))) and not (
                MODIFIER.match(lower(cl))
            ):
                covered = False
        seen_other = seen_other or bool(other_here)
    return Analysis(_resolve(found), covered and bool(found), prepared)


def _resolve(found: list[Reading]) -> tuple[Reading, ...]:
    """One text's frames, later statements winning, so that no frame supersedes another."""
    kept: list[Reading] = []
    for r in found:
        if any(k.frame == r.frame for k in kept):
            continue
        kept = [
            k for k in kept if not supersedes(r.frame, k.frame) and not supersedes(k.frame, r.frame)
        ]
        kept.append(r)
    return tuple(kept)


@functools.lru_cache(maxsize=8192)
def analyse(text: str) -> Analysis:
    """The analysis of a memory text by every rule (cached per text)."""
    return _analyse(text, None)


def read_by(rule: Rule, text: str) -> tuple[Frame, ...]:
    """The frames `text` yields when `rule` is the only rule tried (not cached)."""
    return _analyse(text, rule).frames
