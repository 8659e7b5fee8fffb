"""Pieces of the English rules' patterns: adverbs a verb may carry, where a captured value
ends, job titles, trips, diets.

Why one place: a value's end (`END`) is the same for every rule, and so it stops at the same
words ("I live in Paris since 2020", "... with my wife", "... thanks").
"""

from __future__ import annotations

import re

from memorystore.rules import lexicon

__all__ = [
    "ADV",
    "DIET",
    "DIET_ANY",
    "END",
    "GO",
    "JOB_TITLE_EN",
    "JOB_TITLE_EN_RE",
    "NOT_NAMES",
    "NOW",
    "REL",
    "REL_END",
    "STRICT_END",
    "TRAVEL",
    "TRAVEL_ADJ",
    "V",
]

# words that follow "live in", "work at", "go to" without naming anything ("home", "night")
NOT_NAMES = lexicon.word_set("not_names.en")

# words after which a captured value stops ("I moved to Berlin LAST month")
_EN_STOP = (
    r"with|for|since|last|this|next|in|on|at|from|because|as|but|so|after|before|until|tonight|"
    r"till|during|when|while|where|which|who|whom|recently|now|already|anymore|any more|"
    r"again|too|also|ago|yesterday|today|tomorrow|currently|these days|nowadays|"
    r"permanently|for good|full-time|full time|part-time|remotely|together|alone|"
    r"instead|though|although|right now|lately|every|each|mostly|usually|often|daily|"
    r"weekly|a few|a couple|about|around|over|rather than|than|to|via|by|through|"
    r"!|:|-|(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a few|"
    r"a couple of|several) (?:years?|months?|weeks?|days?|hours?)|"
    + "|".join(lexicon.tagged("acknowledgements", "value_end"))
)
V = r"[^,;!?()]+?"  # a lazily captured value; its end is given by END
END = rf"(?=\s+(?:{_EN_STOP})\b|\s+(?:{_EN_STOP})$|\s*$)"
STRICT_END = r"(?:\s+(?:now|anymore|any more|already|too|again|instead|though|then))*\s*$"

ADV = (
    r"(?:(?:now|currently|still|just|recently|finally|officially|actually|already|"
    r"permanently|eventually|happily|newly|really|do|does)\s+)*"
)
NOW = r"(?:(?:now|currently|still|just|recently|finally|officially|already)\s+)*"

# a job title: up to three modifiers and a head ("senior backend engineer")
_TITLE_MODIFIER = rf"(?!(?:{lexicon.alternation('not_title_modifiers.en')})\b)[a-z][\w/&+.-]*"
JOB_TITLE_EN = rf"(?:{_TITLE_MODIFIER}\s+){{0,3}}(?:{lexicon.alternation('job_heads.en')})s?"
JOB_TITLE_EN_RE = re.compile(JOB_TITLE_EN)

TRAVEL = (
    r"(?:business trip|road trip|ski trip|trip|vacation|holiday|holidays|visit|journey|"
    r"honeymoon|getaway|tour|travel|travels|flight|flights|vacay|trek)"
)
TRAVEL_ADJ = (
    r"(?:(?:big|little|short|long|quick|family|solo|summer|winter|spring|autumn|fall|weekend|"
    r"upcoming|planned|next|[\w]+-(?:day|week|month)|\d+-(?:day|week))\s+)?"
)
GO = (
    r"(?:go|going|travel|traveling|travelling|fly|flying|head|heading|visit|visiting|"
    r"move|moving|return|returning|run|running|attend|attending)"
)
DIET = r"(?P<v>vegetarian|vegan|pescatarian|pescetarian|veggie|plant-based)"
DIET_ANY = (
    r"(?P<v>vegetarian|vegan|pescatarian|pescetarian|plant-based|keto|ketogenic|paleo|"
    r"mediterranean|low-carb|low carb|atkins|whole30|carnivore|intermittent fasting)"
)
REL = r"(?P<v>single|married|engaged|divorced|widowed)"
REL_END = (
    r"(?:\s+(?:to|with)\s+[^,;]+?)?(?:\s+(?:last|this) \w+|\s+\w+ (?:days?|weeks?|months?|"
    r"years?) ago|\s+in (?:19|20)\d\d|\s+recently|\s+now|\s+again|\s+already)?\s*$"
)
