"""Which older memories of a user a new memory makes outdated, without a language model.

`frame` reads an *attribute frame* from a short memory text ("I moved to Shanghai last month"
-> residence = shanghai) and `retired_by` names the older memories of the same user that a new
one makes outdated ("I live in Hangzhou": "residence: hangzhou -> shanghai"); `restates` finds
an older memory the new one repeats in other words. English and Chinese (and Chinese with Latin
words, "我现在用 VS Code 写代码"); first person ("I", "my", "我", "我的") or third person ("the
user", "用户") as the subject, and "he"/"she"/"他"/"她" in a memory that names nobody else;
mem0-style subjectless facts ("Lives in Hangzhou", "住在杭州") are the user's. What is said
about someone else ("my sister lives in Paris", "我妈妈住在北京") gives no frame.

Precision first: retiring a true memory hides it from recall, which is worse than keeping a
stale one. Rules are anchored at the start of a clause; questions, hypotheticals ("if",
"maybe", "如果", "可能"), negations, hedges, future moves ("I'm moving to X next month") and
past states ("I lived in X") give no frame. Texts over `MAX_CHARS` are left alone.

Every rule has a name ("en.residence.moved_to"), examples it must read and texts it must not,
beside its builder in `en/` and `zh/`; `explain` says which rule read each frame of a text, so
a pair retired wrongly (or not at all) is traced to a rule. The word lists are data files in
`memorystore/rules/lexicons/`.

Slots (`Frame.slot`):

- single-valued, a new value retires a different old one: ``residence``, ``employer``,
  ``job_title``, ``education`` (student roles, kept apart from jobs), ``school``,
  ``favourite:<noun>``, ``name``, ``age``, ``diet`` (vegetarian, vegan, pescatarian),
  ``diet_plan`` (keto, mediterranean...), ``relationship``, ``phone`` (brand and model),
  ``phone_number``, ``car``, ``laptop``;
- multi-valued, retired only by an explicit switch or cancellation that names the old value:
  ``usage:<category or ''>`` ("I use X (for C)", "我用X写代码"), ``like:`` ("I like X"),
  ``plan:<object>`` ("I'm planning a trip to Japan", "我打算去日本").

Markers carried by a frame:

- ``cancel=True``: "I no longer use X", "I cancelled my trip to Japan", "我不住在杭州了"; the
  frame states no new value (``value == ""``) and ``previous`` holds what is cancelled.
- ``previous="x"``: an explicit switch naming the old value ("I switched from X to Y").
- ``previous=""``: a change whose old value is not named ("I switched to Y", "我改用Y了",
  "I got promoted to X", "I moved to X"): the new value replaces a different old one of the
  same slot (or usage category) even when the old value is contained in the new one.
- an unnamed value keeps its article ("a fintech startup", "一家创业公司"): a named value
  retires it, it never retires one.
"""

from __future__ import annotations

from memorystore.rules.supersede.analysis import MAX_CHARS, RULES, Reading, analyse, read_by
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.retirement import restates, retired_by
from memorystore.rules.supersede.rule import Rule
from memorystore.rules.supersede.supersession import supersedes

__all__ = [
    "MAX_CHARS",
    "RULES",
    "Frame",
    "Reading",
    "Rule",
    "explain",
    "frame",
    "frames",
    "read_by",
    "restates",
    "retired_by",
    "supersedes",
]


def frames(text: str) -> tuple[Frame, ...]:
    """Every frame of a memory text, in text order (usually none or one)."""
    return analyse(text).frames


def frame(text: str) -> Frame | None:
    """The attribute frame of a memory text (its first when it states several), or None."""
    found = frames(text)
    return found[0] if found else None


def explain(text: str) -> tuple[Reading, ...]:
    """Each frame of a text with the name of the rule that read it, in text order."""
    return analyse(text).readings
