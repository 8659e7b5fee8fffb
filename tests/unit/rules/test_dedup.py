"""Near-duplicate detection of memories (`memorystore/rules/dedup/`, shared by service and recall).

A false duplicate loses the new fact, so the must-not table is the contract: every pair in it
is a change of value (place, number, negation, person, preference) and must never match, in
either direction. The should table holds the repeats the rules are for; the measurement test
pins the counts over both (`pytest -s` prints precision and recall). Each named rule is run on
its own examples, and the should table exercises every rule.
"""

from __future__ import annotations

import itertools
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.rules.dedup import (
    RULES,
    SHIPPED,
    Duplicate,
    Rules,
    duplicate,
    find_duplicate,
    normalise,
    same_fact,
)
from memorystore.rules.dedup.text import analyse

# (new, old): a change of value or meaning, never a duplicate
MUST_NOT = [
    ("I live in Hangzhou", "I live in Shanghai"),
    ("我住在杭州", "我住在上海"),
    ("I am 31 years old", "I am 32 years old"),
    ("I like tea", "I don't like tea"),
    ("我喜欢喝茶", "我不喜欢喝茶"),
    ("I like tea", "I like team sports"),  # containment respects word boundaries
    ("I prefer dark mode", "I prefer light mode"),
    ("My sister lives in Paris", "My brother lives in Paris"),
    ("I have two kids", "I have three kids"),  # number words
    ("我有两个孩子", "我有三个孩子"),  # Chinese numerals
    ("我的生日是三月五日", "我的生日是三月六日"),
    ("I like cats", "I like bats"),  # one character, another word
    ("I have a cat", "I have a car"),
    ("Meeting on Monday", "Meeting on Sunday"),
    ("我喜欢深色模式", "我喜欢浅色模式"),  # one CJK character, the opposite value
    ("他是我的老师", "她是我的老师"),
    ("我喜欢猫", "我喜欢猫头鹰"),  # CJK containment that changes the noun
    ("我喜欢吃鱼", "我喜欢吃鱿鱼"),
    ("I like tea", "I like tea ceremonies"),  # containment that stops mid-clause
    ("I use Python 3.11", "I use Python 3.12"),
    ("GPT-4 is my favourite model", "GPT-5 is my favourite model"),
    ("Temperature is -5 degrees", "Temperature is 5 degrees"),  # the sign
    ("My budget is 1000 dollars", "My budget is 100 dollars"),
    ("I was born in 1990", "I was born in 1991"),
    ("Bob reports to Alice", "Alice reports to Bob"),  # same words, roles swapped
    ("I prefer tea over coffee", "I prefer coffee over tea"),
    ("I have a sister", "I have sisters"),  # a plural is not a typo
    ("I smoked cigars", "I smoke cigars"),  # nor a past tense
    ("I am typical", "I am atypical"),  # nor a negating prefix
    ("I never drink coffee", "I drink coffee"),
    ("I can swim", "I can't swim"),
    ("我会游泳", "我不会游泳"),
    ("我没有车", "我有车"),
    ("用户不吃辣", "用户吃辣"),
    ("I use vim, not emacs", "I use vim"),  # the added clause holds a negation
    ("I like coffee with sugar", "I like coffee without sugar"),
    ("lives in Paris", "My sister lives in Paris"),  # a run that does not start the clause
    ("喜欢喝茶", "我妈妈喜欢喝茶"),
    ("Alice is my manager", "Alice was my manager"),
    ("The meeting is at 3pm", "The meeting is at 4pm"),
    ("Battery at 50%", "Battery at 50"),  # "%" carries meaning
    ("My score is > 90", "My score is < 90"),
    ("I ❤️ tea", "I 💔 tea"),  # emoji carry meaning
    ("I visited Iran", "I visited Iraq"),
    ("I use matplotlib 画图", "I use seaborn 画图"),  # mixed script
    ("我用Python 3写代码", "我用Python 2写代码"),
    ("周五之前要把Q3的OKR发给Tom", "周五之前要把Q4的OKR发给Tom"),
    ("I moved to Berlin in 2020", "I moved to Berlin"),  # the guards veto containment too
    ("Charts in dark mode by default", "Charts in light mode by default"),
    ("Tea: yes, coffee: no", "Tea: no, coffee: yes"),
    ("I work in data protection", "I work in data projection"),  # not a typo: o/j are far
    ("My talk was presented", "My talk was prevented"),
    ("I generated the reports", "I generates the reports"),  # the last letter is never a typo
    ("I like this hiking trail", "I like this hiking trails"),
    ("I am an alter ego fan", "I am a later ego fan"),
    ("No, I live in Hangzhou", "Yes, I live in Hangzhou"),  # "no" is never a discourse filler
    ("I stay home", "If it rains, I stay home"),  # a clause under a condition is not the fact
    ("I drink coffee", "I drink coffee when I am tired"),
    ("I like tea", "She said: I like tea"),
    ("我住在杭州", "如果有机会，我住在杭州"),
    ("I stay home, if it rains", "If I stay home, it rains"),
]

# (new, old, rule, keep): the same fact again
SHOULD = [
    ("I live in Hangzhou.", "i live in hangzhou", "exact", "old"),
    ("The user lives in Hangzhou", "The user lives in Hangzhou.", "exact", "old"),
    ("用户住在杭州。", "用户住在杭州", "exact", "old"),
    ("I live in Hangzhou, near West Lake", "I live in Hangzhou", "contains", "new"),
    ("I live in Hangzhou", "I live in Hangzhou, near West Lake", "contained", "old"),
    ("I love sushi", "I love suhsi", "levenshtein", "old"),
    ("Prefers dark mode for charts", "Prefers dark-mode for charts", "exact", "old"),
    ("我的图表默认用深色模式", "我的图表默认使用深色模式", "levenshtein", "old"),
    ("Charts in dark mode by default", "By default, charts in dark mode", "jaccard", "old"),
    ("Ｉ　ＬＩＫＥ　ＴＥＡ！", "I like tea", "exact", "old"),  # full-width
    ("I use matplotlib 画图", "I use matplotlib画图", "exact", "old"),
    ("我用 Python 写代码", "我用Python写代码", "exact", "old"),
    ("我今年31岁", "我今年31岁。", "exact", "old"),
    ("The user prefers dark mode", "User prefers dark mode", "levenshtein", "old"),
    ("I really like green tea", "I like green tea", "levenshtein", "old"),
    ("我很喜欢猫", "我喜欢猫", "levenshtein", "old"),
    ("用户住在杭州", "住在杭州", "levenshtein", "old"),
    ("我现在住在杭州", "我住在杭州", "levenshtein", "old"),
    ("I prefer darkmode", "I prefer dark mode", "levenshtein", "old"),
    ("I live in Hnagzhou", "I live in Hangzhou", "levenshtein", "old"),
    ("I love sushii", "I love sushi", "levenshtein", "old"),
    ("I definitrly prefer tea", "I definitely prefer tea", "levenshtein", "old"),
    ("My adress is on file", "My address is on file", "levenshtein", "old"),
    (
        "As I said, I live in Hangzhou and I love hiking.",
        "I live in Hangzhou and I love hiking.",
        "levenshtein",
        "old",
    ),  # a clause that only says "as I said"
    ("I told you, I live in Hangzhou", "I live in Hangzhou", "levenshtein", "old"),
    ("我说过，我住在杭州", "我住在杭州", "levenshtein", "old"),
    ("I do not like tea", "I don't like tea", "levenshtein", "old"),
    ("I dont like tea", "I don't like tea", "levenshtein", "old"),
    ("I cannot swim", "I can't swim", "levenshtein", "old"),
    ("I'm vegetarian", "I am vegetarian", "levenshtein", "old"),
    ("我住在杭州，靠近西湖", "我住在杭州", "contains", "new"),
    ("我住在杭州和上海", "我住在杭州", "contains", "new"),
    ("I like tea and coffee", "I like tea", "contains", "new"),
    ("I live in Hangzhou with my wife", "I live in Hangzhou", "contains", "new"),
    ("I prefer dark mode in the evening", "I prefer dark mode", "contains", "new"),
    ("I have 2 kids: Tom and Amy", "I have 2 kids", "contains", "new"),
    ("用matplotlib画图", "用matplotlib画图，配色用深色", "contained", "old"),
    ("At work, I use Python", "I use Python at work", "jaccard", "old"),
    ("On weekends, I go hiking", "I go hiking on weekends", "jaccard", "old"),
    ("Favourite colour: blue", "favourite colour - blue", "exact", "old"),
    ("User is vegetarian", "The user is vegetarian", "levenshtein", "old"),
    ("I don't eat pork", "I don't eat pork.", "exact", "old"),
    ("我不吃辣", "我也不吃辣", "levenshtein", "old"),
    ("周末去爬山了🏔️", "周末去爬山了🏔", "exact", "old"),
]
# repeats the rules knowingly miss: a false duplicate costs more than a stored repeat
KNOWN_MISSES = [
    ("I live in Hangzou", "I live in Hangzhou"),  # a dropped letter: too often another word
    ("My daughter is 5", "My daughter is five"),  # numbers are compared as written
    ("I moved to Berlin in 2020", "In 2020, I moved to Berlin"),  # a moved block with a number
    ("我周末去爬山", "周末我去爬山"),  # a move without a clause boundary
]

MIRROR = {"contains": ("contained", "old"), "contained": ("contains", "new")}


@pytest.mark.parametrize(("new", "old"), MUST_NOT)
def test_a_change_of_value_is_never_a_duplicate(new: str, old: str):
    assert duplicate(new, old) is None, (new, old, duplicate(new, old))
    assert duplicate(old, new) is None, (old, new, duplicate(old, new))
    assert not same_fact(new, old)


@pytest.mark.parametrize(("new", "old", "rule", "keep"), SHOULD)
def test_a_repeat_is_a_duplicate(new: str, old: str, rule: str, keep: str):
    assert duplicate(new, old) == (rule, keep)
    assert duplicate(old, new) == MIRROR.get(rule, (rule, "old"))
    assert same_fact(new, old) and same_fact(old, new)


@pytest.mark.parametrize(("new", "old"), KNOWN_MISSES)
def test_known_misses_stay_safe_misses(new: str, old: str):
    """Documents what the rules give up; a rule change that catches one is welcome (move
    the pair to SHOULD), one that starts matching a MUST_NOT pair is not."""
    assert duplicate(new, old) is None


# one slot, many values: every pair of different values is a change of value
VALUES = {
    "city": "Hangzhou Shanghai Beijing Paris London Berlin Boston Austin Tokyo Kyoto Seoul Rome",
    "food": "tea coffee sushi pizza pasta rice noodles tacos salad soup bread apples mangoes",
    "colour": "red blue green black white yellow purple orange pink brown grey gray",
    "kin": "sister brother mother father wife husband son daughter aunt uncle cousin friend",
    "name": "Tom Tim Jon John Ann Anna Anne Mark Mary Maria Marie Alice Alicia Dan Daniel Erica",
    "城市": "杭州 上海 北京 广州 深圳 成都 南京 苏州 杭州湾 杭州市",
    "食物": "茶 咖啡 米饭 面条 饺子 寿司 鱼 鱿鱼 鲸鱼 猫 猫咪 茶叶蛋 绿茶 红茶",
    "颜色": "红色 蓝色 绿色 黑色 白色 深色 浅色",
    "亲属": "姐姐 妹妹 哥哥 弟弟 妈妈 爸爸 儿子 女儿 朋友 他 她",
}
TEMPLATES = [
    "I live in {city}",
    "The user lives in {city}, near the river",
    "I like {food}",
    "User prefers {food} for breakfast",
    "My favourite colour is {colour}",
    "I prefer {colour} charts by default",
    "My {kin} lives in Paris",
    "My manager is {name}",
    "{name} is my best friend",
    "我住在{城市}",
    "用户住在{城市}，骑车上班",
    "我喜欢吃{食物}",
    "我喜欢{颜色}的图表",
    "图表默认用{颜色}模式",
    "我{亲属}住在北京",
    "{亲属}是我的老师",
]


def test_a_value_changed_in_a_template_is_never_a_duplicate():
    checked, false_dups = 0, []
    for template in TEMPLATES:
        slot = template[template.index("{") + 1 : template.index("}")]
        for a, b in itertools.permutations(VALUES[slot].split(), 2):
            new, old = template.format(**{slot: a}), template.format(**{slot: b})
            if normalise(new) != normalise(old):
                checked += 1
                if duplicate(new, old) is not None:
                    false_dups.append((new, old))
    print(f"\ndedup: {checked} templated changes of value, {len(false_dups)} false duplicates")
    assert checked > 2000
    assert false_dups == []


def test_precision_and_recall_over_the_labelled_tables():
    false_dups = [
        (a, b)
        for new, old in MUST_NOT
        for a, b in ((new, old), (old, new))
        if duplicate(a, b) is not None
    ]
    found = [(new, old) for new, old, *_ in SHOULD if duplicate(new, old) is not None]
    positives = len(found) + len(false_dups)
    precision = len(found) / positives if positives else 1.0
    recall = len(found) / len(SHOULD)
    print(
        f"\ndedup: {len(MUST_NOT)} must-not pairs (both directions), {len(SHOULD)} should "
        f"pairs: false duplicates {len(false_dups)}, precision {precision:.3f}, "
        f"recall {recall:.3f}"
    )
    assert false_dups == []
    assert precision == 1.0
    assert recall >= 0.9
    assert len(MUST_NOT) >= 25 and len(SHOULD) >= 20
    # pinned (a change of what the rules match changes one; re-pin it deliberately):
    # SHOULD tp 44 / fn 0 (per rule below), MUST_NOT fp 0 of 122 checks, KNOWN_MISSES 0 of 4
    missed = [(new, old) for new, old in KNOWN_MISSES if duplicate(new, old) is not None]
    by_rule = {r.name: sum(1 for *_, rule, _ in SHOULD if rule == r.name) for r in RULES}
    assert (len(SHOULD), len(found), 2 * len(MUST_NOT), len(false_dups)) == (44, 44, 122, 0)
    assert (len(KNOWN_MISSES), len(missed)) == (4, 0)
    assert by_rule == {"exact": 11, "levenshtein": 21, "contained": 2, "contains": 7, "jaccard": 3}
    assert all(duplicate(new, old) == (rule, keep) for new, old, rule, keep in SHOULD)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I live in Hangzhou.", "i live in hangzhou"),
        ("  Ｉ　ＬＩＶＥ   in\tHangzhou!! ", "i live in hangzhou"),
        ("用户住在杭州。", "用户住在杭州"),
        ("I use matplotlib画图", "i use matplotlib 画图"),
        ("dark-mode", "dark mode"),
        ("It’s 1,000 yuan", "it's 1000 yuan"),
        ("我有3，420元", "我有 3 420 元"),  # a full-width comma separates, it does not group
        ("Temperature: -5", "temperature -5"),
        ("50% off", "50 % off"),
        ("Straße", "strasse"),
    ],
)
def test_normalise(text: str, expected: str):
    assert normalise(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "...", "！？。，", "-- '' \"\"", "%", "+"])
def test_empty_or_punctuation_only_text_is_never_a_duplicate(text: str):
    assert duplicate(text, text) is None
    assert duplicate(text, "I like tea") is None
    assert duplicate("I like tea", text) is None
    assert not same_fact(text, text)
    assert find_duplicate(text, [("a", text), ("b", "I like tea")]) is None


def test_find_duplicate_prefers_keeping_the_old_and_exact_over_fuzzy():
    new = "I live in Hangzhou"
    candidates = [
        ("shanghai", "I live in Shanghai"),
        ("longer", "I live in Hangzhou, near West Lake"),  # contained: keep old
        ("typo", "I live in Hnagzhou"),  # levenshtein: keep old
        ("same", "i live in hangzhou."),  # exact
    ]
    assert find_duplicate(new, candidates) == Duplicate("same", "exact", "old")
    assert find_duplicate(new, candidates[:3]) == Duplicate("typo", "levenshtein", "old")
    assert find_duplicate(new, candidates[:2]) == Duplicate("longer", "contained", "old")
    assert find_duplicate(new, candidates[:1]) is None
    assert find_duplicate(new, []) is None


def test_find_duplicate_merges_an_old_memory_into_a_fuller_new_one():
    new = "I live in Hangzhou, near West Lake"
    candidates = iter([("x", "I like tea"), ("old", "I live in Hangzhou"), ("y", "我住在杭州")])
    assert find_duplicate(new, candidates) == Duplicate("old", "contains", "new")


def test_find_duplicate_prefers_the_first_of_equal_matches():
    found = find_duplicate("I like tea", [("1", "I like tea."), ("2", "i like tea")])
    assert found == Duplicate("1", "exact", "old")


def test_thresholds_are_the_rules():
    typo = ("I love suhsi", "I love sushi")
    moved = ("Charts in dark mode by default", "By default, charts in dark mode")
    assert duplicate(*typo) == ("levenshtein", "old")
    assert duplicate(*typo, Rules(levenshtein=0.9)) is None
    assert duplicate(*typo, Rules(short_chars=10)) is None  # typos only in short texts
    assert duplicate(*moved, Rules(jaccard=0.9)) is None
    # equal cores (only fillers differ) are no typo: the length limit does not apply
    assert duplicate("The user prefers dark mode", "User prefers dark mode", Rules(short_chars=5))
    assert duplicate("suhsi", "sushi") is None  # one word alone is too little to tell


# ---------------------------------------------------------------- named rules


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_each_named_rule_holds_for_its_positives_and_not_its_negatives(rule):
    """The rule alone on its examples; a positive is also what the cascade reports."""
    assert rule.positives and rule.negatives, rule.name
    for new, old in rule.positives:
        assert rule.holds(analyse(new), analyse(old), SHIPPED), (new, old)
        assert duplicate(new, old) == (rule.name, rule.keep), (new, old)
    for new, old in rule.negatives:
        assert not rule.holds(analyse(new), analyse(old), SHIPPED), (new, old)


def test_the_rule_names_are_the_reported_ones_and_the_should_table_exercises_each():
    assert [r.name for r in RULES] == ["exact", "levenshtein", "contained", "contains", "jaccard"]
    assert {rule for *_, rule, _ in SHOULD} == {r.name for r in RULES}
    assert sorted(RULES, key=lambda r: r.prefer)[-1].keep == "new"  # merging is the last resort


# ---------------------------------------------------------------- properties

WORDS = [
    "i", "the", "user", "like", "likes", "tea", "team", "live", "lives", "in", "hangzhou",
    "paris", "dark", "mode", "light", "prefer", "charts", "by", "default", "and", "with",
    "my", "sister", "brother", "sushi", "suhsi", "very", "not", "never", "don't", "two",
    "3", "42", "杭州", "上海", "我", "住在", "喜欢", "不", "喝茶", "用", "使用", "画图",
]  # fmt: skip
SEPARATORS = [" ", " ", " ", ", ", ". ", "，", "。", "-", ""]


@st.composite
def sentences(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(words), max_size=len(words)))
    return "".join(w + s for w, s in zip(words, seps, strict=True)).strip()


def informative(text: str) -> bool:
    return any(ch.isalnum() or unicodedata.category(ch) == "So" for ch in normalise(text))


@given(st.text())
def test_normalise_is_idempotent(text: str):
    once = normalise(text)
    assert normalise(once) == once


@given(st.text())
def test_a_text_is_a_duplicate_of_itself_unless_empty(text: str):
    expected = ("exact", "old") if informative(text) else None
    assert duplicate(text, text) == expected
    assert same_fact(text, text) == (expected is not None)


@given(st.text(), st.text())
def test_arbitrary_unicode_never_raises(a: str, b: str):
    found = duplicate(a, b)
    assert found is None or (found[0] in MIRROR or found[0] in {"exact", "levenshtein", "jaccard"})
    assert isinstance(same_fact(a, b), bool)
    assert isinstance(normalise(a), str)
    assert find_duplicate(a, [("b", b)]) in (None, Duplicate("b", *found) if found else None)


@settings(max_examples=300)
@given(sentences(), sentences())
def test_duplicate_is_symmetric_up_to_which_text_to_keep(a: str, b: str):
    ab, ba = duplicate(a, b), duplicate(b, a)
    assert (ab is None) == (ba is None)
    if ab is not None:
        assert ba == MIRROR.get(ab[0], (ab[0], "old"))
    assert same_fact(a, b) == same_fact(b, a) == (ab is not None)


@given(sentences(), st.integers(0, 10**6), st.integers(0, 10**6), st.booleans())
def test_different_numbers_are_never_duplicates(text: str, n1: int, n2: int, front: bool):
    if n1 == n2:
        n2 += 1
    a, b = (f"{n1} {text}", f"{n2} {text}") if front else (f"{text} {n1}", f"{text} {n2}")
    assert duplicate(a, b) is None
    assert duplicate(b, a) is None


@settings(max_examples=300)
@given(sentences(), sentences())
def test_texts_with_different_digits_are_never_duplicates(a: str, b: str):
    if re.findall(r"\d+", a) != re.findall(r"\d+", b):
        assert duplicate(a, b) is None
        assert not same_fact(a, b)


@given(sentences(), st.data())
def test_inserting_a_negation_is_never_a_duplicate(text: str, data: st.DataObject):
    at = data.draw(st.integers(0, len(text)))
    word = data.draw(st.sampled_from([" not ", " never ", " don't ", "不", "没", " no "]))
    negated = text[:at] + word + text[at:]
    assert duplicate(negated, text) is None
    assert duplicate(text, negated) is None


@given(sentences(), st.lists(st.tuples(st.text(max_size=4), sentences()), max_size=12))
def test_find_duplicate_returns_a_candidate_that_duplicate_agrees_with(
    new: str, candidates: list[tuple[str, str]]
):
    found = find_duplicate(new, candidates)
    matches = {cid for cid, text in candidates if duplicate(new, text) is not None}
    if found is None:
        assert not matches
    else:
        assert found.id in matches
        agreeing = {duplicate(new, text) for cid, text in candidates if cid == found.id}
        assert (found.rule, found.keep) in agreeing
