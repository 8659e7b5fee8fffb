"""The English supersession rules, in the order they are tried on a clause.

Why the order matters: the frames of a clause are kept in rule order, and of two readings
of one value the more specific wins, the first among equals.
"""

from __future__ import annotations

from memorystore.rules.supersede.en import home, person, plans, usage, work
from memorystore.rules.supersede.rule import Rule

__all__ = ["RULES"]

RULES: tuple[Rule, ...] = (
    home.LIVES_IN,
    home.LIVED_SINCE,
    home.MOVED_TO,
    home.NO_LONGER_LIVES,
    work.WORKS_AT,
    work.NEW_JOB_AT,
    work.HIRED_AT,
    work.JOINED_AS,
    work.CHANGED_JOBS,
    work.MY_EMPLOYER_IS,
    work.LEFT,
    work.LEFT_FOR,
    work.WORKS_AS,
    work.IS_A,
    work.PROMOTED_TO,
    work.MY_TITLE_IS,
    person.IS_VEGETARIAN,
    person.NO_LONGER_VEGETARIAN,
    person.MARRIED,
    person.DATING,
    person.MY_NAME_IS,
    person.CALLED,
    person.YEARS_OLD,
    person.MY_AGE_IS,
    person.MY_PHONE_IS,
    usage.MY_FAVOURITE_IS,
    usage.IS_MY_FAVOURITE,
    usage.PREFER_FOR,
    usage.PREFER,
    usage.INSTEAD_OF,
    usage.SWITCHED_FROM,
    usage.SWITCHED_TO,
    usage.REPLACED_WITH,
    usage.USE_AS_MAIN,
    person.FOLLOWS_DIET,
    usage.USES,
    usage.NO_LONGER_USES,
    usage.LIKES,
    usage.NO_LONGER_LIKES,
    plans.GOING_TO,
    plans.INSTEAD_OF,
    plans.CANCELLED,
    plans.FORGET,
    plans.IS_OFF,
    plans.NOT_GOING,
)
