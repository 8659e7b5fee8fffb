"""Reading a value out of a rule's match: is it a name, a place, a phone, a diet, a plan's
object, and what is it normalised.

Why shared: the builders of both languages ask the same questions of a captured value ("is
'a startup' a named employer?", "is 'Great Falls' capitalised as a name?").
"""

from __future__ import annotations

import re

from memorystore.rules import lexicon
from memorystore.rules.scripts import HAN
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.rule import Clause
from memorystore.rules.supersede.text import HAS_HAN, lower
from memorystore.rules.supersede.values import PRONOUN_VALUES, ZH_PLACES, ZH_TRAILING, is_cjk, norm

__all__ = [
    "EVENT",
    "EVENT_RE",
    "ZH_INDEFINITE",
    "ZH_ORG_SUFFIX",
    "ZH_UNNAMED",
    "diet",
    "en_value",
    "first_group",
    "phone",
    "plan_value",
    "title_frame",
    "upper_at",
    "usage",
    "zh_int",
    "zh_is_place",
    "zh_plan_obj",
    "zh_value",
]

_LEADING_ARTICLE = re.compile(r"(?:the|a|an)\s+", re.I)
_FIRST_WORD = re.compile(r"[\w.+-]+")
_NAME_WORD = re.compile(r"[^\s,\u201a]+")
_INDEFINITE = re.compile(r"(?:a|an|some|another|one)\s")
_CONNECTORS = lexicon.word_set("name_connectors")
EVENT = (
    r"(?:festival|concert|wedding|marathon|half marathon|conference|gig|tournament|race|"
    r"exhibition|expo|retreat|reunion|summit|hackathon|recital|ceremony|triathlon|trek|"
    r"music festival|jazz festival|film festival)"
)
EVENT_RE = re.compile(EVENT)
_EVENT_VALUE = re.compile(rf"^(?:(?:a|an|the|my|our)\s+)?(?:[\w'&-]+\s+){{0,3}}?{EVENT}$")


def upper_at(clause: Clause, start: int) -> bool:
    """The original text is capitalised at `start` (after an optional article)."""
    text = clause.text
    m = _LEADING_ARTICLE.match(clause.low, start)
    if m:
        start = m.end()
    while start < len(text) and text[start] in "'\" ":
        start += 1
    if start >= len(text):
        return False
    ch = text[start]
    if clause.all_lower:
        return ch.isalnum()
    if ch.isupper() or ch.isdigit():
        return True
    # "iPhone", "eBay": a capital inside the first word
    word = _FIRST_WORD.match(text, start)
    return word is not None and any(c.isupper() for c in word.group())


def _proper(clause: Clause, start: int, raw: str) -> bool:
    """Every word of a name is capitalised ("Bank of America", "New York"), or the memory is
    all lowercase and gives no such evidence (callers then ask for a known place)."""
    if clause.all_lower:
        return True
    original = clause.text[start : start + len(raw)]
    article = _LEADING_ARTICLE.match(original)
    original = original[article.end() :] if article else original
    words = _NAME_WORD.findall(original)
    if not words:
        return False
    for word in words:
        core = word.strip("'\".()")
        if not core or core.lower() in _CONNECTORS or not any(ch.isalpha() for ch in core):
            continue
        if HAS_HAN.search(core) or any(ch.isupper() for ch in core):
            continue
        return False
    return True


def en_value(
    clause: Clause,
    m: re.Match[str],
    group: str,
    *,
    cap: bool,
    words: int = 6,
    indefinite: bool = False,
) -> str | None:
    """The normalised value of an English match's group; None when it is no value: "a ..."
    (unless `indefinite`), not capitalised as a name (when `cap`), a pronoun, too long."""
    raw = m.group(group)
    if raw is None:
        return None
    start = clause.rest + m.start(group)
    if not indefinite and _INDEFINITE.match(raw):
        return None  # "a startup", "an apartment": not a named value
    if cap and not (upper_at(clause, start) and _proper(clause, start, raw)):
        return None
    v = norm(raw)
    if not v or v in PRONOUN_VALUES or len(v.split()) > words:
        return None
    return v


def plan_value(c: Clause, m: re.Match[str], name: str) -> str | None:
    """What a plan is about: a named place or event ("Japan", "the Chicago Marathon"), or an
    event however named ("a jazz festival")."""
    raw = m.group(name)
    if raw is not None and _EVENT_VALUE.match(lower(raw).strip()):
        v = norm(raw)
        return v if v and len(v.split()) <= 5 else None
    return en_value(c, m, name, cap=True, words=4)


_ZH_VALUE_LEAD = re.compile(r"^(?:了|到|在|去|是)+")


def zh_value(raw: str | None, *, limit: int = 15) -> str | None:
    if raw is None:
        return None
    v = norm(raw)
    v = _ZH_VALUE_LEAD.sub("", v).strip()
    v = ZH_TRAILING.sub("", v).strip()
    if not v or v in PRONOUN_VALUES or len(v) > limit or (len(v) < 2 and not is_cjk(v)):
        return None
    return v


_ZH_PLACE_SUFFIX = re.compile(rf"[市省县镇村]$|[{HAN}]区$")
ZH_ORG_SUFFIX = re.compile(
    r"公司|集团|银行|大学|学院|学校|医院|中心|研究所|研究院|科技|网络|软件|工厂|厂|局|所|院|馆|店|社|台|"
    r"报|站|部|处|委|署|协会|基金|证券|保险|律所|事务所"
)
ZH_INDEFINITE = re.compile(r"^(?:一[家个间所座位名]|某|这|那|一些|几家|另一)")
# "一家创业公司": an unnamed value, which a named one retires but which retires none
ZH_UNNAMED = re.compile(r"^(?:一[家所个间座]|某)")


def zh_is_place(v: str) -> bool:
    """A Chinese value names a place ("上海", "上海浦东", "杭州市"), not an organisation."""
    for place in ZH_PLACES:
        if v.startswith(place):
            return not ZH_ORG_SUFFIX.search(v[len(place) :])
    return bool(_ZH_PLACE_SUFFIX.search(v)) and not ZH_ORG_SUFFIX.search(v)


_ZH_PLAN_OBJ_PREFIX = re.compile(
    r"^(?:去|到|飞|飞去|前往|参加|这次|那次|原定的|原计划的|我的|我们的)+"
)
_ZH_PLAN_OBJ_SUFFIX = re.compile(
    r"(?:的)?(?:之行|之旅|的行程|行程|的旅行|旅行|的旅游|旅游|的计划|计划|的机票|机票|的酒店|酒店|"
    r"的出行|出行|的度假|度假|玩|出差|自驾游|自驾|的票|票|留学|读书|探亲|开会|那趟|这趟|那次|这次|一趟|"
    r"的)+$"
)


def zh_plan_obj(raw: str | None) -> str | None:
    """What a Chinese plan is about ("去日本的行程" -> "日本")."""
    v = zh_value(raw)
    if not v:
        return None
    v = _ZH_PLAN_OBJ_PREFIX.sub("", v)
    v = _ZH_PLAN_OBJ_SUFFIX.sub("", v)
    v = _ZH_PLAN_OBJ_PREFIX.sub("", v)
    return v or None


def first_group(m: re.Match[str], *names: str) -> tuple[str | None, str | None]:
    """The first of the named groups that matched, and its text."""
    for name in names:
        if m.groupdict().get(name) is not None:
            return name, m.group(name)
    return None, None


_STUDENT = re.compile(
    r"(?:\bstudent|\bpupil|\bundergrad(?:uate)?|\bgrad student|"
    r"学生|研究生|博士生|本科生|硕士生|大学生|"
    r"高中生|初中生|中学生|小学生|留学生)s?$"
)


def title_frame(title: str, previous: str | None) -> Frame:
    """A role: being a student is kept apart from a job, since the two often hold together."""
    if _STUDENT.search(title):
        return Frame("education", title, previous=previous)
    return Frame("job_title", title, previous=previous)


_PHONE = re.compile(
    r"^(?:(?:my|a|an|the|new|google|apple)\s+)*(?P<b>iphone|pixel|galaxy|samsung|huawei|xiaomi|"
    r"oneplus|oppo|vivo|honor|redmi|motorola|moto|nokia|华为|小米|苹果|三星|荣耀|一加|红米|魅族)"
    r"(?P<m>(?:\s*[\w+]+){0,3}?)\s*(?:phone|smartphone|手机)?$"
)
_NOT_A_PHONE = re.compile(
    r"tab|tablet|watch|buds|earbuds|book|pad|tv|band|laptop|monitor|router|speaker|scooter|"
    r"平板|手环|手表|耳机|电视|笔记本|电脑|路由器|音箱|电动车|扫地机|汽车"
)
_PHONE_BRANDS = {
    "华为": "huawei",
    "小米": "xiaomi",
    "苹果": "iphone",
    "三星": "samsung",
    "荣耀": "honor",
    "一加": "oneplus",
    "红米": "redmi",
    "魅族": "meizu",
    "moto": "motorola",
}


def phone(value: str | None) -> str | None:
    """The phone a value names ("a Google Pixel phone" -> "pixel", "华为手机" -> "huawei")."""
    if not value:
        return None
    m = _PHONE.match(value)
    if m is None or (m.group("b") == "苹果" and "手机" not in value and not m.group("m")):
        return None  # "苹果" alone is the fruit
    if _NOT_A_PHONE.search(m.group("m")):
        return None  # "a Galaxy Tab", "小米手环": not the phone
    brand = _PHONE_BRANDS.get(m.group("b"), m.group("b"))
    model = m.group("m").strip()
    return f"{brand} {model}".strip() if model else brand


def usage(v: str, n: str, c: Clause, single_ok: bool) -> list[Frame]:
    """What one uses (in category `n`); a phone brand with no category is the phone."""
    found = phone(v)
    if found and not n and single_ok:
        return [Frame("phone", found, previous="" if c.chg else None)]
    return [Frame(f"usage:{n}", v, previous="" if c.chg else None)]


def diet(raw: str) -> str:
    raw = raw.lower()
    if raw in ("vegan", "plant-based"):
        return "vegan"
    if raw in ("pescatarian", "pescetarian"):
        return "pescatarian"
    if raw in ("vegetarian", "veggie"):
        return "vegetarian"
    return {
        "ketogenic": "keto",
        "low carb": "low-carb",
        "生酮": "keto",
        "低碳水": "low-carb",
        "低碳": "low-carb",
        "地中海": "mediterranean",
        "轻断食": "intermittent fasting",
        "断食": "intermittent fasting",
        "间歇性断食": "intermittent fasting",
    }.get(raw, raw)


_ZH_NUM = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5}
_ZH_NUM.update({"六": 6, "七": 7, "八": 8, "九": 9})


def zh_int(raw: str) -> int | None:
    """A number written in Chinese numerals up to 99 ("三十一") or digits."""
    if raw.isdigit():
        return int(raw)
    if raw == "十":
        return 10
    if "十" in raw:
        tens, _, ones = raw.partition("十")
        t = _ZH_NUM.get(tens, 1) if tens else 1
        o = _ZH_NUM.get(ones, 0) if ones else 0
        return t * 10 + o
    return _ZH_NUM.get(raw)
