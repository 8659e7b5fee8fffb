"""Offline text rules shared by the service and the agent side (no mem0): scripts, sentences,
the user's statements, de-duplication and supersession, with their word lists as data files
(`lexicons/`).

Two analyses are cached per text (`dedup.text.analyse`, `supersede.analysis.analyse`), so a
process holds recent memory texts there; an erasure empties both (`forget_texts`), so no
erased text stays in the service's memory through them.
"""

from __future__ import annotations

__all__ = ["forget_texts"]


def forget_texts() -> None:
    """Empty the per-text caches of the rules (after an erasure)."""
    from memorystore.rules.dedup import text
    from memorystore.rules.supersede import analysis

    text.analyse.cache_clear()
    analysis.analyse.cache_clear()
