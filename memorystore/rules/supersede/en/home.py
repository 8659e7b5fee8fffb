"""English rules for where the user lives: "I live in X", "I moved to X", "I no longer live
in X".

Why strict: a residence must look like a place. "I live in fear", "I moved to Neovim" or "I
live in Slack" are no residence, so a value must be capitalised as a name, and "moved to" or
an all-lowercase memory must name a known place (`lexicons/cities.en.txt`).
"""

from __future__ import annotations

import re

from memorystore.rules import lexicon
from memorystore.rules.supersede.en.grammar import ADV, END, NOT_NAMES, NOW, STRICT_END, V
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import en_value, first_group
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.values import EN_PLACES

__all__ = ["LIVED_SINCE", "LIVES_IN", "MOVED_TO", "NO_LONGER_LIVES"]

_NOT_PLACES = lexicon.word_set("not_places.en")
_PLACE_HEADS = re.compile(
    r"\b(?:apartment|flat|house|home|dorm|dormitory|condo|studio|room|building|suburbs?|"
    r"downtown|city cent(?:er|re)|countryside|neighbou?rhood|area|village|town|place|"
    r"basement|hotel|hostel|flatshare|houseboat|trailer|camper|van)\b"
)


def _place(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    if not single_ok:
        return []
    v = en_value(c, m, "v", cap=True)
    if v is None or v in NOT_NAMES or v in _NOT_PLACES:
        return []  # "I live in Minecraft", "I live in Slack"
    if v not in EN_PLACES and _PLACE_HEADS.search(v):
        return []  # "I live in the city centre" (but "the Bay Area" is a place)
    if c.all_lower and v not in EN_PLACES:
        return []  # no capital letters to tell "hangzhou" from "fear of spiders"
    return [Frame("residence", v, previous="" if c.chg else None)]


def _moved(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    if not single_ok:
        return []
    v = en_value(c, m, "v", cap=True)
    pname, _ = first_group(m, "p", "p2")
    p = en_value(c, m, pname, cap=True) if pname else None
    if v is None or _PLACE_HEADS.search(v) or v in _NOT_PLACES:
        return []
    if m.group("verb").startswith("moved") and not (
        v in EN_PLACES or v.split(",")[0].strip() in EN_PLACES or (p and p in EN_PLACES)
    ):
        return []  # "moved to Neovim", "moved to Google": not a residence
    return [Frame("residence", v, previous=p if p else "")]


def _cancel_place(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = en_value(c, m, "v", cap=True)
    if v is None or _PLACE_HEADS.search(v) or (c.all_lower and v not in EN_PLACES):
        return []
    return [Frame("residence", "", cancel=True, previous=v)]


LIVES_IN = rule(
    "en.residence.lives_in",
    "residence",
    "subj",
    "liv|resid|based|settled",
    rf"^{ADV}(?:live|lives|reside|resides|(?:am|is|have been|has been)\s+{ADV}"
    rf"(?:living|residing|based|settled)|(?:have|has)\s+{ADV}settled|based|"
    rf"settled(?: down)?)\s+in\s+(?P<v>{V}){END}",
    _place,
    positives=[
        ("The user lives in Shanghai.", Frame("residence", "shanghai")),
        ("Lives in Hangzhou", Frame("residence", "hangzhou")),
        ("I'm based in London", Frame("residence", "london")),
        ("I live in Hangzhou, China", Frame("residence", "hangzhou, china")),
    ],
    negatives=[
        "i live in fear of spiders",
        "I live in a small apartment.",
        "I live in Minecraft with my friends lol.",
        "My sister lives in Paris.",
    ],
)

LIVED_SINCE = rule(
    "en.residence.lived_since",
    "residence",
    "subj",
    "lived",
    rf"^{ADV}(?:have|has)\s+{ADV}lived\s+in\s+(?P<v>{V})(?=\s+(?:since|for)\b)",
    _place,
    positives=[
        ("I've lived in Berlin since 2020.", Frame("residence", "berlin")),
        ("The user has lived in Lisbon for three years.", Frame("residence", "lisbon")),
    ],
    negatives=["I lived in Shanghai for two years.", "I've lived in Paris."],
)

MOVED_TO = rule(
    "en.residence.moved_to",
    "residence",
    "subj",
    "moved|relocated",
    rf"^{ADV}(?:have |has )?{NOW}(?P<verb>moved|relocated|moved back|moved house|"
    rf"moved over|relocated back)(?:\s+from\s+(?P<p>{V}))?\s+to\s+(?P<v>{V})"
    rf"(?:\s+from\s+(?P<p2>{V}))?{END}",
    _moved,
    positives=[
        ("I moved to Shanghai last month", Frame("residence", "shanghai", previous="")),
        ("I moved from Hangzhou to Shanghai", Frame("residence", "shanghai", previous="hangzhou")),
        ("Moved to Shanghai", Frame("residence", "shanghai", previous="")),
    ],
    negatives=["I moved to Neovim.", "I moved to Google.", "I'm moving to Shanghai next month."],
)

NO_LONGER_LIVES = rule(
    "en.residence.no_longer_lives",
    "residence",
    "subj",
    "liv|moved|based|resid",
    rf"^{ADV}(?:do not live|does not live|no longer live|no longer lives|"
    rf"am no longer living|is no longer living|am not living|is not living|"
    rf"am no longer based|is no longer based|used to live|have moved out of|"
    rf"has moved out of|moved out of|moved away from|have moved away from|"
    rf"has moved away from)\s+(?:in\s+)?(?P<v>{V}){STRICT_END}",
    _cancel_place,
    positives=[
        (
            "I don't live in Hangzhou anymore",
            Frame("residence", "", cancel=True, previous="hangzhou"),
        ),
        ("I used to live in Hangzhou", Frame("residence", "", cancel=True, previous="hangzhou")),
        ("I moved out of Berlin.", Frame("residence", "", cancel=True, previous="berlin")),
    ],
    negatives=["I don't live in a house anymore.", "My sister used to live in Paris."],
)
