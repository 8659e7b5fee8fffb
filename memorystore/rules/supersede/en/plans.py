"""English rules for what the user plans: trips and events ("I'm planning a trip to Japan",
"I'm going to Korea instead of Japan", "I cancelled my trip to Japan", "The Japan trip is
off").

Why plans are many: "a trip to Japan" and "a trip to Korea" can both be planned, so a plan is
retired only by its cancellation or by another plan said to replace it.
"""

from __future__ import annotations

import re

from memorystore.rules.supersede.builders import plan_instead
from memorystore.rules.supersede.en.grammar import (
    ADV,
    END,
    GO,
    NOT_NAMES,
    NOW,
    STRICT_END,
    TRAVEL,
    TRAVEL_ADJ,
    V,
)
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import EVENT_RE, first_group, plan_value, upper_at
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.values import PRONOUN_VALUES, norm

__all__ = ["CANCELLED", "FORGET", "GOING_TO", "INSTEAD_OF", "IS_OFF", "NOT_GOING"]

_PLAN_OBJ_JUNK = re.compile(r"^(?:the|a|an|my|our|big|upcoming|planned|next)\s+")


def _plan(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    group, _ = first_group(m, "v", "v2", "v3", "v4", "v5", "v6", "v7")
    if group is None:
        return []
    v = plan_value(c, m, group)
    if v is None or v in NOT_NAMES:
        return []
    return [Frame(f"plan:{v}", v)]


def _plan_cancel(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    group, raw = first_group(m, "v", "v2", "o")
    if group is None:
        return []
    if group == "o":
        v = _PLAN_OBJ_JUNK.sub("", norm(raw or ""))
        event = bool(EVENT_RE.fullmatch(v))
        if not (event or upper_at(c, c.rest + m.start("o"))) or v in PRONOUN_VALUES:
            return []
        if "'" in v:
            return []  # "Tom's Japan trip": someone else's
    else:
        v = plan_value(c, m, group) or ""
    if not v:
        return []
    return [Frame(f"plan:{v}", "", cancel=True, previous=v)]


GOING_TO = rule(
    "en.plan.going_to",
    "plan",
    "subj",
    "plan|organi|book|going|go |travel|fly|head|visit|will|shall",
    rf"^{ADV}(?:(?:am|is|are)\s+)?{NOW}(?:planning|organizing|organising|booking|taking|"
    rf"going on)\s+(?:a |an |my |the |our )?{TRAVEL_ADJ}{TRAVEL}\s+to\s+(?P<v>{V})"
    rf"{END}|^{ADV}(?:(?:am|is|are)\s+)?(?:planning|going|about)\s+(?:to|on)\s+{GO}\s+"
    rf"(?:to\s+)?(?P<v2>{V}){END}|^{ADV}(?:plan|plans|intend|intends|have planned|"
    rf"has planned)\s+(?:to|on)\s+{GO}\s+(?:to\s+)?(?P<v3>{V}){END}"
    rf"|^{ADV}(?:will|shall)\s+(?:be\s+)?(?:go|going|travel|traveling|travelling|fly|"
    rf"flying|visit|visiting|head|heading)(?:\s+to)?\s+(?P<v4>{V}){END}"
    rf"|^{ADV}(?:am|is|are)\s+(?:going|travelling|traveling|flying|heading|off)\s+to\s+"
    rf"(?P<v5>{V}){END}|^{ADV}(?:have |has )?booked\s+(?:a |an |my |the |our )?"
    rf"{TRAVEL_ADJ}(?:{TRAVEL}|tickets?|hotel|a hotel)\s+(?:to|for|in)\s+(?P<v6>{V})"
    rf"{END}|^(?:have|has)\s+(?:a |an )?{TRAVEL_ADJ}{TRAVEL}\s+to\s+(?P<v7>{V})\s+"
    rf"(?:planned|coming up|booked|scheduled)",
    _plan,
    positives=[
        ("I'm planning a trip to Japan in May", Frame("plan:japan", "japan")),
        ("I will go to Japan", Frame("plan:japan", "japan")),
        ("I plan to go to a jazz festival in May", Frame("plan:jazz festival", "jazz festival")),
    ],
    negatives=[
        "I'm planning a trip to see my friends.",
        "I went to Korea last year.",
        "My sister is going to Japan.",
    ],
)

INSTEAD_OF = rule(
    "en.plan.instead_of",
    "plan",
    "subj",
    "instead of",
    rf"^{ADV}(?:(?:am|is|will|will be|am going to|is going to|decided to|have decided to|"
    rf"has decided to|plan to|am planning to|is planning to)\s+)?{NOW}{GO}\s+(?:to\s+)?"
    rf"(?P<v>{V})\s+instead of\s+(?:going to\s+|visiting\s+)?(?P<p>{V}){STRICT_END}",
    plan_instead,
    positives=[
        ("I'm going to Korea instead of Japan", Frame("plan:korea", "korea", previous="japan"))
    ],
    negatives=["I'm going to Korea instead of Korea.", "I'm going to bed instead of work."],
)

CANCELLED = rule(
    "en.plan.cancelled",
    "plan",
    "subj",
    "cancel|call|scrap|drop|abandon|gave up|given up|pulled|withdr|backed|skip|attend",
    rf"^{ADV}(?:have |has |had to |have to |has to )?{NOW}(?:cancell?ed|cancel|called off|"
    rf"call off|scrapped|dropped|abandoned|gave up on|given up on)\s+(?:my |the |our |a |"
    rf"their )?(?:(?P<o>[^\s,;]+(?:\s+[^\s,;]+)?)\s+)?"
    rf"{TRAVEL_ADJ}(?:{TRAVEL}|plans?|booking|tickets?)(?:\s+(?:to|for|in)\s+"
    rf"(?:go\s+to\s+|visit\s+|travel\s+to\s+|fly\s+to\s+)?(?P<v>{V}))?{END}"
    rf"|^{ADV}(?:have |has )?{NOW}(?:pulled out of|withdrew from|withdrawn from|"
    rf"dropped out of|backed out of|skipped|am skipping|is skipping|will skip|"
    rf"will not attend|will not be attending|am not attending|is not attending)\s+"
    rf"(?:the |my |our |their )?(?P<v2>{V}){STRICT_END}",
    _plan_cancel,
    positives=[
        ("I cancelled my trip to Japan", Frame("plan:japan", "", cancel=True, previous="japan")),
        (
            "We cancelled the Iceland trip.",
            Frame("plan:iceland", "", cancel=True, previous="iceland"),
        ),
        (
            "I pulled out of the Chicago Marathon.",
            Frame("plan:chicago marathon", "", cancel=True, previous="chicago marathon"),
        ),
    ],
    negatives=[
        "My sister cancelled her trip to Japan.",
        "The user cancelled the trip they had planned.",
    ],
)

FORGET = rule(
    "en.plan.forget",
    "plan",
    "free",
    "forget",
    rf"^forget\s+(?:about\s+)?(?:the |my |our )?(?:(?P<o>[^\s,;]+(?:\s+[^\s,;]+)?)\s+)?"
    rf"{TRAVEL_ADJ}{TRAVEL}(?:\s+to\s+(?P<v>{V}))?\s*$",
    _plan_cancel,
    positives=[
        ("Forget the Japan trip.", Frame("plan:japan", "", cancel=True, previous="japan")),
        ("Forget about the trip to Rome.", Frame("plan:rome", "", cancel=True, previous="rome")),
    ],
    negatives=["Forget it.", "Forget the trip."],
)

IS_OFF = rule(
    "en.plan.is_off",
    "plan",
    "poss",
    " off|cancel|called off|scrapped|not happening",
    rf"^(?:the |our )?(?:(?P<o>[^\s,;]+(?:\s+[^\s,;]+)?)\s+)?{TRAVEL_ADJ}{TRAVEL}"
    rf"(?:\s+(?:to|for)\s+(?P<v>{V}))?\s+(?:(?:is|was|has been|got|is now|have been|are)\s+"
    rf"(?:now\s+)?(?:off|cancell?ed|called off|scrapped|not happening|dead)|cancell?ed|"
    rf"called off|scrapped)"
    rf"(?:\s+(?:now|then|after all))?\s*$",
    _plan_cancel,
    positives=[
        ("The Japan trip is off", Frame("plan:japan", "", cancel=True, previous="japan")),
        ("The trip to Paris is cancelled.", Frame("plan:paris", "", cancel=True, previous="paris")),
    ],
    negatives=["Tom's Japan trip is off.", "The trip is off."],
)

NOT_GOING = rule(
    "en.plan.not_going",
    "plan",
    "subj",
    "not|no longer|decided",
    rf"^{ADV}(?:am|is|are)\s+(?:not|no longer)\s+(?:going|travelling|traveling|flying|heading|"
    rf"visiting)\s+(?:to\s+)?(?P<v>{V})(?:\s+(?:anymore|any more|after all))?\s*$"
    rf"|^{ADV}(?:will not|am not going to|is not going to|decided not to|have decided "
    rf"not to|has decided not to|no longer plan to|no longer plans to|do not plan to|"
    rf"does not plan to)\s+(?:go|travel|fly|head|visit)\s+(?:to\s+)?(?P<v2>{V})"
    rf"(?:\s+(?:anymore|any more|after all))?\s*$",
    _plan_cancel,
    positives=[
        ("I decided not to go to Paris.", Frame("plan:paris", "", cancel=True, previous="paris")),
        ("I'm not going to Japan anymore.", Frame("plan:japan", "", cancel=True, previous="japan")),
    ],
    negatives=["I'm not going to lie.", "My sister is not going to Japan anymore."],
)
