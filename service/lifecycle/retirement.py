"""What a retired memory carries, and the filter that leaves retired memories out.

Why a module of its own: a memory made outdated (superseded, or merged into a fuller one)
stays stored, marked with the fields below; the engine writes them (engine/writes.py), every
read leaves such memories out unless asked (`active_only`), the export format carries them
(portability/document.py) and the stores keyword-index the marker. Those parts share this
vocabulary without importing the engine.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "LIFECYCLE_KEY",
    "REASON_KEY",
    "RETIRED",
    "RETIRED_AT_KEY",
    "RETIRED_KEYS",
    "SUCCESSOR_KEY",
    "active_only",
    "retirement_fields",
]

LIFECYCLE_KEY = "lifecycle"  # "retired" (a keyword: the stores index it); absent: active
RETIRED = "retired"
RETIRED_AT_KEY = "retired_at"
SUCCESSOR_KEY = "superseded_by"
REASON_KEY = "retired_because"
RETIRED_KEYS = (LIFECYCLE_KEY, RETIRED_AT_KEY, SUCCESSOR_KEY, REASON_KEY)


def retirement_fields(when: str, successor: str, reason: str) -> dict[str, str]:
    """The payload fields that retire a memory (patched into it; the memory stays)."""
    return {
        LIFECYCLE_KEY: RETIRED,
        RETIRED_AT_KEY: when,
        SUCCESSOR_KEY: successor,
        REASON_KEY: reason,
    }


def active_only(filters: dict[str, Any], include_retired: bool = False) -> dict[str, Any]:
    """`filters` narrowed to memories that are not retired (unless include_retired).

    The condition joins the request's own NOT list in whichever spelling it used (the
    stores read one of `NOT` / `$not`)."""
    if include_retired:
        return filters
    key = "$not" if "$not" in filters and "NOT" not in filters else "NOT"
    return {**filters, key: [*filters.get(key, []), {LIFECYCLE_KEY: RETIRED}]}
