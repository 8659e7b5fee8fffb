"""Pieces of the Chinese rules' patterns: adverbs before a verb, where a value ends, the
particles and durations that may close a clause ("我搬到上海一年多了"), job titles.

Why one place: every Chinese rule ends its value at the same punctuation and closes on the
same tail.
"""

from __future__ import annotations

from memorystore.rules import lexicon
from memorystore.rules.scripts import HAN
from memorystore.rules.supersede.leads import ZH_ADV, ZH_TIME_FUTURE

__all__ = ["JOB_TITLE_ZH", "ZADV", "ZH_ADV", "ZH_TIME_FUTURE", "ZTAIL", "ZV"]

ZV = r"[^,，;；!！?？、()（）。]+?"  # a lazily captured Chinese-text value
_ZDUR = (
    r"(?:(?:已经|快|有|差不多|将近|大概)?[\d一二三四五六七八九十两半几]+(?:个)?多?"
    r"(?:年|月|星期|周|天|礼拜)多?(?:了)?)"
)
ZTAIL = rf"(?:{_ZDUR}|了|啦|呀|啊|哦|呢|吧|咯|喽|嘛|~|\s)*$"
ZADV = rf"(?:{ZH_ADV})*"
# a job title: up to ten characters and a head ("后端开发工程师")
JOB_TITLE_ZH = rf"[{HAN}A-Za-z0-9 ]{{0,10}}?(?:{lexicon.alternation('job_heads.zh')})"
