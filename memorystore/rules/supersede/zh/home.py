"""Chinese rules for where the user lives: "我住在X", "我在X生活", "我搬到了X", "我不住在X了",
"我离开了X".

Why strict: "住" and "在" are everywhere ("住院", "在医院住了三天", "我住在公司附近"), so a bare
"住" must name a known place (`lexicons/places.zh.txt`) and a value relative to something
("附近", "家里", "宿舍") is no residence.
"""

from __future__ import annotations

import re

from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import ZH_INDEFINITE, zh_is_place, zh_value
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.zh.grammar import ZADV, ZTAIL, ZV

__all__ = ["LEFT", "LIVES_IN", "LIVES_THERE", "MOVED_TO", "NO_LONGER_LIVES"]

_RELATIVE_PLACE = re.compile(
    r"附近|旁边|对面|隔壁|楼上|楼下|周边|一带|边上|里面|那边|这边|家$|家里|家中|宿舍|公寓|房子|小区|酒店|宾馆|"
    r"学校|公司|单位|医院|这里|那里|哪里|一起|楼|^[和跟与同我你他她]"
)
_PAST_SPAN = re.compile(r"时候|时期|期间|那[几些]?年|那会|那阵|之前|以前|过")
_EMPLOYER_HINT = re.compile(r"公司|集团|银行|科技|字节|阿里|腾讯|百度|华为|京东|美团")


def _place(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = zh_value(m.group("v"))
    if v is None or not single_ok or _PAST_SPAN.search(v):
        return []
    v = v.split("的")[0]
    if not v or ZH_INDEFINITE.match(v) or _RELATIVE_PLACE.search(v):
        return []
    if m.groupdict().get("bare") and not zh_is_place(v):
        return []  # "住院", "在医院住了三天": not a residence
    return [Frame("residence", v, previous="" if c.chg else None)]


def _moved(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = zh_value(m.group("v"))
    p = zh_value(m.group("p")) if m.group("p") else None
    if v is None or not single_ok:
        return []
    v = v.split("的")[0]
    if (not v or ZH_INDEFINITE.match(v) or _RELATIVE_PLACE.search(v)) and v != "老家":
        return []
    return [Frame("residence", v, previous=p if p else "")]


def _cancel_place(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = zh_value(m.group("v"))
    if v is None:
        return []
    v = v.split("的")[0]
    return [Frame("residence", "", cancel=True, previous=v)] if v else []


def _left(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    """ "我离开了X": a place left is a residence cancelled, a company left an employer."""
    v = zh_value(m.group("v"))
    if v is None:
        return []
    if zh_is_place(v):
        return [Frame("residence", "", cancel=True, previous=v)]
    if _EMPLOYER_HINT.search(v):
        return [Frame("employer", "", cancel=True, previous=v)]
    return []


LIVES_IN = rule(
    "zh.residence.lives_in",
    "residence",
    "subj",
    "住|生活|定居|居",
    rf"^{ZADV}(?:住在|居住在|生活在|定居在|定居于|定居|常住在|常住|现居|现住|(?P<bare>住))了?"
    rf"(?P<v>{ZV})(?:住|生活)?{ZTAIL}",
    _place,
    positives=[
        ("用户住在上海。", Frame("residence", "上海")),
        ("我住在杭州", Frame("residence", "杭州")),
        ("我定居在成都", Frame("residence", "成都")),
    ],
    negatives=["我住院了", "我住在公司附近", "我妈妈住在北京"],
)

LIVES_THERE = rule(
    "zh.residence.lives_there",
    "residence",
    "subj",
    "在",
    rf"^{ZADV}在(?P<v>{ZV})(?:生活|居住|定居|安家|(?P<bare>住))(?:下来)?{ZTAIL}",
    _place,
    positives=[
        ("我现在在深圳生活", Frame("residence", "深圳")),
        ("我在上海住了三年了", Frame("residence", "上海")),
    ],
    negatives=["我在医院住了三天", "我在宿舍生活"],
)

MOVED_TO = rule(
    "zh.residence.moved_to",
    "residence",
    "subj",
    "搬|迁|移居",
    rf"^{ZADV}(?:从(?P<p>{ZV}))?{ZADV}(?:搬家|搬|迁居|迁|移居)(?:到了|去了|来了|回了|到|去|来|回|至)"
    rf"(?P<v>{ZV})(?:去|来)?(?:住|生活|定居)?{ZTAIL}",
    _moved,
    positives=[
        ("我搬到上海了", Frame("residence", "上海", previous="")),
        ("我从杭州搬到了上海", Frame("residence", "上海", previous="杭州")),
        ("我搬到上海一年多了", Frame("residence", "上海", previous="")),
    ],
    negatives=["下个月我搬去上海", "我搬到公司附近了"],
)

NO_LONGER_LIVES = rule(
    "zh.residence.no_longer_lives",
    "residence",
    "subj",
    "住|生活|搬|离开",
    rf"^{ZADV}(?:已经)?(?:不住在|不在|没住在|不再住在|不再生活在|搬离了|搬离|搬出了|搬出|"
    rf"以前住在|以前住|之前住在|之前住|曾经住在|曾住在|原来住在|过去住在)(?P<v>{ZV})"
    rf"(?:住|生活|居住)?(?:了)?{ZTAIL}",
    _cancel_place,
    positives=[
        ("我不住在杭州了", Frame("residence", "", cancel=True, previous="杭州")),
        ("我以前住在上海", Frame("residence", "", cancel=True, previous="上海")),
    ],
    negatives=["我妈妈不住在杭州了", "我不住在杭州吗？"],
)

LEFT = rule(
    "zh.residence.left",
    "residence",
    "subj",
    "离开",
    rf"^{ZADV}离开了?(?P<v>{ZV}){ZTAIL}",
    _left,
    positives=[
        ("我离开了杭州", Frame("residence", "", cancel=True, previous="杭州")),
        ("我离开了腾讯公司", Frame("employer", "", cancel=True, previous="腾讯公司")),
    ],
    negatives=["我离开了会议室", "我离开了他"],
)
