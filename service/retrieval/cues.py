"""Who and when a query names: the two cues fused search adds after the dense, keyword and
neighbour scores.

- **Speaker** (`retrieval.speakerWeight`): a conversation turn remembers who said it (the
  message `name`, stored as `actor_id`). When a query names exactly one of the speakers
  among its candidates ("What did Caroline research?"), what that speaker said ranks higher.
  On the LoCoMo dev split, 1,098 of 1,219 questions name one speaker, and 97 % of their
  evidence turns are that speaker's; a query naming several speakers gets no speaker cue.
  The name is also left out of the query's dense vector (`without_speakers`).
- **Time** (`retrieval.timeWeight`): a memory whose day (`periods.memory_date`) falls in a
  period the query names (`periods.query_periods`) ranks higher.

- **Question** (`retrieval.questionWeight`): a memory that asks a question ("What did you
  paint?") holds no answer, so it ranks lower than one that states something.

Each cue adds its weight to a memory's fused relevance (in [0, 1]; the question cue is added
to every memory that is *not* a question); fusion then divides by one plus the three
weights, so scores stay in [0, 1].
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from memorystore.rules.scripts import CJK_LETTERS
from memorystore.service.retrieval.periods import memory_date, query_periods
from memorystore.spec import RetrievalSettings

__all__ = ["cue_bonuses", "is_question", "named_speakers", "without_speakers"]

_CJK = re.compile(f"[{CJK_LETTERS}]")


@functools.lru_cache(maxsize=4096)
def _name_pattern(speaker: str) -> re.Pattern[str] | None:
    """How a query writes a speaker's name: as written in Chinese (no spaces between words),
    else as whole words in any case, a possessive included ("jon_snow" as "Jon Snow's")."""
    if _CJK.search(speaker):
        return re.compile(re.escape(speaker))
    words = r"[\s_-]+".join(re.escape(w) for w in re.split(r"[\s_-]+", speaker.strip()) if w)
    if not words:
        return None
    return re.compile(rf"(?<!\w){words}(?:['’]s)?(?!\w)", re.IGNORECASE)


def named_speakers(query: str, speakers: Iterable[str]) -> frozenset[str]:
    """The speakers (`actor_id`s) the query names."""
    named = set()
    for speaker in set(speakers):
        pattern = _name_pattern(speaker) if speaker else None
        if pattern is not None and pattern.search(query):
            named.add(speaker)
    return frozenset(named)


def without_speakers(query: str, speakers: Iterable[str]) -> str:
    """The query to embed: without the names of the speakers it names.

    What a speaker said is about them without naming them ("I researched adoption
    agencies"), while their name is in what others said to them ("Thanks, Caroline!"), so
    a name in the query vector pulls towards the wrong turns; the speaker cue takes its
    place. Measured on the LoCoMo dev split (docs/retrieval.md): R@10 80.6 → 81.9 %.
    """
    stripped = query
    for speaker in sorted(named_speakers(query, speakers)):
        pattern = _name_pattern(speaker)
        if pattern is not None:
            stripped = " ".join(pattern.sub(" ", stripped).split())
    return stripped if any(c.isalnum() for c in stripped) else query


def is_question(text: str) -> bool:
    """A memory that asks: its text ends in a question mark (ASCII or full-width)."""
    return text.rstrip().endswith(("?", "？"))


def cue_bonuses(
    query: str, payloads: Mapping[str, Mapping[str, Any]], settings: RetrievalSettings
) -> dict[str, float]:
    """Each candidate's bonus from the cues it meets (absent: none)."""
    bonuses: dict[str, float] = {}
    if settings.speaker_weight > 0:
        speakers = (str(p.get("actor_id") or "") for p in payloads.values())
        named = named_speakers(query, speakers)
        if len(named) == 1:
            for mem_id, payload in payloads.items():
                if payload.get("actor_id") in named:
                    bonuses[mem_id] = settings.speaker_weight
    if settings.question_weight > 0:
        for mem_id, payload in payloads.items():
            if not is_question(str(payload.get("data") or "")):
                bonuses[mem_id] = bonuses.get(mem_id, 0.0) + settings.question_weight
    periods = query_periods(query) if settings.time_weight > 0 else ()
    if periods:
        for mem_id, payload in payloads.items():
            when = memory_date(payload)
            if when is not None and any(period.contains(when) for period in periods):
                bonuses[mem_id] = bonuses.get(mem_id, 0.0) + settings.time_weight
    return bonuses
