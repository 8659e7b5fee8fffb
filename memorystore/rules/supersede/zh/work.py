"""Chinese rules for where and as what the user works: "我在X工作", "我在X当Y", "我跳槽到了X",
"我从X离职了", "我是一名Y", "我升职为Y".

Why careful: "在X工作" also says where ("我在杭州工作") or how ("我在找工作", "我在家里上班"), so
a place, a kind of workplace (`lexicons/generic_employers.zh.txt`) or a verb is no employer;
"在一家创业公司工作" is an unnamed employer that a named one retires.
"""

from __future__ import annotations

import re

from memorystore.rules import lexicon
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import (
    ZH_INDEFINITE,
    ZH_UNNAMED,
    first_group,
    title_frame,
    zh_is_place,
    zh_value,
)
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.zh.grammar import JOB_TITLE_ZH, ZADV, ZTAIL, ZV

__all__ = [
    "IS_A",
    "JOINED",
    "LEFT",
    "MY_COMPANY_IS",
    "MY_TITLE_IS",
    "PROMOTED_TO",
    "WORKS_AS_AT",
    "WORKS_AT",
]

_THIS_ONE = re.compile(r"(?:这家|那家)$")
_NOT_ORG = re.compile(
    r"^(?:找|寻找|努力|认真|拼命|专心|用心|好好|继续|开心|快乐|辛苦|加班|远程|居家|线上|线下|兼职|全职|"
    r"外面|外边|里面|家|忙|准备|考虑|学习|帮|给|为|替)"
)
_GENERIC_ORG = lexicon.word_set("generic_employers.zh")
_GROUP_WORDS = re.compile(
    r"俱乐部|社团|协会|群|小组|读书会|健身房|乐队|合唱团|班|课程|会员|志愿|粉丝|队"
)
_NOT_A_WORKPLACE = re.compile(r"家里|公司里|单位里|这里|那里|附近|楼下|远程|线上|网上")


def _employer_frames(m: re.Match[str], c: Clause, single_ok: bool, *, change: bool) -> list[Frame]:
    v = zh_value(m.group("v"))
    if v is None or not single_ok:
        return []
    v = _THIS_ONE.sub("", v)
    unnamed = ZH_UNNAMED.match(v)
    if unnamed and not change and len(v) > unnamed.end():
        # "在一家创业公司工作": an unnamed employer, retired by a named one, retiring none
        return [Frame("employer", v)]
    if (
        not v
        or len(v) < 2
        or _NOT_ORG.match(v)
        or v in _GENERIC_ORG
        or "的" in v
        or zh_is_place(v)
        or ZH_INDEFINITE.match(v)
        or _GROUP_WORDS.search(v)
        or _NOT_A_WORKPLACE.search(v)
    ):
        return []
    return [Frame("employer", v, previous="" if change or c.chg else None)]


def _employer(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _employer_frames(m, c, single_ok, change=False)


def _employer_change(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _employer_frames(m, c, single_ok, change=True)


def _employer_title(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v, t = zh_value(m.group("v")), zh_value(m.group("t"))
    if not v or not t or not single_ok or "的" in v or ZH_INDEFINITE.match(v):
        return []
    out = [title_frame(t, None)]
    if not zh_is_place(v):
        out.append(Frame("school" if out[0].slot == "education" else "employer", v))
    return out


def _cancel_employer(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    _, raw = first_group(m, "v", "v2", "v3", "v4")
    v = zh_value(raw)
    if not v or zh_is_place(v) or "的" in v or ZH_INDEFINITE.match(v):
        return []
    return [Frame("employer", "", cancel=True, previous=v)]


def _title_frames(m: re.Match[str], c: Clause, single_ok: bool, *, change: bool) -> list[Frame]:
    t = zh_value(m.group("t"))
    if not t or not single_ok or ZH_INDEFINITE.match(t):
        return []
    return [title_frame(t, "" if change else None)]


def _title(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _title_frames(m, c, single_ok, change=False)


def _title_change(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _title_frames(m, c, single_ok, change=True)


WORKS_AT = rule(
    "zh.employer.works_at",
    "employer",
    "subj",
    "在",
    rf"^{ZADV}在(?P<v>{ZV})(?:工作|上班|任职|就职|供职|实习)(?:了)?{ZTAIL}",
    _employer,
    positives=[
        ("我在阿里巴巴工作", Frame("employer", "阿里巴巴")),
        ("用户在一家创业公司工作。", Frame("employer", "一家创业公司")),
        ("用户在百度上班。", Frame("employer", "百度")),
    ],
    negatives=["我在杭州工作", "我在找工作", "我在家里上班"],
)

WORKS_AS_AT = rule(
    "zh.employer.works_as_at",
    "employer",
    "subj",
    "当|担任|做",
    rf"^{ZADV}在(?P<v>{ZV})(?:当(?!然|时|初|地|天)|担任|做|任)了?(?P<t>{JOB_TITLE_ZH}){ZTAIL}",
    _employer_title,
    positives=[
        ("我在腾讯当产品经理", (Frame("job_title", "产品经理"), Frame("employer", "腾讯"))),
        ("我在北京大学担任讲师", (Frame("job_title", "讲师"), Frame("employer", "北京大学"))),
        ("我在杭州当老师", Frame("job_title", "老师")),
    ],
    negatives=["我在那家当服务员", "我妈妈在腾讯当经理"],
)

JOINED = rule(
    "zh.employer.joined",
    "employer",
    "subj",
    "入职|加入|加盟|跳槽",
    rf"^{ZADV}(?:入职|加入|加盟|跳槽到|跳槽去|跳槽进|跳槽至|跳槽)了?(?P<v>{ZV})"
    rf"(?:公司)?(?:工作|上班)?(?:了)?{ZTAIL}",
    _employer_change,
    positives=[
        ("我入职了字节跳动", Frame("employer", "字节跳动", previous="")),
        ("我跳槽到了腾讯", Frame("employer", "腾讯", previous="")),
    ],
    negatives=["我加入了一个读书会", "我加入了健身房"],
)

MY_COMPANY_IS = rule(
    "zh.employer.my_company_is",
    "employer",
    "poss",
    "工作|公司|东家|单位",
    rf"^(?:新工作|新公司|新东家|新单位|现在的公司|公司|单位|雇主)(?:是|在)(?P<v>{ZV}){ZTAIL}",
    _employer,
    positives=[
        ("我的新公司是腾讯", Frame("employer", "腾讯")),
        ("我的单位是国家电网", Frame("employer", "国家电网")),
        ("我的公司是一家创业公司", Frame("employer", "一家创业公司")),
    ],
    negatives=["我的公司在上海", "我妹妹的公司是腾讯"],
)

LEFT = rule(
    "zh.employer.left",
    "employer",
    "subj",
    "离职|辞|裁|不在|以前在|之前在|曾经在|离开",
    rf"^{ZADV}(?:从|在)(?P<v>{ZV})(?:离职|辞职)了?{ZTAIL}"
    rf"|^{ZADV}(?:辞去了|辞掉了|辞了)(?P<v2>{ZV})的(?:工作|职位|职务){ZTAIL}"
    rf"|^{ZADV}(?:不在|不再在|已经不在|以前在|之前在|曾经在|原来在)(?P<v3>{ZV})"
    rf"(?:工作|上班|任职)(?:了)?{ZTAIL}|^{ZADV}被(?P<v4>{ZV})(?:裁员|裁|开除|辞退)了?"
    rf"{ZTAIL}",
    _cancel_employer,
    positives=[
        ("我从阿里巴巴离职了", Frame("employer", "", cancel=True, previous="阿里巴巴")),
        ("我被字节跳动裁员了", Frame("employer", "", cancel=True, previous="字节跳动")),
    ],
    negatives=["我从杭州离职了", "我从一家公司离职了"],
)

IS_A = rule(
    "zh.job_title.is_a",
    "job_title",
    "subj",
    "是|当|担任|成为|做",
    rf"^{ZADV}(?:是一名|是一位|是一个|是名|是个|是|当了|当(?!然|时|初|地|天|作|成|做|中|年)|担任|"
    rf"成为了|成为|做了|做)"
    rf"(?P<t>{JOB_TITLE_ZH}){ZTAIL}",
    _title,
    positives=[
        ("我是一名程序员", Frame("job_title", "程序员")),
        ("用户是研究生", Frame("education", "研究生")),
        ("用户是后端开发工程师。", Frame("job_title", "后端开发工程师")),
    ],
    negatives=["我妹妹是一名医生", "我是一个好人"],
)

PROMOTED_TO = rule(
    "zh.job_title.promoted_to",
    "job_title",
    "subj",
    "升|晋升|提拔",
    rf"^{ZADV}(?:被)?(?:升职为|升职成了|升职成|升为|升任|晋升为|晋升成|被提拔为|提拔为|升成了|升成)"
    rf"(?P<t>{ZV}){ZTAIL}",
    _title_change,
    positives=[
        ("我升职为技术总监", Frame("job_title", "技术总监", previous="")),
        ("我被提拔为部门经理了", Frame("job_title", "部门经理", previous="")),
    ],
    negatives=["我妹妹升职为经理了", "我升为这个了"],
)

MY_TITLE_IS = rule(
    "zh.job_title.my_title_is",
    "job_title",
    "poss",
    "职位|职业|岗位|职务|工作",
    rf"^(?:职位|职业|岗位|职务|工作)(?:是|为)(?P<t>{JOB_TITLE_ZH}){ZTAIL}",
    _title,
    positives=[
        ("我的职位是产品经理", Frame("job_title", "产品经理")),
        ("我的职业是律师", Frame("job_title", "律师")),
    ],
    negatives=["我的工作是写代码", "我妹妹的职业是律师"],
)
