"""The lead of a clause: the adverbials before its subject ("Last month, ...", "以后") and the
subject itself, which says whose fact the clause states.

Why it matters: a rule reads only what follows the lead, and the lead decides whether the
fact is the user's ("I", "the user", "我"), maybe the user's ("he", "she", "we"), or someone
else's; its markers say a change ("from now on", "以后"), a future ("next month": no fact
yet) or a topic ("when it comes to coffee", "咖啡的话").
"""

from __future__ import annotations

import re

from memorystore.rules import lexicon
from memorystore.rules.scripts import HAN
from memorystore.rules.supersede.text import KEEP_COMMA

__all__ = [
    "MODIFIER",
    "PRONOUNS",
    "TRIVIAL",
    "USER_SUBJECTS",
    "WE",
    "WE_SLOTS",
    "ZH_ADV",
    "ZH_TIME_FUTURE",
    "is_prefix_only",
    "lead",
]

_MONTHS = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_EN_TIME = (
    r"(?:last|this|next|earlier this|later this) (?:week|month|year|summer|spring|fall|"
    r"autumn|winter|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(?:a|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|several|"
    r"\d+) (?:days?|weeks?|months?|years?) ago|in (?:19|20)\d\d|in " + _MONTHS + r"|"
    r"(?:back )?in " + _MONTHS + r" (?:19|20)\d\d|since (?:19|20)\d\d|today|yesterday|"
    r"recently|lately|currently|now|right now|these days|nowadays|as of (?:now|today)|"
    r"at the moment|at present|since then"
)
_EN_PREFIX = (
    r"(?:so|well|actually|btw|by the way|anyway|ok|okay|oh|also|and|but|then|finally|"
    r"officially|update|news|fyi|remember(?: that)?|(?:please )?note(?: that)?|"
    r"just so you know|for the record|keep in mind(?: that)?|"
    r"(?P<fut>next (?:week|month|year|summer|spring|fall|autumn|"
    r"winter|weekend)|tomorrow|soon|later this (?:week|month|year)|in (?:a|one|two|three|a few|"
    r"several|\d+) (?:days?|weeks?|months?|years?))|"
    + _EN_TIME
    + r"|(?P<chg>from now on|going forward|starting (?:today|now|this week|this month|"
    r"next week|next month)|from today on|from today onwards?)|"
    r"(?:when it comes to|as for|as far as|regarding) (?P<topic>[a-z][\w' -]{0,30}?)"
    r"(?: (?:goes|is concerned))?)"
)
_EN_LEAD = re.compile(
    rf"^(?:(?:{_EN_PREFIX})[\s,:{KEEP_COMMA}-]+)*"
    r"(?:(?P<subj>i|the user|user|he|she|we)\s+|(?P<poss>my|the user's|user's|his|her|our)\s+)?"
)
_EN_PREFIX_ONLY = re.compile(rf"^(?:(?:{_EN_PREFIX})[\s,:{KEEP_COMMA}-]*)+$")

_ZH_TIME_PAST = (
    r"(?:[今去前上这本][个]?(?:年|月|周|星期|礼拜|天)(?:初|底|中|末)?|(?:19|20)\d\d年(?:\d{1,2}月)?|"
    r"\d{1,2}月(?:份|初|底|中)?|[一二三四五六七八九十]{1,3}月(?:份|初|底|中)?|前段时间|前阵子|不久前|"
    r"前不久|这段时间|最近|刚刚|刚才|刚|今天|昨天|前天|上周末|现在|目前|如今|年初|年底)"
)
ZH_TIME_FUTURE = (
    r"(?:[下明后][个]?(?:年|月|周|星期|礼拜|天)(?:初|底|中|末)?|明天|后天|下周末|过几天|过段时间|"
    r"年后|节后|春节|国庆|暑假|寒假|周末)"
)
ZH_ADV = (
    rf"(?:{_ZH_TIME_PAST}|已经|已|还|又|一直|都|就|才|终于|正式|真的|确实|其实|总算|顺利|成功|"
    r"开始|从此|依然|仍然|仍|主要|平时|一般|通常|每天|天天)"
)
_ZH_PREFIX = (
    rf"(?:{_ZH_TIME_PAST}|(?P<fut>{ZH_TIME_FUTURE})|其实|不过|但是|但|而且|所以|然后|后来|另外|对了|嗯|哦|"
    r"(?:请)?记住|记一下|备注|顺便说一下|"
    r"(?P<chg>以后|今后|从现在开始|从现在起|从今以后|从今天开始|从今天起|从此以后|往后)|"
    rf"(?P<topic>[{HAN}a-z0-9 ]{{1,8}}?)(?:的话|方面|这块|这一块|这方面))"
)
_ZH_LEAD = re.compile(
    rf"^(?:{_ZH_PREFIX}[\s,，]*)*"
    r"(?:(?P<poss>我的|用户的|该用户的|他的|她的|我们的)|(?P<subj>我们|我(?![们的])|该用户|用户|他(?![们的])|"
    r"她(?![们的])))?"
)
_ZH_PREFIX_ONLY = re.compile(rf"^(?:{_ZH_PREFIX}[\s,，]*)+$")

USER_SUBJECTS = frozenset({"i", "the user", "user", "my", "the user's", "user's"}) | frozenset(
    {"我", "用户", "该用户", "我的", "用户的", "该用户的"}
)
PRONOUNS = frozenset({"he", "she", "his", "her", "他", "她", "他的", "她的"})
# "we" includes the user, for where they live and what they plan ("we moved to Shanghai",
# "we cancelled our trip to Japan"); not for a job ("we use Python" may be the company)
WE = frozenset({"we", "our", "我们", "我们的"})
WE_SLOTS = frozenset({"plan", "residence"})
# a clause that says nothing: an acknowledgement or a connective alone
TRIVIAL = re.compile(rf"^(?:{'|'.join(lexicon.tagged('acknowledgements', 'trivial'))})?[\s!.~]*$")
# a clause that only qualifies the one before ("..., with my wife", "..., for two years")
MODIFIER = re.compile(
    r"^(?:with|for|since|near|in|at|on|from|after|before|during|because of|due to|thanks to|"
    r"about|around|last|this|next|(?:19|20)\d\d)\b"
)


def lead(low: str, cjk: bool) -> tuple[re.Match[str], str]:
    """The lead's match (groups subj, poss, fut, chg, topic) and its subject or possessive."""
    m = (_ZH_LEAD if cjk else _EN_LEAD).match(low)
    assert m is not None  # every group is optional
    subj = m.group("subj") or m.group("poss")
    return m, subj or ""


def is_prefix_only(low: str, cjk: bool) -> bool:
    return bool((_ZH_PREFIX_ONLY if cjk else _EN_PREFIX_ONLY).match(low)) or bool(
        TRIVIAL.match(low)
    )
