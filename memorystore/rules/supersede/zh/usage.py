"""Chinese rules for what the user prefers, uses and likes: favourites ("我最喜欢的电影是X",
"咖啡我更喜欢X"), usage ("我用X写代码", "我从X换成了Y", "我改用Y了", "我不再用X了") and likes
("我喜欢X").

Why three families: as in English, a favourite holds one value per noun, usage and likes
hold many; "不用X" states a change only with 了 ("我不用微信了"; "不用塑料袋" is a habit).
"""

from __future__ import annotations

import re

from memorystore.rules.scripts import HAN
from memorystore.rules.supersede.builders import cancel_like, favourite, like, switch
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import first_group, usage, zh_value
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.values import norm
from memorystore.rules.supersede.zh.grammar import ZADV, ZTAIL, ZV

__all__ = [
    "IS_MY_FAVOURITE",
    "LIKES",
    "MY_FAVOURITE_IS",
    "NO_LONGER_LIKES",
    "NO_LONGER_USES",
    "PREFER",
    "SWITCHED_FROM",
    "SWITCHED_TO",
    "TASK_USES",
    "TOPIC_PREFER",
    "USES",
]

_NOT_A_TOOL = re.compile(r"^(?:了|过|着|完|掉|上|到|于|来|去|手|心|力|钱|时间)")
_NOT_A_HABIT = re.compile(r"^(?:了|过|着|去|来|再|上|担心|客气|谢)")


def _prefer(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = zh_value(m.group("v"))
    if not v:
        return []
    if c.topic:
        return [Frame(f"favourite:{c.topic}", v)] if single_ok else []
    return [Frame("usage:", v, previous="" if c.chg else None)]


def _switch_unnamed(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    v = zh_value(m.group("v"))
    if not v:
        return []
    return [Frame(f"usage:{c.topic}", v, previous="")]


def _use(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    group, raw = first_group(m, "v", "v2")
    v = zh_value(raw)
    if not v or _NOT_A_TOOL.match(v):
        return []
    n = norm(m.group("n")) if group == "v" and m.group("n") else c.topic
    return usage(v, n, c, single_ok)


def _cancel_usage(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    _, raw = first_group(m, "v", "v2", "v3")
    v = zh_value(raw)
    if not v or len(v) < 2 or _NOT_A_HABIT.match(v):
        return []
    return [Frame("usage:", "", cancel=True, previous=v)]


MY_FAVOURITE_IS = rule(
    "zh.favourite.my_favourite_is",
    "favourite",
    "subj",
    "喜欢|最爱",
    rf"^{ZADV}(?:最喜欢|最爱|喜欢)(?:用|喝|吃|看|听|玩|读|去)?的(?P<n>{ZV})(?:是|就是|变成了|成了)"
    rf"(?P<v>{ZV}){ZTAIL}",
    favourite,
    positives=[
        ("我最喜欢的电影是盗梦空间", Frame("favourite:电影", "盗梦空间")),
        ("我最喜欢的编辑器是 VS Code", Frame("favourite:编辑器", "vs code")),
    ],
    negatives=["我妹妹最喜欢的电影是泰坦尼克号", "我最喜欢的部分是结尾"],
)

IS_MY_FAVOURITE = rule(
    "zh.favourite.is_my_favourite",
    "favourite",
    "free",
    "最喜欢|最爱",
    rf"^(?P<v>{ZV})(?:现在)?(?:是|成了|变成了)我(?:最喜欢|最爱)(?:用|喝|吃|看|听|玩|读)?的"
    rf"(?P<n>{ZV}){ZTAIL}",
    favourite,
    positives=[
        ("星际穿越是我最喜欢的电影", Frame("favourite:电影", "星际穿越")),
        ("拿铁现在是我最爱喝的咖啡", Frame("favourite:咖啡", "拿铁")),
    ],
    negatives=["这是我最喜欢的东西", "星际穿越是她最喜欢的电影"],
)

TOPIC_PREFER = rule(
    "zh.favourite.topic_prefer",
    "favourite",
    "free",
    "更喜欢|最喜欢|更爱|偏好|首选",
    rf"^(?P<n>[{HAN}a-z0-9 ]{{1,8}}?)(?:的话|方面|上)?"
    rf"我(?:更喜欢|最喜欢|更爱|偏好|首选)"
    rf"(?:用|喝|吃|看|听|玩|读)?(?P<v>{ZV}){ZTAIL}",
    favourite,
    positives=[
        ("咖啡我更喜欢拿铁", Frame("favourite:咖啡", "拿铁")),
        ("编辑器我首选 Neovim", Frame("favourite:编辑器", "neovim")),
    ],
    negatives=["咖啡我妈更喜欢拿铁", "我更喜欢拿铁"],
)

PREFER = rule(
    "zh.usage.prefer",
    "usage",
    "subj",
    "更喜欢|偏好|首选|偏爱",
    rf"^{ZADV}(?:更喜欢|偏好|首选|偏爱|比较喜欢)(?:用|喝|吃|看|听|玩|读)?(?P<v>{ZV}){ZTAIL}",
    _prefer,
    positives=[
        ("我更喜欢用Neovim", Frame("usage:", "neovim")),
        ("我偏好深色模式", Frame("usage:", "深色模式")),
    ],
    negatives=["我妈妈更喜欢用微信", "我可能更喜欢用Mac"],
)

SWITCHED_FROM = rule(
    "zh.usage.switched_from",
    "usage",
    "subj",
    "换|改|转|切换|迁移|代替|替代|取代",
    rf"^{ZADV}(?:从|把)(?:用)?(?P<p>{ZV})(?:换成了|换成|换到了|换到|转到了|转到|转向了|转向|"
    rf"改用了|改用|改成了|改成|切换到了|切换到|切换成了|切换成|迁移到了|迁移到|转成了|转成|"
    rf"换为|换了)(?:用)?(?P<v>{ZV}){ZTAIL}|^{ZADV}(?:用|开始用)(?P<v2>{ZV})"
    rf"(?:代替|替代|取代|替换)了?(?P<p2>{ZV}){ZTAIL}|^{ZADV}(?:用|喝|改用|现在用)"
    rf"(?P<v3>{ZV})而不是(?:用|喝)?(?P<p3>{ZV})了?{ZTAIL}",
    switch,
    positives=[
        ("我从PyCharm换成了VS Code", Frame("usage:", "vs code", previous="pycharm")),
        ("我把手机换成小米了", Frame("phone", "xiaomi", previous="")),
        ("我用 Notion 代替了印象笔记", Frame("usage:", "notion", previous="印象笔记")),
    ],
    negatives=["我妈妈从微信换成了QQ", "我可能从微信换成QQ"],
)

SWITCHED_TO = rule(
    "zh.usage.switched_to",
    "usage",
    "subj",
    "改用|换成|换用|转用|切换到|改喝|换了",
    rf"^{ZADV}(?:改用|换成|换用|转用|切换到|切换成|改喝|改成|换成了|改用了|换用了)(?:了)?"
    rf"(?P<v>{ZV}){ZTAIL}",
    _switch_unnamed,
    positives=[
        ("我改用Firefox了", Frame("usage:", "firefox", previous="")),
        ("写代码的话我改用Zed了", Frame("usage:写代码", "zed", previous="")),
    ],
    negatives=["我妈妈改用微信了", "我改用了"],
)

USES = rule(
    "zh.usage.uses",
    "usage",
    "subj",
    "用|喝",
    rf"^{ZADV}(?:都|主要|一般|平时|通常|一直|还是|只|基本上)*(?:用|使用|喝)(?:的是)?\s*"
    rf"(?P<v>[a-z0-9][a-z0-9 .+#_-]*?)\s*(?:来)?(?P<n>[{HAN}]{{1,8}})?{ZTAIL}"
    rf"|^{ZADV}(?:都|主要|一般|平时|通常|一直|还是|只|基本上)*(?:用|使用|喝)(?:的是)?"
    rf"(?P<v2>{ZV}){ZTAIL}",
    _use,
    positives=[
        ("我用 VS Code 写代码", Frame("usage:写代码", "vs code")),
        ("以后用Firefox", Frame("usage:", "firefox", previous="")),
        ("用户用的是华为手机。", Frame("phone", "huawei")),
    ],
    negatives=["我用心做事", "我妈妈用微信"],
)

TASK_USES = rule(
    "zh.usage.task_uses",
    "usage",
    "subj",
    "用",
    rf"^(?P<n>(?:做|写|记|画|拍|剪|修|聊|学|查|管理|处理|编辑|开发|设计|听|看)[{HAN}]{{1,4}}?)"
    rf"(?:都|一直|主要|平时|一般|通常|还是|全靠|基本)*(?:用|使用|靠)(?:的是)?\s*(?P<v>{ZV}){ZTAIL}",
    _use,
    positives=[
        ("用户做表格一直用 Excel。", Frame("usage:做表格", "excel")),
        ("以后做表格用 WPS。", Frame("usage:做表格", "wps", previous="")),
    ],
    negatives=["学英语用心", "做饭用心"],
)

NO_LONGER_USES = rule(
    "zh.usage.no_longer_uses",
    "usage",
    "subj",
    "不用|不再|戒|放弃|停用|不喝|弃用",
    rf"^{ZADV}(?:已经)?(?:不再用|不再使用|停用了|停用|弃用了|弃用|不再喝|"
    rf"放弃了|放弃|戒了|戒掉了|戒掉|戒)(?P<v>{ZV}){ZTAIL}|^{ZADV}(?:已经)?把?(?P<v2>{ZV})"
    rf"(?:戒了|戒掉了|停了|卸载了|删了)\s*$"
    # "不用/不喝X" states a change only with 了 ("我不用微信了"; "不用塑料袋" is a habit)
    rf"|^{ZADV}(?:已经)?(?:不用|不使用|不喝)(?P<v3>{ZV})了{ZTAIL}",
    _cancel_usage,
    positives=[
        ("我不再用微信了", Frame("usage:", "", cancel=True, previous="微信")),
        ("我戒了咖啡", Frame("usage:", "", cancel=True, previous="咖啡")),
        ("我不喝可乐了", Frame("usage:", "", cancel=True, previous="可乐")),
    ],
    negatives=["我不用微信付款", "我不再担心了"],
)

LIKES = rule(
    "zh.like.likes",
    "like",
    "subj",
    "喜欢|爱",
    rf"^{ZADV}(?:很|非常|特别|超|挺|真的)?(?:喜欢|热爱|爱)(?:上了)?(?!的)(?P<v>{ZV}){ZTAIL}",
    like,
    positives=[("我喜欢爬山", Frame("like:", "爬山")), ("我喜欢喝可乐", Frame("like:", "喝可乐"))],
    negatives=["我妈妈喜欢爬山", "我喜欢的是什么"],
)

NO_LONGER_LIKES = rule(
    "zh.like.no_longer_likes",
    "like",
    "subj",
    "喜欢",
    rf"^{ZADV}(?:已经)?(?:不再喜欢|不喜欢|没那么喜欢)(?P<v>{ZV})了\s*$",
    cancel_like,
    positives=[
        ("我不再喜欢喝可乐了", Frame("like:", "", cancel=True, previous="喝可乐")),
        ("我不喜欢爬山了", Frame("like:", "", cancel=True, previous="爬山")),
    ],
    negatives=["我不喜欢爬山", "我妈妈不喜欢爬山了"],
)
