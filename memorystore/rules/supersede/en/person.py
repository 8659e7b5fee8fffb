"""English rules for who the user is: diet, relationship, name, age, and their phone, car or
laptop.

Why each its own slot: each holds one value at a time, so "I'm vegan now" retires "I'm
vegetarian", while a diet plan ("keto") is kept apart from being vegetarian, which it does
not contradict.
"""

from __future__ import annotations

import re

from memorystore.rules.supersede.builders import name, thing
from memorystore.rules.supersede.en.grammar import (
    DIET,
    DIET_ANY,
    END,
    NOW,
    REL,
    REL_END,
    STRICT_END,
    V,
)
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import diet, first_group
from memorystore.rules.supersede.rule import Clause, rule

__all__ = [
    "CALLED",
    "DATING",
    "FOLLOWS_DIET",
    "IS_VEGETARIAN",
    "MARRIED",
    "MY_AGE_IS",
    "MY_NAME_IS",
    "MY_PHONE_IS",
    "NO_LONGER_VEGETARIAN",
    "YEARS_OLD",
]


def _diet(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return [Frame("diet", diet(m.group("v")))] if single_ok else []


def _diet_any(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    d = diet(m.group("v"))
    slot = "diet" if d in ("vegetarian", "vegan", "pescatarian") else "diet_plan"
    return [Frame(slot, d)] if single_ok else []


def _cancel_diet(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    _, d = first_group(m, "v", "v2")
    return [Frame("diet", "", cancel=True, previous=diet(d or ""))]


def _relationship(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return [Frame("relationship", m.group("v"))] if single_ok else []


def _dating(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    if not single_ok:
        return []
    return [Frame("relationship", "single" if m.groupdict().get("bu") else "dating")]


def _age(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    n = int(m.group("v"))
    return [Frame("age", str(n))] if 0 < n < 130 and single_ok else []


IS_VEGETARIAN = rule(
    "en.diet.is_vegetarian",
    "diet",
    "subj",
    "veg|pesc|plant",
    rf"^(?:am|is|have become|has become|became|went|have gone|has gone|turned|eat|"
    rf"have been|has been)\s+{NOW}(?:a |an |fully |strictly |strict |completely )?"
    rf"{DIET}{STRICT_END}",
    _diet,
    positives=[
        ("I'm vegan now", Frame("diet", "vegan")),
        ("I'm vegetarian.", Frame("diet", "vegetarian")),
        ("The user is vegetarian.", Frame("diet", "vegetarian")),
    ],
    negatives=["My wife is vegan.", "I'm not a vegan."],
)

NO_LONGER_VEGETARIAN = rule(
    "en.diet.no_longer_vegetarian",
    "diet",
    "subj",
    "veg|pesc|plant",
    rf"^(?:am|is)\s+(?:not|no longer)\s+(?:a |an )?{DIET}(?:\s+(?:anymore|any more))?"
    rf"\s*$|^(?:stopped|quit) being\s+(?:a |an )?{DIET.replace('<v>', '<v2>')}\s*$",
    _cancel_diet,
    positives=[
        ("I'm not vegetarian anymore.", Frame("diet", "", cancel=True, previous="vegetarian")),
        ("I stopped being a vegan.", Frame("diet", "", cancel=True, previous="vegan")),
    ],
    negatives=["My friend is no longer vegan.", "I'm not sure about vegan food."],
)

MARRIED = rule(
    "en.relationship.married",
    "relationship",
    "subj",
    "single|married|engaged|divorced|widowed",
    rf"^(?:am|is|got|have gotten|has gotten|just got|recently got)\s+{NOW}"
    rf"(?:happily |newly |officially )?{REL}{REL_END}",
    _relationship,
    positives=[
        ("I got married", Frame("relationship", "married")),
        ("I'm single.", Frame("relationship", "single")),
        ("I'm engaged to Anna.", Frame("relationship", "engaged")),
    ],
    negatives=["I'm engaged in a new project.", "My brother got divorced.", "Are you single?"],
)

DATING = rule(
    "en.relationship.dating",
    "relationship",
    "subj",
    "dating|relationship|broke up",
    r"^(?:am|is) (?:now )?(?:in a relationship|dating someone|seeing someone)"
    r"(?:\s+with\s+[^,;]+)?\s*$|^(?P<bu>broke up|have broken up|has broken up)"
    r"(?:\s+with\s+[^,;]+)?\s*$",
    _dating,
    positives=[
        ("I'm now in a relationship.", Frame("relationship", "dating")),
        ("I broke up with Sam.", Frame("relationship", "single")),
    ],
    negatives=["My sister is dating someone.", "I'm seeing someone's point."],
)

MY_NAME_IS = rule(
    "en.name.my_name_is",
    "name",
    "poss",
    "name",
    r"^(?:full |real |first )?name\s+is\s+(?P<v>[^\s,;]+(?:\s+[^\s,;]+){0,2}?)\s*$",
    name,
    positives=[
        ("My name is Tom", Frame("name", "tom")),
        ("My name is Nora", Frame("name", "nora")),
    ],
    negatives=["My dog's name is Max.", "My name is not important."],
)

CALLED = rule(
    "en.name.called",
    "name",
    "subj",
    "called|go by",
    r"^(?:am|is)\s+called\s+(?P<v>[^\s,;]+(?:\s+[^\s,;]+){0,2}?)\s*$",
    name,
    positives=[
        ("I'm called Tom.", Frame("name", "tom")),
        ("The user is called Anna Lee.", Frame("name", "anna lee")),
    ],
    negatives=["I'm called to the bar.", "My cat is called Mochi."],
)

YEARS_OLD = rule(
    "en.age.years_old",
    "age",
    "subj",
    "am |is |turned",
    r"^(?:am|is|just turned|turned|have turned|has turned|recently turned)\s+"
    r"(?P<v>\d{1,3})(?:\s+years?\s+old|\s+yo|\s+years? of age)?"
    r"(?:\s+(?:last|this) \w+|\s+today|\s+yesterday|\s+now)?\s*$",
    _age,
    positives=[("I'm 30 years old", Frame("age", "30")), ("I just turned 31.", Frame("age", "31"))],
    negatives=["I am 30 years old and tired of it.", "My son is 5 years old."],
)

MY_AGE_IS = rule(
    "en.age.my_age_is",
    "age",
    "poss",
    "age",
    r"^age\s+is\s+(?:now\s+)?(?P<v>\d{1,3})\s*$",
    _age,
    positives=[("My age is 31.", Frame("age", "31")), ("My age is now 42.", Frame("age", "42"))],
    negatives=["My age is a secret.", "My son's age is 5."],
)

MY_PHONE_IS = rule(
    "en.phone.my_phone_is",
    "phone",
    "poss",
    "phone|car|laptop|mobile",
    rf"^(?:new |current )?(?P<k>phone number|cell number|mobile number|phone|cell phone|"
    rf"mobile|smartphone|car|laptop)\s+is\s+(?:now\s+)?(?:a |an |the )?(?P<v>{V}){END}",
    thing,
    positives=[
        ("My phone is an iPhone 15", Frame("phone", "iphone 15")),
        ("My phone number is 138-0000-1234", Frame("phone_number", "13800001234")),
        ("My car is a Tesla Model 3.", Frame("car", "tesla model 3")),
    ],
    negatives=["My phone is broken.", "My phone number is 12."],
)

FOLLOWS_DIET = rule(
    "en.diet.follows_diet",
    "diet",
    "subj",
    "diet|keto|paleo|carb|vegan|vegetarian|mediterranean|fasting",
    rf"^(?:(?:am|is)\s+)?{NOW}(?:on|following|follow|follows|eating|eat|eats|doing|do|does|"
    rf"started|start|have started|has started|switched to|have switched to|has switched to|"
    rf"went|have gone|has gone)\s+(?:a |an |the )?(?:strict |mostly |fully )?{DIET_ANY}"
    rf"(?:\s+(?:diet|food|meals|eating|lifestyle))?{STRICT_END}",
    _diet_any,
    positives=[
        ("I'm on a keto diet", Frame("diet_plan", "keto")),
        ("The user follows a vegan diet.", Frame("diet", "vegan")),
        ("I follow a Mediterranean diet now.", Frame("diet_plan", "mediterranean")),
    ],
    negatives=["I'm on a diet.", "My mom follows a keto diet."],
)
