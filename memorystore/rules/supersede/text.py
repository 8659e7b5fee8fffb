"""A memory text made ready for the rules: normalised, cut into sentences and clauses, and
read for what makes a sentence state nothing (a question, a hypothetical) or be about
someone else.

Why apart from the rules: every rule is anchored at the start of a clause, so where a clause
starts decides what a rule can see ("I live in Hangzhou and work at Alibaba" is two clauses;
"Johnson and Johnson" is one).
"""

from __future__ import annotations

import re
import unicodedata

from memorystore.rules.scripts import HAN

__all__ = [
    "EN_ALSO",
    "EN_OTHER_PERSON",
    "EN_OTHER_START",
    "HAS_HAN",
    "KEEP_COMMA",
    "QUOTES",
    "SPACES",
    "ZH_ALSO",
    "ZH_OTHER_PERSON",
    "ZH_OTHER_START",
    "en_clauses",
    "is_hypothetical",
    "is_question",
    "lower",
    "prepare",
    "zh_clauses",
]

HAS_HAN = re.compile(f"[{HAN}]")
_APOS = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_CONTRACTIONS = (
    (re.compile(r"\b(i)'m\b", re.I), r"\1 am"),
    (re.compile(r"\b(i)'ve\b", re.I), r"\1 have"),
    (re.compile(r"\b(i)'ll\b", re.I), r"\1 will"),
    (re.compile(r"\b(i)'d\b", re.I), r"\1 would"),
    (re.compile(r"\b(he|she)'s\b", re.I), r"\1 is"),
    (re.compile(r"\b(we|they|you)'re\b", re.I), r"\1 are"),
    (re.compile(r"\b(we|they|you)'ve\b", re.I), r"\1 have"),
    (re.compile(r"\b(we|they|you)'ll\b", re.I), r"\1 will"),
    (re.compile(r"\b(won)'t\b", re.I), "will not"),
    (re.compile(r"\b(can)'t\b", re.I), r"\1 not"),
    (re.compile(r"\b(\w+)n't\b", re.I), r"\1 not"),
    (re.compile(r"\bim\b(?=\s+(?:a|an|now|based|moving|going|planning|\d))", re.I), "I am"),
)
SPACES = re.compile(r"[ \t\u00a0\u3000]+")
QUOTES = re.compile(r"[\"“”《》「」『』【】<>*_~]")
# the comma that continues a name ("Hangzhou, China") is kept as this placeholder
KEEP_COMMA = "\u201a"
_NAME_COMMA = re.compile(r",\s*(?=[A-Z0-9])")


def lower(text: str) -> str:
    """Lowercase, keeping offsets into the original valid (no character may grow)."""
    low = text.lower()
    if len(low) == len(text):  # nothing grew ("İ" does): the fast, usual case
        return low
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def prepare(text: str) -> str:
    """NFKC, one kind of apostrophe, no quotes, contractions spelled out, single spaces."""
    text = unicodedata.normalize("NFKC", text).translate(_APOS)
    text = QUOTES.sub(" ", text)
    if "'" in text or "im " in text.lower():
        for pattern, repl in _CONTRACTIONS:
            text = pattern.sub(repl, text)
    return SPACES.sub(" ", text).strip()


# --- clauses ----------------------------------------------------------------------------------

_EN_CONJ_SPLIT = re.compile(
    # "and" only before a new subject or verb: "Johnson and Johnson", "sushi and ramen" stay
    r"\s*,?\s+(?i:and then|and|then|so)\s+(?=(?i:i|he|she|we|they|my|his|her|the user|user|"
    r"now|then|also|currently|recently|later|work|works|live|lives|moved|relocated|joined|"
    r"started|use|uses|like|likes|love|loves|prefer|prefers|am|is|was|have|has|got|switched|"
    r"quit|left|drink|drinks|plan|plans|will|became|turned|went)\b)"
    r"|\s*,?\s+(?i:but|while|whereas|because|though|although|which|who|where)\s+"
    r"|\s*,\s*(?=[a-z])|\s*[()]\s*|\s+-\s+"
)
_EN_SUBJ_AFTER_COMMA = re.compile(r"\s*,\s*(?=(?:I|He|She|The user|User|My|Now|But)\b)")
_ZH_SPLIT = re.compile(
    r"\s*[,，、()（）:：]\s*|(?<=[" + HAN + r"了])(?:但是|不过|而且|并且|然后|所以|因为)"
)


def en_clauses(sentence: str) -> list[str]:
    # a comma before a capitalised word continues a name ("Hangzhou, China"), unless that
    # word opens a new clause ("..., I moved")
    parts = _EN_SUBJ_AFTER_COMMA.split(sentence)
    out: list[str] = []
    for part in parts:
        part = _NAME_COMMA.sub(KEEP_COMMA + " ", part)
        pos = 0
        for m in _EN_CONJ_SPLIT.finditer(part):
            out.append(part[pos : m.start()])
            pos = m.end()
        out.append(part[pos:])
    return [c.strip(" ,.;!") for c in out if c.strip(" ,.;!")]


def zh_clauses(sentence: str) -> list[str]:
    return [c.strip(" ,.;!。！") for c in _ZH_SPLIT.split(sentence) if c.strip(" ,.;!。！")]


# --- what makes a sentence state nothing, or state it of someone else --------------------------

_EN_QUESTION_START = re.compile(
    r"^(?:should|shall|would|could|can|do|does|did|is|are|am|will|have|has|was|were|may|"
    r"might|must)\s+(?:i|you|we|he|she|they|the user|user|it)\b|^(?:what|where|which|how|"
    r"why|when|who|whom|whose|whether)\b"
)
_ZH_QUESTION = re.compile(
    r"[吗么嘛][\s.。!]*$|要不要|是不是|会不会|能不能|该不该|可不可以|有没有|是否|去不去|搬不搬|"
    r"换不换|还是.{0,12}[呢吗]|[呢][\s.。]*$|如何|怎么样?|为什么|哪里|哪儿|什么时候"
)
_EN_HYPO = re.compile(
    r"\b(?:if|unless|whether|might|maybe|perhaps|probably|possibly|would|could|should|"
    r"wish|hope|hoping|hopefully|wonder|wondering|considering|consider|thinking (?:about|of)|"
    r"imagine|suppose|supposing|pretend|dream|dreaming|want to|wants to|wanna|"
    r"would like|let's|lets)\b|(?<!in )(?<!of )(?<!early )(?<!late )(?<!mid )(?<!mid-)"
    r"(?<!this )(?<!next )(?<!last )(?<!since )(?<!until )(?<!by )(?<!before )"
    r"(?<!after )\bmay\b(?! \d)"
)
_ZH_HYPO = re.compile(
    r"如果|假如|假设|要是|万一|倘若|若是|可能|也许|或许|大概|说不定|考虑|希望|梦想|打听|"
    r"要不|想象"
)
EN_ALSO = re.compile(
    r"\b(?:also|too|as well|either|part[- ]time|on weekends|during the week|weekdays|"
    r"part of the year|half the (?:year|time)|in the summers?|in the winters?|sometimes|"
    r"occasionally|side job|second job|side hustle)\b"
)
ZH_ALSO = re.compile(r"也|兼职|周末|平时|有时|偶尔|工作日|寒暑假|副业|第二份")
EN_OTHER_PERSON = re.compile(
    r"\b(?:mom|mother|mum|dad|father|parents?|sister|brother|sibling|wife|husband|spouse|"
    r"partner|fianc[eé]e?|friend|boyfriend|girlfriend|son|daughter|kids?|child|children|"
    r"colleague|coworker|co-worker|boss|manager|neighbou?r|roommate|cousin|aunt|uncle|"
    r"grandma|grandpa|grandmother|grandfather|niece|nephew|in-laws?|family)\b"
)
ZH_OTHER_PERSON = re.compile(
    r"妈|爸|母亲|父亲|父母|姐|妹|哥|弟|老婆|老公|妻子|丈夫|爱人|对象|朋友|同事|儿子|女儿|孩子|"
    r"男友|女友|领导|老板|邻居|室友|舅|姨|叔|伯|姑|爷爷|奶奶|外公|外婆|家人|亲戚"
)
EN_OTHER_START = re.compile(r"(?:[\w'-]+\s+){0,2}?" + EN_OTHER_PERSON.pattern)
ZH_OTHER_START = re.compile(
    rf"(?:和|跟|与|同|家|[{HAN}]{{0,2}}?(?:妈|爸|母亲|父亲|父母|姐|妹|哥|弟|老婆|老公|妻子|丈夫|"
    r"爱人|对象|朋友|同事|儿子|女儿|孩子|男友|女友|领导|老板|邻居|室友|舅|姨|叔|伯|姑|爷|奶|外公|外婆|"
    r"家人|亲戚|同学|闺蜜|兄弟))"
)


def is_question(sentence: str, low: str) -> bool:
    if sentence.rstrip(" .。!！").endswith(("?", "？")):
        return True
    if HAS_HAN.search(sentence):
        return bool(_ZH_QUESTION.search(low))
    return bool(_EN_QUESTION_START.search(low))


def is_hypothetical(low: str, cjk: bool) -> bool:
    if cjk:
        return bool(_ZH_HYPO.search(low)) or bool(_EN_HYPO.search(low))
    return bool(_EN_HYPO.search(low))
