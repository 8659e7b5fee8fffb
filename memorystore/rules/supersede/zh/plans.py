"""Chinese rules for what the user plans: trips and events ("我打算五月去日本", "我打算去韩国而不是
日本", "我取消了去日本的行程", "日本不去了").

Why plans are many: as in English, a plan is retired only by its cancellation or by another
plan said to replace it; "取消" retires a plan only when a trip is named ("取消了会员" is none).
"""

from __future__ import annotations

import re

from memorystore.rules.scripts import HAN
from memorystore.rules.supersede.builders import plan_instead
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import zh_plan_obj
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.text import ZH_OTHER_PERSON
from memorystore.rules.supersede.values import norm
from memorystore.rules.supersede.zh.grammar import ZADV, ZH_ADV, ZH_TIME_FUTURE, ZTAIL, ZV

__all__ = ["CANCELLED", "GOING_TO", "INSTEAD_OF", "IS_OFF", "NOT_GOING"]

_NOT_A_TRIP = re.compile(r"^(?:的|了|过|看|做|买|吃|睡|上班|工作|学习|那里|这里|哪)")
_TRAVEL_CUE = re.compile(
    r"行程|旅行|旅游|之行|之旅|计划|机票|酒店|出行|度假|那趟|这趟|^去|^到|音乐节|演唱会|婚礼|马拉松|比赛|展会"
)
_PERSON_CHAR = re.compile(r"[我你他她们]")


def _plan(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = zh_plan_obj(m.group("v"))
    if not v or _NOT_A_TRIP.match(v):
        return []
    return [Frame(f"plan:{v}", v)]


def _plan_cancel_obj(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    raw = m.group("v")
    if not _TRAVEL_CUE.search(norm(raw)):
        return []
    v = zh_plan_obj(raw)
    return [Frame(f"plan:{v}", "", cancel=True, previous=v)] if v else []


def _plan_cancel(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = zh_plan_obj(m.group("v"))
    if not v or _PERSON_CHAR.search(v) or ZH_OTHER_PERSON.search(v):
        return []
    return [Frame(f"plan:{v}", "", cancel=True, previous=v)]


GOING_TO = rule(
    "zh.plan.going_to",
    "plan",
    "subj",
    "打算|计划|准备|要|将|会|决定|预计|安排",
    rf"^(?:{ZH_TIME_FUTURE}|{ZH_ADV})*(?:打算|计划|准备|要|将要|将|会|决定|预计|安排)"
    rf"(?:{ZH_TIME_FUTURE}|{ZH_ADV}|和[{HAN}]{{1,4}}|跟[{HAN}]{{1,4}}|"
    rf"一起)*(?:去参加|参加|去|到|飞|飞去|飞往|前往)(?P<v>{ZV})(?:旅游|旅行|玩|度假|出差|看看|逛逛|"
    rf"过年|度蜜月|自驾|徒步|留学|读书|学习|开会|参会|看展|探亲)?{ZTAIL}",
    _plan,
    positives=[
        ("我打算五月去日本", Frame("plan:日本", "日本")),
        ("我下个月要去日本旅游", Frame("plan:日本", "日本")),
        ("用户计划七月去新疆旅行。", Frame("plan:新疆", "新疆")),
    ],
    negatives=["我妹妹打算去日本", "我打算去看看", "我要去上班"],
)

INSTEAD_OF = rule(
    "zh.plan.instead_of",
    "plan",
    "subj",
    "而不是|改去",
    rf"^(?:{ZH_TIME_FUTURE}|{ZH_ADV})*(?:打算|计划|准备|要|决定|会)?(?:改)?去(?P<v>{ZV})"
    rf"(?:旅游|旅行|玩)?而不是(?:去)?(?P<p>{ZV}){ZTAIL}",
    plan_instead,
    positives=[
        ("我打算去韩国而不是日本", Frame("plan:韩国", "韩国", previous="日本")),
        ("我们改去泰国而不是越南", Frame("plan:泰国", "泰国", previous="越南")),
    ],
    negatives=["我打算去韩国而不是韩国", "我妹妹打算去韩国而不是日本"],
)

CANCELLED = rule(
    "zh.plan.cancelled",
    "plan",
    "subj",
    "取消",
    rf"^{ZADV}(?:已经)?取消了?(?P<v>{ZV}){ZTAIL}",
    _plan_cancel_obj,
    positives=[
        ("我取消了去日本的行程", Frame("plan:日本", "", cancel=True, previous="日本")),
        ("用户取消了日本之行。", Frame("plan:日本", "", cancel=True, previous="日本")),
    ],
    negatives=["我取消了会员", "我妹妹取消了去日本的行程"],
)

NOT_GOING = rule(
    "zh.plan.not_going",
    "plan",
    "subj",
    "不去|去不了|去不成",
    rf"^{ZADV}(?:已经)?(?:不去|不打算去|不准备去|不想去|不计划去|去不了|去不成|不能去|不会去)"
    rf"(?P<v>{ZV})(?:旅游|旅行|玩|了)*\s*$",
    _plan_cancel,
    positives=[
        ("我不去日本了", Frame("plan:日本", "", cancel=True, previous="日本")),
        ("我去不了杭州了", Frame("plan:杭州", "", cancel=True, previous="杭州")),
    ],
    negatives=["我妹妹不去日本了", "我不去他那里"],
)

IS_OFF = rule(
    "zh.plan.is_off",
    "plan",
    "free",
    "不去|取消|泡汤|黄了|去不成|去不了",
    rf"^(?P<v>{ZV})(?:我)?(?:就|也|还是|已经)?(?:不去了|去不了了|去不成了|不打算去了|不准备去了|"
    rf"不想去了|取消了|被取消了|泡汤了|黄了|不去)\s*$",
    _plan_cancel,
    positives=[
        ("日本不去了", Frame("plan:日本", "", cancel=True, previous="日本")),
        ("新疆那趟取消了", Frame("plan:新疆", "", cancel=True, previous="新疆")),
    ],
    negatives=["他不去了", "我妈妈不去了"],
)
