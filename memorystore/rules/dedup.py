"""Is a new memory a repeat of one already stored for the user? Offline, pure and fast.

A false duplicate silently loses the new fact, which is worse than storing a repeat, so a
rule says "duplicate" only when the texts carry the same content words; a change of value
("Hangzhou" → "Shanghai", 31 → 32, "like" → "don't like") is never a duplicate (it is a
supersession, handled elsewhere).

A text is read as tokens: a word of a space-separated script, a number, one CJK character,
a symbol. Clause punctuation (, . ; : ! ? 。 ， 、 brackets, line breaks) marks a boundary
between tokens; other punctuation (hyphens, quotes) is dropped. The fuzzy rules compare the
*core*: the tokens without meaning-neutral fillers ("the", "really", "也", "的", a leading
"user"/"用户", a clause that only says "as I said"/"我说过"), "do not" read as "don't",
and a few Chinese doublets folded ("使用" → "用").

The cascade (the first rule that holds wins):

1. ``exact``: equal normalised texts (`normalise`: NFKC, casefold, punctuation and spacing
   dropped). The only rule the guards do not veto: equal normalised texts have equal
   numbers and negations.
2. Guards, vetoing every rule below: the same numbers (digits, Chinese numerals, English
   number words) in the same order, and as many negations (not/never/n't…, 不/没/别/未/无…).
3. ``levenshtein`` (keep old): equal cores, or cores equal but for one word that is a
   keyboard slip on the other (`_typo`) or one word written as two ("darkmode"); a slip
   only in texts up to `Rules.short_chars`, and then the cores' character similarity must
   reach `Rules.levenshtein`. A plain character edit distance is unsafe: "cats"/"bats",
   "深色"/"浅色" are one edit apart.
4. ``contained`` (keep old) / ``contains`` (keep new): one core is a run of the other's
   tokens (words for Latin text, characters for CJK) that starts a clause and ends one or
   stops before a joining word ("and", "with", "near", "和"…), and the rest of the longer
   text neither makes it conditional nor reports it ("if", "when", "she said", "如果"…).
   Substring containment is unsafe ("tea" in "team sports", "猫" in "猫头鹰"), and so is a
   run that stops mid-clause ("I like tea" in "I like tea ceremonies").
5. ``jaccard`` (keep old): the cores hold the same tokens, one is the other with a block
   moved at clause boundaries ("by default, charts in dark mode"), the moved tokens hold
   no number or negation, and the Jaccard similarity of the cores' unigrams and bigrams
   reaches `Rules.jaccard`. A token-set Jaccard alone is unsafe: one changed word in a long
   sentence keeps it high, and a swap of roles ("Bob reports to Alice") keeps it at 1.

Measured by tests/unit/rules/test_dedup.py: no false duplicate over its change-of-value table (both
directions) and 2,000+ templated changes of value; recall 1.0 over its table of repeats in
English, Chinese and mixed script. What the rules knowingly give up is listed there too.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, NamedTuple

from rapidfuzz.distance import OSA, Levenshtein

__all__ = ["Duplicate", "Rules", "duplicate", "find_duplicate", "normalise", "same_fact"]


@dataclass(frozen=True)
class Rules:
    """Thresholds of the cascade (defaults = the measured, shipped values).

    - `jaccard`: least Jaccard similarity of the cores' unigrams and bigrams for a block
      move. A move to the start or end of an n-token text scores 1 - 1/n, one inside it
      (2n - 3) / (2n + 1): 0.7 rejects the moves in short texts, where order is most of the
      meaning ("Bob, Alice likes": 0.67), and accepts "On weekends, I go hiking" (0.8).
    - `levenshtein`: least character similarity of the cores for the typo rule; 0.8 lets
      one typo through in a two-word text of ten characters ("love suhsi") but not in a
      single word ("suhsi").
    - `short_chars`: texts up to this many normalised characters get the typo allowance;
      longer ones, usually written by an extractor that spells consistently, only match
      with equal cores (where every extra word is one more chance of a real-word pair such
      as trail/trial).
    """

    jaccard: float = 0.7
    levenshtein: float = 0.8
    short_chars: int = 100


@dataclass(frozen=True)
class Duplicate:
    """The old memory a new text duplicates, by which rule, and which of the two to keep."""

    id: str  # the id of the OLD memory it duplicates
    rule: str  # "exact" | "levenshtein" | "contained" | "contains" | "jaccard"
    keep: Literal["old", "new"]  # "old": the new adds nothing; "new": it holds the old and more


# ---------------------------------------------------------------- tables


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _phrases(text: str) -> frozenset[str]:
    return frozenset(" ".join(p.split()) for p in text.split("|"))


# Han, kana and iteration marks: the letters of the CJK blocks (their punctuation, sound
# marks and unassigned code points are left to the other classes)
_CJK = (
    "\u3005-\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufa6d\ufa70-\ufad9\U00020000-\U0002a6df\U0002a700-\U0002b738"
    "\U0002b740-\U0002b81d\U0002b820-\U0002cea1\U0002ceb0-\U0002ebe0\U0002f800-\U0002fa1d"
    "\U00030000-\U0003134a"
)
_TOKEN = re.compile(
    rf"(?P<c>[{_CJK}]+)"
    r"|(?P<n>(?:(?<![^\W_])-)?\d+(?:[.,:]\d+)*)"
    rf"|(?P<w>[^\W_{_CJK}]+(?:'[^\W_{_CJK}]+)*)"
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
_FILLERS = _words("a an the really very also too just actually currently now indeed")
_SUBJECTS = frozenset({"user"})
# a clause that is only one of these says nothing ("As I said, I live in Hangzhou")
_DISCOURSE = _phrases(
    """as i said|like i said|as i told you|i told you|i said|as mentioned|as i mentioned|
    again|yes|yeah|yep|ok|okay|well|so|also|anyway|by the way|btw|actually|honestly|in fact|
    remember|fyi|just so you know|for the record|我说过|我说了|我之前说过|我跟你说过|我告诉过你|
    我告诉你|之前说过|对|是的|嗯|好|其实|顺便说下|记住"""
)
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
_CN_NUMBER = re.compile(f"[{_CN_NUMERALS}]+")
_NUMBER_WORDS = _words(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy
    eighty ninety hundred thousand million billion trillion first second third fourth fifth
    sixth seventh eighth ninth tenth eleventh twelfth twentieth hundredth once twice thrice
    half dozen single double triple"""
)
_NEGATIONS = _words("not no never cannot nobody nothing none nowhere neither nor without nope")
# apostrophe-less contractions, spelled as their apostrophe forms
_NEG_CANON = {
    w.replace("'", ""): w
    for w in _words(
        """don't doesn't didn't isn't aren't wasn't weren't won't can't couldn't
    shouldn't wouldn't haven't hasn't hadn't mustn't needn't ain't"""
    )
}
_NEG_CANON["cannot"] = "can't"
# contractions with one reading ("he's" may be "he is" or "he has": left alone)
_EXPAND = {
    w: tuple(w.replace("'m", " am").replace("'re", " are").replace("'ve", " have").split())
    for w in _words("i'm you're we're they're i've you've we've they've")
} | {w: (w[:-3], "will") for w in _words("i'll you'll we'll they'll")}
# "do not" is "don't" (one negation either way)
_NOT_AFTER = {
    w.removesuffix("n't"): w for w in _NEG_CANON.values() if w not in ("won't", "can't", "ain't")
}
_NOT_AFTER |= {"will": "won't", "can": "can't"}
_CJK_NEGATIONS = "不没别未无非莫勿否甭"
_CJK_NEGATION = re.compile(f"[{_CJK_NEGATIONS}]")
# words a typo rule never changes: numbers and negations
_NOT_TYPOS = _NUMBER_WORDS | _NEGATIONS
# a contained run may end before these: what follows adds to it rather than changes it
_JOINERS = _words("""and with near in at on since for because while during from but as by where
    which who after before via using including especially""") | frozenset("和与跟并而但及且因所")
# ...unless the rest makes it conditional, uncertain, past or someone else's word: "I stay
# home" is not said by "If it rains, I stay home" nor by "She thinks I stay home"
_HEDGES = _words(
    """if unless when whenever whether until till except only maybe perhaps probably possibly
    might may could would should sometimes occasionally usually rarely seldom formerly
    previously anymore used say says said think thinks thought believe believes claim claims
    tell tells told want wants wish wishes hope hopes heard pretend pretends imagine"""
)
_CJK_HEDGES = re.compile(
    "如果|要是|假如|假设|除非|可能|也许|或许|大概|有时|偶尔|只|除了|当|以前|曾经|过去|认为|觉得|说|"
    "希望|想|据说|听说|以为"
)


# ---------------------------------------------------------------- analysis of one text


class _Text(NamedTuple):
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
        kind = m.lastgroup
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
def _analyse(text: str) -> _Text:
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
            numbers.extend(_CN_NUMBER.findall(_NON_NUMERAL.sub("_", tok)))
            negations += len(_CJK_NEGATION.findall(tok))
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
                negations += tok in _NEGATIONS
            else:
                numbers.extend(_DIGITS.findall(tok))
                negations += tok.endswith("n't")
        else:
            core.append(tok)
            brks.append(pending)
            if kind == "n":
                numbers.append(tok)
        pending = False

    return _Text(norm, informative, tuple(core), tuple(brks), tuple(numbers), negations)


def _cjk_fold(m: re.Match[str]) -> str:
    return _CJK_FOLD[m.group()]


def normalise(text: str) -> str:
    """NFKC and casefold, then the tokens joined by single spaces (none between two CJK
    characters); punctuation is dropped except where it means something ("%", "#", "/").
    Thousands separators are dropped ("1,000" → "1000"), a minus sign is kept ("-5")."""
    return _analyse(text).norm


# ---------------------------------------------------------------- the rules


def _keys_adjacent() -> frozenset[tuple[str, str]]:
    rows = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
    pairs: set[tuple[str, str]] = set()
    for r, row in enumerate(rows):
        for i, ch in enumerate(row):
            near = [row[i - 1 : i], row[i + 1 : i + 2]]
            if r > 0:
                near += [rows[r - 1][i : i + 2]]
            if r < 2:
                near += [rows[r + 1][max(i - 1, 0) : i + 1]]
            pairs.update((ch, k) for ks in near for k in ks)
    return frozenset(pairs | {(k, ch) for ch, k in pairs})


_ADJACENT_KEYS = _keys_adjacent()


def _typo(a: str, b: str) -> bool:
    """One word is a slip of the keyboard on the other, of the kinds that seldom make
    another real word: two neighbouring letters swapped ("suhsi"; 5+ letters, not the
    first letter: "alter"/"later"), a letter doubled or undoubled ("sushii", "adress"; 6+
    letters), or a letter replaced by its neighbour on the keyboard inside a long word
    ("definitrly"; 8+ letters, neither the first nor the last letter). Other single edits
    are too often another word: "tea"/"team", "sister"/"sisters", "smoke"/"smoked",
    "typical"/"atypical", "presented"/"prevented", "generated"/"generates". Numbers,
    number words and negations are never typos."""
    la, lb = len(a), len(b)
    if min(la, lb) < 5 or a in _NOT_TYPOS or b in _NOT_TYPOS:
        return False
    if not (a.isalpha() and b.isalpha()) or OSA.distance(a, b, score_cutoff=1) != 1:
        return False
    if la != lb:
        long, short = (a, b) if la > lb else (b, a)
        i = next((i for i, (x, y) in enumerate(zip(short, long, strict=False)) if x != y), la)
        i = min(i, len(short))  # the inserted letter is long[i]
        return i > 0 and len(long) >= 6 and long[i] == long[i - 1]
    i = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    if a[i + 1 : i + 2] == b[i : i + 1] and a[i] == b[i + 1 : i + 2]:  # swapped
        return i > 0
    return la >= 8 and 0 < i < la - 1 and (a[i], b[i]) in _ADJACENT_KEYS


def _split(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """`b` is `a` with one word written as two ("darkmode" / "dark mode")."""
    if len(b) != len(a) + 1:
        return False
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return (
        i < len(a)
        and b[i].isalpha()
        and b[i + 1].isalpha()
        and a[i] == b[i] + b[i + 1]
        and a[i + 1 :] == b[i + 2 :]
    )


def _near_equal(a: _Text, b: _Text, rules: Rules) -> bool:
    """Equal cores, or cores that differ by one typo or one split word."""
    if a.core == b.core:
        return True
    if len(a.core) == len(b.core):
        if max(len(a.norm), len(b.norm)) > rules.short_chars:
            return False
        diff = [i for i, (x, y) in enumerate(zip(a.core, b.core, strict=True)) if x != y]
        if len(diff) != 1 or not _typo(a.core[diff[0]], b.core[diff[0]]):
            return False
    elif not (_split(a.core, b.core) or _split(b.core, a.core)):
        return False
    sim = Levenshtein.normalized_similarity(" ".join(a.core), " ".join(b.core))
    return sim >= rules.levenshtein


def _within(short: _Text, long: _Text) -> bool:
    """`short`'s core is a run of `long`'s that starts a clause and ends one (or stops
    before a joining word), and the rest of `long` does not hedge it (`_HEDGES`)."""
    s, lc = short.core, long.core
    k, n = len(s), len(lc)
    if k < 3 or k >= n:
        return False
    first = s[0]
    for i in range(n - k + 1):
        if lc[i] != first or not long.brk[i] or lc[i : i + k] != s:
            continue
        j = i + k
        if j == n or long.brk[j] or lc[j] in _JOINERS:
            rest = lc[:i] + lc[j:]
            return not (_HEDGES.intersection(rest) or _CJK_HEDGES.search("".join(rest)))
    return False


def _moved(a: _Text, b: _Text, rules: Rules) -> bool:
    """One core is the other with two adjacent blocks swapped at clause boundaries."""
    x, y = a.core, b.core
    n = len(x)
    if n != len(y) or x == y or sorted(x) != sorted(y):
        return False
    p = 0
    while x[p] == y[p]:
        p += 1
    e = n
    while x[e - 1] == y[e - 1]:
        e -= 1
    mx, my = x[p:e], y[p:e]
    m = e - p
    for k in range(1, m):
        if mx[k:] + mx[:k] != my:
            continue
        if any(_negation(t) or t in _NOT_TYPOS or _has_digit(t) or _CN_NUMBER.match(t) for t in mx):
            return False
        cut_a = (p == 0 or a.brk[p]) and a.brk[p + k] and (e == n or a.brk[e])
        cut_b = (p == 0 or b.brk[p]) and b.brk[p + m - k] and (e == n or b.brk[e])
        if not (cut_a or cut_b):
            return False
        ga, gb = _grams(x), _grams(y)
        return len(ga & gb) / len(ga | gb) >= rules.jaccard
    return False


def _grams(core: tuple[str, ...]) -> set[tuple[str, ...]]:
    """A core's unigrams and bigrams."""
    return {*((t,) for t in core), *itertools.pairwise(core)}


def _negation(tok: str) -> bool:
    return tok in _NEGATIONS or tok.endswith("n't") or _CJK_NEGATION.match(tok) is not None


def _has_digit(tok: str) -> bool:
    return any(ch.isdigit() for ch in tok)


def _match(a: _Text, b: _Text, rules: Rules) -> tuple[str, Literal["old", "new"]] | None:
    if not (a.informative and b.informative):
        return None
    if a.norm == b.norm:
        return "exact", "old"
    if a.numbers != b.numbers or a.negations != b.negations or not (a.core and b.core):
        return None
    if _near_equal(a, b, rules):
        return "levenshtein", "old"
    if _within(a, b):
        return "contained", "old"
    if _within(b, a):
        return "contains", "new"
    if _moved(a, b, rules):
        return "jaccard", "old"
    return None


def duplicate(
    new: str, old: str, rules: Rules = Rules()
) -> tuple[str, Literal["old", "new"]] | None:
    """(rule, keep) when `new` duplicates `old`, else None.

    keep="old": the new text adds nothing (rules exact, levenshtein, contained, jaccard);
    keep="new": the new text holds the old and more (rule contains): store it, drop the old.
    """
    return _match(_analyse(new), _analyse(old), rules)


def same_guards(a: str, b: str) -> bool:
    """The guards alone: the same numbers in the same order and as many negations. A
    restatement found by other means (the same attribute and value) must pass them too."""
    x, y = _analyse(a), _analyse(b)
    return x.numbers == y.numbers and x.negations == y.negations


# preference among matches: keep="old" before keep="new", exact before fuzzy
_RANK = {"exact": 0, "levenshtein": 1, "contained": 2, "jaccard": 3, "contains": 4}


def find_duplicate(
    new: str, candidates: Iterable[tuple[str, str]], rules: Rules = Rules()
) -> Duplicate | None:
    """The (id, text) candidate that `new` duplicates, if any.

    Preference: exact, then levenshtein, contained and jaccard (all keep="old": nothing to
    write), then contains (keep="new"); among equals, the first in the candidates' order.
    """
    a = _analyse(new)
    if not a.informative:
        return None
    best: Duplicate | None = None
    for cid, text in candidates:
        found = _match(a, _analyse(text), rules)
        if found is None:
            continue
        if best is None or _RANK[found[0]] < _RANK[best.rule]:
            best = Duplicate(id=cid, rule=found[0], keep=found[1])
            if found[0] == "exact":
                break
    return best


def same_fact(a: str, b: str, rules: Rules = Rules()) -> bool:
    """Symmetric: a and b say the same thing by these rules (used to drop repeats when
    packing recalled memories)."""
    return duplicate(a, b, rules) is not None or duplicate(b, a, rules) is not None
