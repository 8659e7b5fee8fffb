"""The extraction model as a judge of outdated memories (supersession with a model).

mem0's open-source pipeline is add-only since 2.0: it extracts new facts and never retires an
old one. After mem0 has written a scope's new facts, the service asks the same model, in one
call, which of the scope's nearest existing memories the new facts make outdated. The answer
is validated strictly: an entry that names no listed memory or new fact is ignored, and an
answer that is not the JSON asked for raises `JudgeError` (the caller then falls back to the
offline rules in `memorystore/rules/supersede/`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

JUDGE_HEADER = "You keep a user's long-term memory consistent."
INSTRUCTIONS = (
    f"{JUDGE_HEADER} You get NEW facts just learned about the user and EXISTING memories "
    "about the same user. An existing memory is OUTDATED when a new fact states a different "
    "current value of the same single-valued attribute: where the user lives, where they "
    "work, their role, a favourite, a preference they switched, a plan they changed or "
    "cancelled; or when a new fact says what it says and more. A memory that is merely "
    "related, is about another person, or says something the new facts do not, is NOT "
    "outdated. A new fact is the SAME as an existing memory when it says nothing the memory "
    "does not already say. Answer with JSON only, in this shape: "
    '{"outdated": [{"existing": <number of the existing memory>, "by": <number of the new '
    'fact>, "reason": "<a few words>"}], "same": [{"new": <number of the new fact>, '
    '"existing": <number of the existing memory>}]}, with empty lists when there is nothing.'
)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
_NUMBERED = re.compile(r"^\d+\. (.*)$")


class JudgeError(ValueError):
    """The model's answer is not the JSON asked for."""


@dataclass(frozen=True)
class Verdict:
    """`outdated`: the new fact retires the old memory; `same`: the new fact repeats it."""

    old_id: str
    new_id: str
    reason: str
    kind: str = "outdated"


def prompt(
    new: Sequence[tuple[str, str]], existing: Sequence[tuple[str, str]]
) -> list[dict[str, str]]:
    """The chat messages for one judgement; memories are numbered, ids never reach the model."""
    listed = "\n".join(
        ["NEW facts:"]
        + [f"{i}. {text}" for i, (_, text) in enumerate(new, 1)]
        + ["", "EXISTING memories:"]
        + [f"{i}. {text}" for i, (_, text) in enumerate(existing, 1)]
    )
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": listed}]


def listed(listing: str) -> tuple[list[str], list[str]]:
    """The new facts and existing memories of `prompt`'s listing, in order: its inverse, so the
    listing's format is defined here only (the stand-in models read it back)."""
    new_part, _, old_part = listing.partition("EXISTING memories:")

    def numbered(part: str) -> list[str]:
        found = (_NUMBERED.match(line.strip()) for line in part.splitlines())
        return [m.group(1) for m in found if m]

    return numbered(new_part), numbered(old_part)


def parse(
    answer: str, new: Sequence[tuple[str, str]], existing: Sequence[tuple[str, str]]
) -> list[Verdict]:
    """The verdicts in the model's answer, mapped back to memory ids."""
    try:
        data = json.loads(_FENCE.sub("", answer.strip()))
    except json.JSONDecodeError as exc:
        raise JudgeError(f"not JSON: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("outdated"), list):
        raise JudgeError('no "outdated" list in the answer')
    same: dict[str, Verdict] = {}  # by new fact: it is dropped, nothing it says can retire
    said: object = data.get("same")
    for entry in said if isinstance(said, list) else []:
        if not isinstance(entry, dict):
            continue
        if _index(entry.get("new"), new) and _index(entry.get("existing"), existing):
            new_id, old_id = new[entry["new"] - 1][0], existing[entry["existing"] - 1][0]
            same.setdefault(new_id, Verdict(old_id, new_id, "said before", "same"))
    verdicts: dict[str, Verdict] = {}
    for entry in data["outdated"]:
        if not isinstance(entry, dict):
            continue
        old, by = entry.get("existing"), entry.get("by")
        if not (_index(old, existing) and _index(by, new)) or new[by - 1][0] in same:
            continue
        reason = str(entry.get("reason") or "outdated by a new fact")[:200]
        old_id = existing[old - 1][0]
        verdicts.setdefault(old_id, Verdict(old_id, new[by - 1][0], reason))
    return [*same.values(), *verdicts.values()]


def _index(value: object, items: Sequence[object]) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(items)


def judge(
    chat: Callable[[list[dict[str, str]]], str],
    new: Sequence[tuple[str, str]],
    existing: Sequence[tuple[str, str]],
) -> list[Verdict]:
    """Ask the model once; [] without anything to compare."""
    if not new or not existing:
        return []
    return parse(chat(prompt(new, existing)), new, existing)
