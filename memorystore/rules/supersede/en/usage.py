"""English rules for what the user prefers, uses and likes: favourites ("my favourite movie
is X", "X is my go-to editor"), usage ("I use X for C", "I switched from X to Y", "I no longer
use X") and likes ("I like X").

Why three families: a favourite holds one value per noun; usage and likes hold many ("I use
Python" and "I use Rust" are both true), so only a switch or a cancellation that names the old
value retires one.
"""

from __future__ import annotations

import re

from memorystore.rules.supersede.builders import cancel_like, favourite, like, switch
from memorystore.rules.supersede.en.grammar import ADV, END, NOW, STRICT_END, V
from memorystore.rules.supersede.frame import Frame
from memorystore.rules.supersede.reading import en_value, first_group, upper_at, usage
from memorystore.rules.supersede.rule import Clause, rule
from memorystore.rules.supersede.values import norm

__all__ = [
    "INSTEAD_OF",
    "IS_MY_FAVOURITE",
    "LIKES",
    "MY_FAVOURITE_IS",
    "NO_LONGER_LIKES",
    "NO_LONGER_USES",
    "PREFER",
    "PREFER_FOR",
    "REPLACED_WITH",
    "SWITCHED_FROM",
    "SWITCHED_TO",
    "USES",
    "USE_AS_MAIN",
]

_GERUND_LEAD = re.compile(r"^(?:using|drinking|eating|playing|taking|smoking)\s+")
_NOT_AN_OBJECT = re.compile(
    r"\s*(?:at|by|in|to|my|our|his|her|the|on|up|for|with|from|job|work|working|being)\s"
)


def _use_frames(m: re.Match[str], c: Clause, single_ok: bool, *, prefer: bool) -> list[Frame]:
    v = en_value(c, m, "v", cap=False, words=5, indefinite=True)
    if v is None:
        return []
    n = ""
    if "n" in m.groupdict() and m.group("n"):
        n = norm(m.group("n"))
    n = n or c.topic
    if prefer and not n:
        return [Frame("usage:", v, previous="" if c.chg else None)]
    if prefer:
        return [Frame(f"favourite:{n}", v)] if single_ok else []
    # "now" alone is no switch marker: "I now use Copilot for coding" keeps VS Code
    return usage(v, n, c, single_ok)


def _use(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _use_frames(m, c, single_ok, prefer=False)


def _prefer(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    return _use_frames(m, c, single_ok, prefer=True)


def _cancel_usage(m: re.Match[str], c: Clause, single_ok: bool) -> list[Frame]:
    group, _ = first_group(m, "v", "v2", "v3")
    if group is None:
        return []
    bare = m.groupdict().get("bare")
    raw = m.group(group)
    if bare and upper_at(c, c.rest + m.start(group)) and bare == "quit":
        return []  # "I quit Google": the employer rule's
    v = en_value(c, m, group, cap=False, words=5, indefinite=True)
    if v is None:
        return []
    v = _GERUND_LEAD.sub("", v)
    if bare and _NOT_AN_OBJECT.match(raw + " "):
        return []
    n = norm(m.group("n")) if m.groupdict().get("n") else ""
    return [Frame(f"usage:{n}", "", cancel=True, previous=v)] if v else []


MY_FAVOURITE_IS = rule(
    "en.favourite.my_favourite_is",
    "favourite",
    "poss",
    "favo|go-to|fav ",
    rf"^(?:new |current |all-time |absolute |very )?(?:favou?rite|fav|go-to|preferred)\s+"
    rf"(?P<n>[a-z][\w' -]{{0,30}}?)\s+(?:is|has become|became)\s+(?:now\s+)?"
    rf"(?P<v>{V}){END}",
    favourite,
    positives=[
        ("My favourite movie is Inception", Frame("favourite:movie", "inception")),
        ("My go-to editor is Vim", Frame("favourite:editor", "vim")),
        ("The user's favourite food is ramen.", Frame("favourite:food", "ramen")),
    ],
    negatives=["My favourite part is the ending.", "My sister's favourite movie is Titanic."],
)

IS_MY_FAVOURITE = rule(
    "en.favourite.is_my_favourite",
    "favourite",
    "free",
    "my favo|my go-to|my new favo",
    r"^(?P<v>[^,;!?()]+?)\s+(?:is|has become|became)\s+(?:now\s+)?my\s+"
    r"(?:new\s+|current\s+|all-time\s+)?(?:favou?rite|go-to)\s+(?P<n>[a-z][\w' -]{0,30}?)"
    r"(?:\s+(?:now|these days|nowadays))?\s*$",
    favourite,
    positives=[
        ("Inception is my favourite film", Frame("favourite:movie", "inception")),
        ("Green is my favourite colour.", Frame("favourite:color", "green")),
    ],
    negatives=["It is my favourite thing.", "One of my favourite movies is Titanic."],
)

PREFER_FOR = rule(
    "en.favourite.prefer_for",
    "favourite",
    "subj",
    "prefer",
    rf"^{ADV}(?:prefer|prefers|have come to prefer)\s+(?!to\s|not\s)(?P<v>{V})\s+"
    rf"(?:for|when it comes to)\s+(?P<n>{V}){END}",
    favourite,
    positives=[
        ("I prefer tea for breakfast", Frame("favourite:breakfast", "tea")),
        (
            "The user prefers a pastel palette for charts.",
            Frame("favourite:chart", "pastel palette"),
        ),
    ],
    negatives=["I prefer to work for myself.", "I prefer it for now."],
)

PREFER = rule(
    "en.usage.prefer",
    "usage",
    "subj",
    "prefer",
    rf"^{ADV}(?:prefer|prefers)\s+(?!to\s|not\s|being\s)(?P<v>{V})"
    rf"(?:\s+(?:over|to|rather than)\s+{V})?{END}",
    _prefer,
    positives=[
        ("I prefer Rust.", Frame("usage:", "rust")),
        ("I prefer dark mode over light mode.", Frame("usage:", "dark mode")),
    ],
    negatives=["I prefer not to say.", "I prefer being alone."],
)

INSTEAD_OF = rule(
    "en.usage.instead_of",
    "usage",
    "subj",
    "instead of",
    rf"^{ADV}(?:(?:am|is|have been|has been)\s+)?{NOW}(?:use|uses|using|drink|drinks|"
    rf"drinking|prefer|prefers|go with|going with|went with|chose|picked|choose|run|"
    rf"runs|running|drive|drives|driving|play|plays|playing)\s+(?P<v>{V})\s+"
    rf"(?:now\s+)?instead of\s+(?:using\s+|drinking\s+)?(?P<p>{V})"
    rf"(?:\s+(?:for|to)\s+(?P<n>{V}))?{STRICT_END}",
    switch,
    positives=[
        ("I now use VS Code instead of PyCharm", Frame("usage:", "vs code", previous="pycharm")),
        ("I now use Firefox instead of Chrome.", Frame("usage:", "firefox", previous="chrome")),
    ],
    negatives=["I use it instead of nothing.", "My dad uses Firefox instead of Chrome."],
)

SWITCHED_FROM = rule(
    "en.usage.switched_from",
    "usage",
    "subj",
    "switch|chang|migrat|moved|convert|transition|upgrad|went|gone|replac",
    rf"^{ADV}(?:have |has )?{NOW}(?:switched|changed|migrated|moved|converted|"
    rf"transitioned|upgraded|gone|went)\s+(?:over\s+)?from\s+(?:using\s+)?(?P<p>{V})\s+to"
    rf"\s+(?:using\s+)?(?P<v>{V})(?:\s+(?:for|to)\s+(?P<n>{V}))?{END}",
    switch,
    positives=[
        ("I switched from PyCharm to VS Code", Frame("usage:", "vs code", previous="pycharm")),
        ("I moved from Vim to Emacs for coding.", Frame("usage:coding", "emacs", previous="vim")),
    ],
    negatives=["My dad switched from Vim to Emacs.", "I switched from Vim to Vim."],
)

SWITCHED_TO = rule(
    "en.usage.switched_to",
    "usage",
    "subj",
    "switch|migrat",
    rf"^{ADV}(?:have |has )?{NOW}(?:switched|migrated)\s+(?:over\s+)?to\s+"
    rf"(?:using\s+)?(?P<v>{V})(?:\s+from\s+(?:using\s+)?(?P<p>{V}))?"
    rf"(?:\s+(?:for|to)\s+(?P<n>{V}))?{END}",
    switch,
    positives=[
        ("I switched to Neovim from Vim.", Frame("usage:", "neovim", previous="vim")),
        ("I switched to Linear for tickets.", Frame("usage:tickets", "linear", previous="")),
    ],
    negatives=["I switched to it.", "My team switched to Linear."],
)

REPLACED_WITH = rule(
    "en.usage.replaced_with",
    "usage",
    "subj",
    "replac|ditch|gave up|swapp",
    rf"^{ADV}(?:have |has )?{NOW}(?:replaced|swapped)\s+(?P<p>{V})\s+(?:with|for)\s+"
    rf"(?P<v>{V}){END}|^{ADV}(?:have |has )?{NOW}(?:ditched|gave up|dropped|traded)"
    rf"\s+(?P<p2>{V})\s+for\s+(?P<v2>{V}){END}",
    switch,
    positives=[
        (
            "I replaced Excel with Google Sheets.",
            Frame("usage:", "google sheets", previous="excel"),
        ),
        ("I ditched Spotify for Apple Music.", Frame("usage:", "apple music", previous="spotify")),
    ],
    negatives=["I replaced it with something.", "My brother replaced Excel with Numbers."],
)

USE_AS_MAIN = rule(
    "en.favourite.use_as_main",
    "favourite",
    "subj",
    " as ",
    rf"^{ADV}(?:(?:am|is)\s+)?{NOW}(?:use|uses|using|have been using|has been using)\s+"
    rf"(?P<v>{V})\s+as\s+(?:(?:my|their|his|her|the|a)\s+)?(?:main|primary|default|preferred|"
    rf"go-to|only|daily|everyday|favou?rite)\s+(?P<n>[a-z][\w' -]{{0,30}}?){STRICT_END}",
    favourite,
    positives=[
        ("I use VS Code as my main editor", Frame("favourite:editor", "vs code")),
        ("The user uses Neovim as their main editor.", Frame("favourite:editor", "neovim")),
    ],
    negatives=["I use it as my main thing.", "My wife uses Safari as her main browser."],
)

USES = rule(
    "en.usage.uses",
    "usage",
    "subj",
    "use|drink|drive|using|play",
    rf"^{ADV}(?:(?:mainly|mostly|usually|always|only|primarily|exclusively|will|"
    rf"daily)\s+)*(?:use|uses|am using|is using|have been using|has been using|drink|drinks|"
    rf"drive|drives|play|plays)\s+(?!(?:to|it|not|on|at|in|for|with|by)\b)(?P<v>{V})"
    rf"(?:\s+(?:for|to)\s+(?P<n>{V}))?{END}",
    _use,
    positives=[
        ("I use Python", Frame("usage:", "python")),
        ("From now on I use VS Code for coding.", Frame("usage:coding", "vs code", previous="")),
        ("The user uses a Google Pixel phone.", Frame("phone", "pixel")),
    ],
    negatives=["I use it daily.", "I use to run every morning.", "My brother uses Python."],
)

NO_LONGER_USES = rule(
    "en.usage.no_longer_uses",
    "usage",
    "subj",
    "use|using|drink|quit|stopped|gave up|ditched|dropped|no longer",
    rf"^{ADV}(?:have |has )?(?:no longer use|no longer uses|no longer drink|"
    rf"no longer drinks|stopped using|quit using|stopped drinking|quit drinking|"
    rf"gave up using|gave up drinking|have stopped using|has stopped using|"
    rf"am no longer using|is no longer using|used to use|used to drink|"
    rf"stopped playing|quit playing|no longer play|no longer plays)\s+(?P<v>{V})"
    rf"(?:\s+(?:for|to)\s+(?P<n>{V}))?{STRICT_END}"
    rf"|^{ADV}(?:do not|does not|am not|is not)\s+(?:use|drink|play|using|drinking|"
    rf"playing)\s+(?P<v2>{V})\s+(?:anymore|any more)\s*$"
    rf"|^{ADV}(?:have |has )?(?P<bare>stopped|quit|gave up|given up|ditched|dropped)\s+"
    rf"(?P<v3>{V})(?:\s+(?:last|this) \w+|\s+\w+ (?:days?|weeks?|months?|years?) ago)?"
    rf"{STRICT_END}",
    _cancel_usage,
    positives=[
        ("I no longer use Vim", Frame("usage:", "", cancel=True, previous="vim")),
        ("I stopped drinking coffee", Frame("usage:", "", cancel=True, previous="coffee")),
        ("I gave up sugar.", Frame("usage:", "", cancel=True, previous="sugar")),
    ],
    negatives=["I quit Google.", "I stopped at the store.", "My dad no longer uses Vim."],
)

LIKES = rule(
    "en.like.likes",
    "like",
    "subj",
    "like|love|enjoy|into|fan",
    rf"^{ADV}(?:really\s+|absolutely\s+)?(?:like|likes|love|loves|enjoy|enjoys|am into|"
    rf"is into|am a (?:big |huge )?fan of|is a (?:big |huge )?fan of)\s+"
    rf"(?!to\s|it\b|that\b|this\b)(?P<v>{V}){END}",
    like,
    positives=[
        ("I like hiking", Frame("like:", "hiking")),
        ("I'm a big fan of jazz.", Frame("like:", "jazz")),
    ],
    negatives=["I like it.", "I like to think so.", "My sister likes hiking."],
)

NO_LONGER_LIKES = rule(
    "en.like.no_longer_likes",
    "like",
    "subj",
    "like|love|enjoy|into|fan",
    rf"^{ADV}(?:do not|does not)\s+(?:like|love|enjoy)\s+(?P<v>{V})\s+"
    rf"(?:anymore|any more)\s*$|^{ADV}(?:no longer|used to)\s+(?:like|likes|love|loves|"
    rf"enjoy|enjoys)\s+(?P<v2>{V}){STRICT_END}|^{ADV}stopped\s+(?:liking|loving|"
    rf"enjoying)\s+(?P<v3>{V}){STRICT_END}|^(?:am|is)\s+(?:no longer|not)\s+"
    rf"(?:into|a fan of)\s+(?P<v4>{V})(?:\s+(?:anymore|any more))?\s*$",
    cancel_like,
    positives=[
        ("I don't like sushi anymore.", Frame("like:", "", cancel=True, previous="sushi")),
        ("I no longer enjoy running.", Frame("like:", "", cancel=True, previous="running")),
    ],
    negatives=["I don't like sushi.", "My son doesn't like sushi anymore."],
)
