"""Whether one frame makes another outdated, and how to say so.

Why precision first: retiring a true memory hides it from recall, which is worse than keeping
a stale one. A single-valued slot is retired by a surely different value; a multi-valued one
(usage, likes, plans) only by a switch or a cancellation that names the old value.
"""

from __future__ import annotations

from memorystore.rules.supersede.frame import Frame, single
from memorystore.rules.supersede.reading import ZH_UNNAMED
from memorystore.rules.supersede.values import (
    LIST_MARK,
    contains,
    is_cjk,
    is_region,
    names,
    overlap,
    same,
)

__all__ = ["reason", "supersedes"]


def _family(slot: str) -> tuple[str, str]:
    family, _, category = slot.partition(":")
    return family, category


def _usage_targets(cat_new: str, fam_old: str, cat_old: str) -> bool:
    """A usage switch/cancellation reaches the old frame: a category named by the new one
    ("for backend") must be the old one's; without one it reaches every usage and favourite."""
    if fam_old == "usage":
        return not cat_new or cat_new == cat_old
    return fam_old == "favourite" and not cat_new


def _unnamed(value: str) -> bool:
    return value.startswith(("a ", "an ")) or bool(ZH_UNNAMED.match(value))


def supersedes(new: Frame, old: Frame) -> bool:
    """Whether the statement `new` makes the older statement `old` outdated."""
    if old.cancel or not old.value:
        return False
    fam_new, cat_new = _family(new.slot)
    fam_old, cat_old = _family(old.slot)
    if new.cancel:
        target = new.previous or ""
        if fam_new == "plan":
            return fam_old == "plan" and overlap(cat_new or target, cat_old)
        if not target:
            return False
        if fam_new == "usage":
            return _usage_targets(cat_new, fam_old, cat_old) and names(old.value, target)
        if fam_new == "like":
            return fam_old in ("like", "favourite") and names(old.value, target)
        return new.slot == old.slot and names(old.value, target)
    if not new.value:
        return False
    if fam_new == "plan":
        return (
            bool(new.previous)
            and fam_old == "plan"
            and overlap(new.previous or "", cat_old)
            and not overlap(cat_new, cat_old)
        )
    if new.previous:  # an explicit switch naming the old value
        if fam_new == "usage":
            ok = _usage_targets(cat_new, fam_old, cat_old)
        elif fam_new == "favourite":
            ok = old.slot == new.slot or (fam_old == "usage" and not cat_old)
        else:
            ok = new.slot == old.slot
        if ok and names(old.value, new.previous) and not same(old.value, new.value):
            return True
    if single(new.slot) and new.slot == old.slot:
        if _unnamed(new.value):
            return False  # "a startup" may be the very employer the old memory names
        if is_cjk(new.value) != is_cjk(old.value):
            return False  # "杭州" and "Hangzhou" can't be compared here
        if new.slot == "residence" and is_region(new.value) != is_region(old.value):
            return False  # "California" and "San Francisco" can both be true
        if new.previous is not None:  # a change: the old value is replaced unless it says more
            return not contains(old.value, new.value)
        return not same(new.value, old.value)
    if fam_new == "usage" and new.previous == "" and cat_new:
        # "from now on I use Y for C", "C我改用Y了": the usage of that category changed
        return (
            fam_old == "usage"
            and cat_old == cat_new
            and not same(new.value, old.value)
            and not LIST_MARK.search(old.value)
        )
    return False


def reason(new: Frame, old: Frame) -> str:
    """What a retirement says: the slot and the values ("residence: hangzhou -> shanghai")."""
    fam, category = _family(old.slot)
    slot = fam if fam == "plan" or not category else old.slot
    after = "cancelled" if new.cancel else new.value
    return f"{slot}: {old.value} -> {after}"
