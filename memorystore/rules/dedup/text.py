"""A text as de-duplication reads it: folded (NFKC, casefold), cut into tokens, and reduced
to its *core* (meaning-neutral fillers out), with what the guards compare: its numbers and
how many negations it holds.

Why tokens and not characters: a word of a space-separated script, a number, one CJK
character or a symbol is the unit a change of value changes ("Hangzhou" -> "Shanghai",
31 -> 32, "喜欢" -> "不喜欢"). Clause punctuation (, . ; : ! ? 。 ， 、 brackets, line breaks)
marks a boundary between tokens; other punctuation (hyphens, quotes) is dropped. The core
leaves out fillers ("the", "really", "也", "的", a leading "user"/"用户", a clause that only
says "as I said"/"我说过"), reads "do not" as "don't" and folds a few Chinese doublets
("使用" -> "用").
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import NamedTuple

from memorystore.rules import lexicon
from memorystore.rules.scripts import CJK_LETTERS

__all__ = [
    "CJK_HEDGES",
    "CJK_NEGATION",
    "CN_NUMBER",
    "HEDGES",
    "JOINERS",
    "NEGATIONS",
    "NOT_TYPOS",
    "Text",
    "analyse",
    "normalise",
]

_TOKEN = re.compile(
    rf"(?P<c>[{CJK_LETTERS}]+)"
    r"|(?P<n>(?:(?<![^\W_])-)?\d+(?:[.,:]\d+)*)"
    rf"|(?P<w>[^\W_{CJK_LETTERS}]+(?:'[^\W_{CJK_LETTERS}]+)*)"
    r"|(?P<b>[\n\r\u2028\u2029])"
    r"|(?P<o>\S)"
)
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_DIGITS = re.compile(r"\d+")
# before NFKC: apostrophe look-alikes to "'", invisible joiners and variation selectors out,
# and the full-width comma to "、" (NFKC would make it ",": "3，420" is not 3420)
_PRE = str.maketrans(
    {
        "\uff0c": "\u3001",
        **dict.fromkeys("\u2019\u2018\u02bc`\u00b4\uff07", "'"),
        **dict.fromkeys(
            "\u00ad\u200b\u200c\u200d\u2060\ufeff" + "".join(map(chr, range(0xFE00, 0xFE10))),
            None,
        ),
    }
)
_PRE_CHARS = re.compile("[" + re.escape("".join(map(chr, _PRE))) + "]")
# clause boundaries (after NFKC: full-width ，！？ are already , ! ?)
_BOUNDARY = frozenset(",;:.!?。、｡､()[]{}《》「」『』【】〈〉〔〕—…")
# punctuation that carries meaning: kept as a token ("50%" is not "50"), but not informative
_CONTENT_PUNCT = frozenset("%‰‱#@&*/\\§′″")

# meaning-neutral words dropped from the core (a "user" too, at the start of a clause)
_FILLERS = lexicon.word_set("fillers.en")
_SUBJECTS = frozenset({"user"})
# a clause that is only one of these says nothing ("As I said, I live in Hangzhou")
_DISCOURSE = frozenset(" ".join(p.split()) for p in lexicon.tagged("acknowledgements", "dedup"))
_DISCOURSE_HEADS = frozenset(p.split()[0] for p in _DISCOURSE if p.isascii()) | {
    p for p in _DISCOURSE if not p.isascii()
}
_CJK_FILLERS = frozenset("的了很也都还呢吧啊呀嘛哦啦就挺")
# two-character words folded before comparing ("" drops them: adverbs of degree or time)
_CJK_FOLD = {
    "使用": "用",
    "运用": "用",
    "居住": "住",
    "喜爱": "喜欢",
    "非常": "",
    "真的": "",
    "一直": "",
    "一起": "",
    "现在": "",
    "目前": "",
    "比较": "",
}
_CJK_FOLDS = re.compile("|".join(_CJK_FOLD))
_CJK_FILLER_CHARS = re.compile(f"[{''.join(_CJK_FILLERS)}]")
_CJK_SUBJECT = "用户"
# words containing a numeral character that do not count anything
_NON_NUMERAL = re.compile("一般|一定|一样|一切|统一|唯一|万一|一旦|一致|一向|一下|一点|一些|专一")
_CN_NUMERALS = "零〇一二两三四五六七八九十百千万亿几半双俩仨壹贰叁肆伍陆柒捌玖拾佰仟"
CN_NUMBER = re.compile(f"[{_CN_NUMERALS}]+")
_NUMBER_WORDS = lexicon.word_set("number_words.en")
NEGATIONS = lexicon.word_set("negations.en")
# apostrophe-less contractions, spelled as their apostrophe forms
_NEG_CANON = {w.replace("'", ""): w for w in lexicon.entries("negative_contractions.en")}
_NEG_CANON["cannot"] = "can't"
# contractions with one reading ("he's" may be "he is" or "he has": left alone)
_EXPAND = {
    w: tuple(w.replace("'m", " am").replace("'re", " are").replace("'ve", " have").split())
    for w in lexicon.words("i'm you're we're they're i've you've we've they've")
} | {w: (w[:-3], "will") for w in lexicon.words("i'll you'll we'll they'll")}
# "do not" is "don't" (one negation either way)
_NOT_AFTER = {
    w.removesuffix("n't"): w for w in _NEG_CANON.values() if w not in ("won't", "can't", "ain't")
}
_NOT_AFTER |= {"will": "won't", "can": "can't"}
_CJK_NEGATIONS = "不没别未无非莫勿否甭"
CJK_NEGATION = re.compile(f"[{_CJK_NEGATIONS}]")
# words a typo rule never changes: numbers and negations
NOT_TYPOS = _NUMBER_WORDS | NEGATIONS
# a contained run may end before these: what follows adds to it rather than changes it
JOINERS = lexicon.word_set("joiners")
# ...unless the rest makes it conditional, uncertain, past or someone else's word: "I stay
# home" is not said by "If it rains, I stay home" nor by "She thinks I stay home"
HEDGES = lexicon.word_set("hedges.en")
CJK_HEDGES = re.compile(
    "如果|要是|假如|假设|除非|可能|也许|或许|大概|有时|偶尔|只|除了|当|以前|曾经|过去|认为|觉得|说|"
    "希望|想|据说|听说|以为"
)


# ---------------------------------------------------------------- analysis of one text


class Text(NamedTuple):
    norm: str
    informative: bool  # has a letter, digit, CJK character or pictographic symbol
    core: tuple[str, ...]
    brk: tuple[bool, ...]  # brk[i]: core[i] starts a clause (brk[0] is True)
    numbers: tuple[str, ...]
    negations: int


@functools.lru_cache(maxsize=4096)
def _other_kind(ch: str) -> str:
    """What a character outside words, numbers and CJK is: b(oundary), x (content
    punctuation), s (pictographic symbol), y (other symbol), m(ark) or d(ropped)."""
    if ch in _BOUNDARY:
        return "b"
    if ch in _CONTENT_PUNCT:
        return "x"
    cat = unicodedata.category(ch)
    if cat == "So":
        return "s"
    if cat[0] == "S":
        return "y"
    return "m" if cat[0] == "M" else "d"


def _fold(text: str) -> str:
    if text.isascii():  # NFKC is the identity, casefold is lower
        return text.replace("`", "'").lower()
    if _PRE_CHARS.search(text):
        text = text.translate(_PRE)
    text = unicodedata.normalize("NFKC", text)
    return unicodedata.normalize("NFKC", text.casefold())


def _tokens(text: str) -> tuple[list[tuple[str, str, bool]], str, bool]:
    """The tokens of a folded text as (token, kind, a boundary precedes it), kinds c (a run
    of CJK characters), n(umber), w(ord), s/x/y (see `_other_kind`); the normalised text;
    whether it is informative.

    A combining mark right after a word belongs to it, and so does the word right after
    such a mark (Devanagari, Thai: the regex word class leaves the marks out)."""
    out: list[tuple[str, str, bool]] = []
    brk = True
    end = -1  # where the last token ends
    glued = False  # the last token is a word that ends with a combining mark
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "o"  # every alternative is a named group
        tok = m.group()
        if kind == "o":
            kind = _other_kind(tok)
            if kind == "m":
                if out and out[-1][1] == "w" and end == m.start():
                    out[-1] = (out[-1][0] + tok, "w", out[-1][2])
                    end, glued = m.end(), True
                continue
            if kind == "d":
                continue
        if kind == "b":
            brk = True
            continue
        if kind == "w" and glued and end == m.start():
            out[-1] = (out[-1][0] + tok, "w", out[-1][2])
            end, glued = m.end(), False
            continue
        if kind == "n" and "," in tok and _THOUSANDS.fullmatch(tok):
            tok = tok.replace(",", "")
        out.append((tok, kind, brk))
        brk, end, glued = False, m.end(), False

    parts: list[str] = []
    informative = False
    prev = ""
    for tok, kind, _ in out:
        parts.append(tok if not prev or (kind == "c" and prev == "c") else " " + tok)
        informative = informative or kind in "cnws"
        prev = kind
    return out, "".join(parts), informative


@functools.lru_cache(maxsize=4096)
def analyse(text: str) -> Text:
    toks, norm, informative = _tokens(_fold(text))
    # the core (fillers dropped, "do not" as "don't", Chinese doublets folded, one token
    # per CJK character), and the guards' view: numbers in order, how many negations
    core: list[str] = []
    brks: list[bool] = []
    numbers: list[str] = []
    negations = 0
    pending = False
    i, n = 0, len(toks)
    while i < n:
        tok, kind, brk = toks[i]
        i += 1
        pending = pending or brk or not core
        if brk and tok in _DISCOURSE_HEADS:
            j = i
            while j < n and not toks[j][2]:
                j += 1
            if j < n and " ".join(t for t, _, _ in toks[i - 1 : j]) in _DISCOURSE:
                i = j
                continue
        if kind == "c":
            if pending and tok.startswith(_CJK_SUBJECT):
                tok = tok[len(_CJK_SUBJECT) :]
            if _CJK_FOLDS.search(tok):
                tok = _CJK_FOLDS.sub(_cjk_fold, tok)
            tok = _CJK_FILLER_CHARS.sub("", tok)
            if not tok:
                continue
            core.extend(tok)
            brks.append(pending)
            brks.extend([False] * (len(tok) - 1))
            numbers.extend(CN_NUMBER.findall(_NON_NUMERAL.sub("_", tok)))
            negations += len(CJK_NEGATION.findall(tok))
        elif kind == "w":
            if tok in _FILLERS or (pending and tok in _SUBJECTS):
                continue
            tok = _NEG_CANON.get(tok, tok)
            if tok in _EXPAND:
                *head, tok = _EXPAND[tok]
                core.extend(head)
                brks.append(pending)
                brks.extend([False] * (len(head) - 1))
                pending = False
            if tok in _NOT_AFTER and i < n and toks[i][0] == "not" and not toks[i][2]:
                tok = _NOT_AFTER[tok]
                i += 1
            core.append(tok)
            brks.append(pending)
            if tok in _NUMBER_WORDS:
                numbers.append(tok)
            elif tok.isalpha():
                negations += tok in NEGATIONS
            else:
                numbers.extend(_DIGITS.findall(tok))
                negations += tok.endswith("n't")
        else:
            core.append(tok)
            brks.append(pending)
            if kind == "n":
                numbers.append(tok)
        pending = False

    return Text(norm, informative, tuple(core), tuple(brks), tuple(numbers), negations)


def _cjk_fold(m: re.Match[str]) -> str:
    return _CJK_FOLD[m.group()]


def normalise(text: str) -> str:
    """NFKC and casefold, then the tokens joined by single spaces (none between two CJK
    characters); punctuation is dropped except where it means something ("%", "#", "/").
    Thousands separators are dropped ("1,000" → "1000"), a minus sign is kept ("-5")."""
    return analyse(text).norm
