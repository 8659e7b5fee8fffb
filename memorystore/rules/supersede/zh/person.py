"""Chinese rules for who the user is: diet ("我吃素", "我在吃生酮饮食"), relationship ("我结婚了"),
name ("我叫X", "我的名字是X"), age ("我今年三十岁") and their phone, car or laptop.

Why narrow: "叫" and "是" are common verbs ("我叫了外卖", "我叫他小王", "我的车是红色的"), so a
name must be two to four characters or a Latin name, and a car or phone must name a brand.
"""

from __future__ import annotations

import re

from memorystore.rules.scripts import HAN
from memorystore.rules.supersede.builders import name, thing
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import diet, zh_int
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.zh.grammar import ZADV, ZTAIL, ZV

__all__ = [
    "CALLED",
    "FOLLOWS_DIET",
    "MY_NAME_IS",
    "MY_PHONE_IS",
    "NO_LONGER_VEGETARIAN",
    "STATUS",
    "VEGETARIAN",
    "YEARS_OLD",
]


def _diet(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return [Frame("diet", "vegan" if "纯" in m.group("v") else "vegetarian")] if single_ok else []


def _diet_plan(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return [Frame("diet_plan", diet(m.group("v")))] if single_ok else []


def _cancel_diet(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return [Frame("diet", "", cancel=True, previous="vegetarian")]


_RELATIONSHIP = {
    "结婚": "married",
    "已婚": "married",
    "订婚": "engaged",
    "离婚": "divorced",
    "分手": "single",
    "单身": "single",
    "是单身": "single",
}


def _relationship(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = _RELATIONSHIP.get(m.group("v"), "dating")
    return [Frame("relationship", v)] if single_ok else []


def _age(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    n = zh_int(m.group("v"))
    return [Frame("age", str(n))] if n and 0 < n < 130 and single_ok else []


VEGETARIAN = rule(
    "zh.diet.vegetarian",
    "diet",
    "subj",
    "素",
    rf"^{ZADV}(?P<v>吃素食|吃素|吃全素|吃纯素|是素食者|是素食主义者|是纯素食者|是纯素主义者|"
    rf"是一名素食者|是一个素食者|是一名素食主义者|是素食|成了素食者|成为了素食者|"
    rf"成为素食者){ZTAIL}",
    _diet,
    positives=[
        ("我吃素", Frame("diet", "vegetarian")),
        ("我是素食主义者", Frame("diet", "vegetarian")),
    ],
    negatives=["我妈妈吃素", "我不吃素了"],
)

NO_LONGER_VEGETARIAN = rule(
    "zh.diet.no_longer_vegetarian",
    "diet",
    "subj",
    "素|肉",
    r"^(?:已经)?(?P<v>不再吃素|不吃素|不是素食者|不再是素食者|不是素食主义者|"
    r"开始吃肉|又吃肉|重新吃肉)了?\s*$",
    _cancel_diet,
    positives=[
        ("我不吃素了", Frame("diet", "", cancel=True, previous="vegetarian")),
        ("我开始吃肉了", Frame("diet", "", cancel=True, previous="vegetarian")),
    ],
    negatives=["我妈妈不吃素了", "我爱吃肉"],
)

FOLLOWS_DIET = rule(
    "zh.diet.follows_diet",
    "diet",
    "subj",
    "碳|生酮|地中海|断食",
    rf"^{ZADV}(?:在)?(?:吃|采用|坚持|开始|执行|尝试|改成|改为|换成)?了?(?P<v>低碳水|低碳|生酮|地中海|"
    rf"间歇性断食|轻断食)(?:饮食|餐|减肥法)?{ZTAIL}",
    _diet_plan,
    positives=[
        ("用户在吃低碳水饮食。", Frame("diet_plan", "low-carb")),
        ("我现在吃地中海饮食", Frame("diet_plan", "mediterranean")),
    ],
    negatives=["我妈妈在吃生酮饮食", "我在吃饭"],
)

STATUS = rule(
    "zh.relationship.status",
    "relationship",
    "subj",
    "婚|单身|恋爱|男朋友|女朋友|对象|分手",
    rf"^{ZADV}(?P<v>结婚|订婚|离婚|分手|单身|已婚|是单身|恋爱|在谈恋爱|谈恋爱|脱单|"
    rf"有女朋友|有男朋友|有对象|交了女朋友|交了男朋友)(?:了)?{ZTAIL}",
    _relationship,
    positives=[
        ("我结婚了", Frame("relationship", "married")),
        ("我单身", Frame("relationship", "single")),
        ("我有女朋友了", Frame("relationship", "dating")),
    ],
    negatives=["我哥哥结婚了", "你结婚了吗"],
)

CALLED = rule(
    "zh.name.called",
    "name",
    "subj",
    "叫",
    r"^(?:名)?叫(?![了过来醒车外他她你它我])"
    rf"(?P<v>[{HAN}]{{2,4}}|[A-Za-z][\w.-]*(?: [A-Za-z][\w.-]*)?)"
    r"\s*$",
    name,
    positives=[("我叫小明", Frame("name", "小明")), ("我叫Anna", Frame("name", "anna"))],
    negatives=["我叫了外卖", "我叫他小王"],
)

MY_NAME_IS = rule(
    "zh.name.my_name_is",
    "name",
    "poss",
    "名字",
    r"^(?:名字|全名|真名)(?:是|叫)"
    rf"(?P<v>[{HAN}]{{2,4}}|[A-Za-z][\w.-]*(?: [A-Za-z][\w.-]*)?)"
    r"\s*$",
    name,
    positives=[
        ("我的名字是李雷", Frame("name", "李雷")),
        ("我的名字叫韩梅梅", Frame("name", "韩梅梅")),
    ],
    negatives=["我的名字是不重要的", "我妹妹的名字是小红"],
)

YEARS_OLD = rule(
    "zh.age.years_old",
    "age",
    "subj",
    "岁",
    r"^(?:今年|现在|已经|刚|刚刚|马上就)*(?:满)?(?P<v>\d{1,3}|[一二三四五六七八九十两]{1,3})"
    r"(?:周)?岁(?:了)?\s*$",
    _age,
    positives=[("我今年三十岁", Frame("age", "30")), ("我今年31岁了", Frame("age", "31"))],
    negatives=["我儿子今年五岁", "我今年三百岁"],
)

MY_PHONE_IS = rule(
    "zh.phone.my_phone_is",
    "phone",
    "poss",
    "手机|车|电脑|笔记本",
    rf"^(?:新)?(?P<k>手机号码|手机号|电话号码|手机|汽车|车子|车|电脑|笔记本电脑|笔记本)"
    rf"(?:现在)?(?:是|换成了|换成)(?:一[台部辆个])?(?P<v>{ZV}){ZTAIL}",
    thing,
    positives=[
        ("我的手机是iPhone 15", Frame("phone", "iphone 15")),
        ("我的车是特斯拉", Frame("car", "特斯拉")),
    ],
    negatives=["我的车是红色的", "我的手机是新的"],
)
