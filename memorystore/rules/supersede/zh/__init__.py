"""The Chinese supersession rules, in the order they are tried (see `en/__init__.py` on why
the order matters)."""

from __future__ import annotations

from memorystore.rules.supersede.rule import Rule
from memorystore.rules.supersede.zh import home, person, plans, usage, work

__all__ = ["RULES"]

RULES: tuple[Rule, ...] = (
    home.LIVES_IN,
    home.LIVES_THERE,
    home.MOVED_TO,
    home.NO_LONGER_LIVES,
    home.LEFT,
    work.WORKS_AT,
    work.WORKS_AS_AT,
    work.JOINED,
    work.MY_COMPANY_IS,
    work.LEFT,
    work.IS_A,
    work.PROMOTED_TO,
    work.MY_TITLE_IS,
    person.VEGETARIAN,
    person.NO_LONGER_VEGETARIAN,
    person.FOLLOWS_DIET,
    person.STATUS,
    person.CALLED,
    person.MY_NAME_IS,
    person.YEARS_OLD,
    person.MY_PHONE_IS,
    usage.MY_FAVOURITE_IS,
    usage.IS_MY_FAVOURITE,
    usage.TOPIC_PREFER,
    usage.PREFER,
    usage.SWITCHED_FROM,
    usage.SWITCHED_TO,
    usage.USES,
    usage.TASK_USES,
    usage.NO_LONGER_USES,
    usage.LIKES,
    usage.NO_LONGER_LIKES,
    plans.GOING_TO,
    plans.INSTEAD_OF,
    plans.CANCELLED,
    plans.NOT_GOING,
    plans.IS_OFF,
)
