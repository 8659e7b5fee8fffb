"""Builders that rules of both languages use: each reads the match as Chinese or English by
the clause's script ("我的手机是iPhone 15", "My phone is an iPhone 15").

Why shared: a favourite, a switch or a thing is the same frame in either language; only how
its value is read differs.
"""

from __future__ import annotations

import re

from memorystore.rules import lexicon
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import (
    ZH_INDEFINITE,
    en_value,
    first_group,
    phone,
    upper_at,
    zh_is_place,
    zh_plan_obj,
    zh_value,
)
from memorystore.rules.supersede.rule import Clause
from memorystore.rules.supersede.text import HAS_HAN, ZH_OTHER_PERSON
from memorystore.rules.supersede.values import (
    ALIASES,
    EN_PLACES,
    PRONOUN_VALUES,
    norm,
    overlap,
)

__all__ = ["cancel_like", "favourite", "like", "name", "plan_instead", "switch", "thing"]

_NOT_A_NAME = re.compile(r"(?:not|no|none|secret|private|unknown)\b|[他她你它不没]")


def name(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    raw = m.group("v")
    start = c.rest + m.start("v")
    if not HAS_HAN.search(raw) and not upper_at(c, start):
        return []
    v = norm(raw)
    if not v or v in PRONOUN_VALUES or _NOT_A_NAME.match(v) or ZH_OTHER_PERSON.search(v):
        return []
    return [Frame("name", v)] if single_ok else []


_THING_SLOTS = {
    "phone number": "phone_number",
    "cell number": "phone_number",
    "mobile number": "phone_number",
    "手机号码": "phone_number",
    "手机号": "phone_number",
    "电话号码": "phone_number",
    "cell phone": "phone",
    "mobile": "phone",
    "smartphone": "phone",
    "手机": "phone",
    "汽车": "car",
    "车子": "car",
    "车": "car",
    "电脑": "laptop",
    "笔记本电脑": "laptop",
    "笔记本": "laptop",
}
_NON_DIGIT = re.compile(r"\D")
_ZH_BRAND = re.compile(
    r"[A-Za-z]|华为|小米|苹果|三星|特斯拉|比亚迪|宝马|奔驰|奥迪|丰田|本田|大众|蔚来|理想|小鹏|荣耀|一加|"
    r"联想|戴尔|惠普|红米|魅族|极氪|问界|吉利|长城|福特|雷克萨斯|保时捷|沃尔沃|日产|别克|五菱"
)


def thing(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    """A phone, phone number, car or laptop: "my phone is X", "我的车是X"."""
    k = m.group("k")
    key = _THING_SLOTS.get(k, k)
    if key == "phone_number":
        digits = _NON_DIGIT.sub("", m.group("v"))
        return [Frame("phone_number", digits)] if len(digits) >= 5 and single_ok else []
    if HAS_HAN.search(c.text):
        v = zh_value(m.group("v"))
        if v is None or ZH_INDEFINITE.match(v) or not _ZH_BRAND.search(v):
            return []  # "我的车是红色的": a colour, not a car
    else:
        v = en_value(c, m, "v", cap=True, words=5)
    if key == "phone" and v:
        v = phone(v) or v
    return [Frame(key, v)] if v and single_ok else []


_ZH_VERB_LEAD = re.compile(r"^(?:用|喝|吃|看|听|玩|读)+")
_NOUN_TAIL = re.compile(r"\s+(?:of all time|ever|right now|at the moment|these days)$")
_PLURAL_S = re.compile(r"(?<=[a-z]{3}[^siu])s$")  # "movies", not "analysis" or "bus"
# "my favourite part is the ending": of what? not one attribute of the user
_GENERIC_FAVOURITES = lexicon.word_set("generic_favourites")


def favourite(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    n = norm(m.group("n")) if m.group("n") else ""
    n = ALIASES.get(n, n)
    if HAS_HAN.search(c.text):
        v = zh_value(m.group("v"), limit=20)
        n = _ZH_VERB_LEAD.sub("", n)
    else:
        v = en_value(c, m, "v", cap=False, words=6, indefinite=True)
        n = _NOUN_TAIL.sub("", n)
        n = _PLURAL_S.sub("", n)
    if not v or not n or len(n) > 30 or n in PRONOUN_VALUES or n in _GENERIC_FAVOURITES:
        return []
    return [Frame(f"favourite:{n}", v, previous="" if c.chg else None)] if single_ok else []


# "我把手机换成小米了": the thing named is what changed
_ZH_THING_NOUNS = {
    "手机": "phone",
    "车": "car",
    "汽车": "car",
    "电脑": "laptop",
    "笔记本": "laptop",
}


def switch(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    """A switch from a named old value to a new one, of a usage, a place or a thing."""
    vname, _ = first_group(m, "v", "v2", "v3")
    pname, _ = first_group(m, "p", "p2", "p3")
    if vname is None:
        return []
    zh = bool(HAS_HAN.search(c.text))
    p: str | None = None
    if zh:
        v = zh_value(m.group(vname))
        p = zh_value(m.group(pname)) if pname else None
    else:
        v = en_value(c, m, vname, cap=False, words=5, indefinite=True)
        p = en_value(c, m, pname, cap=False, words=5, indefinite=True) if pname else None
    n = norm(m.group("n")) if m.groupdict().get("n") else c.topic
    if not v or (pname is not None and not p):
        return []
    if p is not None and p == v:
        return []
    if p and (p in EN_PLACES or v in EN_PLACES or (zh and zh_is_place(p))):
        return [Frame("residence", v, previous=p)] if single_ok else []
    if p and p in _ZH_THING_NOUNS:
        slot = _ZH_THING_NOUNS[p]
        value = phone(v) if slot == "phone" else v
        return [Frame(slot, value or v, previous="")] if single_ok else []
    if phone(v) and (p is None or phone(p)) and not n:
        prev = phone(p) if p else ""
        return [Frame("phone", phone(v) or v, previous=prev)] if single_ok else []
    return [Frame(f"usage:{n}", v, previous=p if p is not None else "")]


def like(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    if HAS_HAN.search(c.text):
        v = zh_value(m.group("v"))
    else:
        v = en_value(c, m, "v", cap=False, words=5, indefinite=True)
    return [Frame("like:", v)] if v else []


def cancel_like(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    group, raw = first_group(m, "v", "v2", "v3", "v4")
    if group is None:
        return []
    v = zh_value(raw) if HAS_HAN.search(c.text) else en_value(c, m, group, cap=False)
    return [Frame("like:", "", cancel=True, previous=v)] if v else []


def plan_instead(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    """ "I'm going to Korea instead of Japan", "去韩国而不是日本": one plan for another."""
    if HAS_HAN.search(c.text):
        v, p = zh_plan_obj(m.group("v")), zh_plan_obj(m.group("p"))
    else:
        v = en_value(c, m, "v", cap=True, words=4)
        p = en_value(c, m, "p", cap=True, words=4)
    if not v or not p or overlap(v, p):
        return []
    return [Frame(f"plan:{v}", v, previous=p)]
