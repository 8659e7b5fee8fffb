"""The attribute frame a memory states: what the rules read and supersession compares."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SINGLE_VALUED", "Frame", "single"]


@dataclass(frozen=True)
class Frame:
    slot: str  # e.g. "residence", "employer", "favourite:movie", "plan:japan", "usage:"
    value: str  # normalised value, "" for a pure cancellation
    cancel: bool = False  # "I cancelled X / I no longer use X": retires frames matching X
    previous: str | None = None  # "switched from X to Y": the named old value X (normalised)


# a new value of one of these retires a different old one; other slots hold many values
SINGLE_VALUED = frozenset(
    {
        "residence",
        "employer",
        "job_title",
        "education",
        "school",
        "name",
        "age",
        "diet",
        "diet_plan",
        "relationship",
        "phone",
        "phone_number",
        "car",
        "laptop",
    }
)


def single(slot: str) -> bool:
    return slot in SINGLE_VALUED or slot.startswith("favourite:")
