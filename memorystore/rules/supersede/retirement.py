"""Which older memories a new memory text retires, and whether it only restates one.

Why by whole texts: an old memory is retired only when every fact it states is superseded and
it says nothing else ("I live in Hangzhou. I love hiking." stays), and a new memory whose every
frame an older one already states is a repeat in other words, which de-duplication's text
rules cannot see.
"""

from __future__ import annotations

from collections.abc import Iterable

from memorystore.rules.supersede.analysis import analyse
from memorystore.rules.supersede.supersession import reason, supersedes

__all__ = ["restates", "retired_by"]


def retired_by(new_text: str, old: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """For a new memory text and the (id, text) of older memories of the same user, the
    (id, reason) of those the new one makes outdated; reason is a short human-readable
    string naming the slot and the values, e.g. "residence: hangzhou -> shanghai"."""
    new_frames = analyse(new_text).frames
    if not new_frames:
        return []
    new_key = analyse(new_text).key
    out: list[tuple[str, str]] = []
    for memory_id, text in old:
        if not isinstance(text, str) or text == new_text:
            continue
        analysis = analyse(text)
        if not analysis.readings or not analysis.covered or analysis.key == new_key:
            continue
        reasons: list[str] = []
        for old_frame in analysis.frames:
            by = next((f for f in new_frames if supersedes(f, old_frame)), None)
            if by is None:
                break
            reasons.append(reason(by, old_frame))
        else:
            out.append((memory_id, "; ".join(reasons)))
    return out


def restates(new_text: str, old: Iterable[tuple[str, str]]) -> str | None:
    """The id of an older memory that already states every attribute the new text states,
    with the same values ("As I said, I'm in Shanghai now" after "We moved to Shanghai")."""
    wanted = {
        (f.slot, _norm_value(f.value)) for f in analyse(new_text).frames if f.value and not f.cancel
    }
    if not wanted:
        return None
    for memory_id, text in old:
        if not isinstance(text, str) or text == new_text:
            continue
        have = {
            (f.slot, _norm_value(f.value)) for f in analyse(text).frames if f.value and not f.cancel
        }
        if wanted <= have:
            return memory_id
    return None


def _norm_value(value: str) -> str:
    return " ".join(value.casefold().split())
