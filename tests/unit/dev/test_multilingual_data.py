"""The multilingual benchmark data set is well formed and measures what it claims to.

Why: `memorystore bench multilingual` trusts this file blindly. A query whose group does not
match its answer's language, an answer that is a filler or belongs to another user, or a
"Chinese" memory written in English would silently skew hit@1, hit@5 and MRR per group.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from typing import Any

from memorystore.rules import scripts
from support.paths import REPO

DATA_PATH = REPO / "dev/memorystore_dev/bench/multilingual_data.json"

LANGS = {"zh", "en", "mixed"}
KINDS = {"preference", "fact", "plan", "filler"}
# group -> languages its answers may be written in
GROUPS: dict[str, set[str]] = {
    "zh-zh": {"zh", "mixed"},
    "en-en": {"en"},
    "en-zh": {"zh", "mixed"},
    "zh-en": {"en"},
}

MIN_USERS = 6
MIN_MEMORIES = 300
MIN_QUERIES = 200
MIN_PER_GROUP = 50
MIN_PER_LANG_PER_USER = 8
MIN_CJK_SHARE = 0.6

CJK = re.compile(f"[{scripts.HAN}]")
LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


@cache
def load() -> dict[str, Any]:
    """The data set, parsed once per session."""
    return json.loads(DATA_PATH.read_text(encoding="utf-8"))


def memories() -> list[tuple[str, dict[str, Any]]]:
    """Every memory with the id of the user it belongs to."""
    return [(user["id"], memory) for user in load()["users"] for memory in user["memories"]]


def memory_index() -> dict[str, tuple[str, dict[str, Any]]]:
    """Memory id -> (owning user id, memory)."""
    return {memory["id"]: (user_id, memory) for user_id, memory in memories()}


def cjk_count(text: str) -> int:
    return len(CJK.findall(text))


def test_top_level_schema() -> None:
    """The runner reads exactly these keys; anything else is a typo that would be ignored."""
    data = load()
    assert set(data) == {"name", "version", "description", "users", "queries"}, sorted(data)
    assert data["name"] == "memorystore-multilingual"
    assert data["version"] == 1
    assert isinstance(data["description"], str) and data["description"].strip()
    assert isinstance(data["users"], list) and data["users"]
    assert isinstance(data["queries"], list) and data["queries"]


def test_user_and_memory_schema() -> None:
    """Each user and memory has the documented keys, types and allowed lang/kind values."""
    for user in load()["users"]:
        assert set(user) == {"id", "about", "memories"}, f"user {user.get('id')}: {sorted(user)}"
        assert isinstance(user["id"], str) and user["id"], user
        assert isinstance(user["about"], str) and user["about"].strip(), f"user {user['id']}"
        assert isinstance(user["memories"], list) and user["memories"], f"user {user['id']}"
        for memory in user["memories"]:
            mid = memory.get("id")
            assert set(memory) == {"id", "lang", "kind", "text"}, f"memory {mid}: {sorted(memory)}"
            assert isinstance(mid, str) and mid, f"memory {memory}"
            assert memory["lang"] in LANGS, f"memory {mid}: lang {memory['lang']!r}"
            assert memory["kind"] in KINDS, f"memory {mid}: kind {memory['kind']!r}"
            assert isinstance(memory["text"], str), f"memory {mid}: text is not a string"
            assert memory["text"].strip(), f"memory {mid}: empty text"


def test_query_schema() -> None:
    """Each query has the documented keys, types and an allowed group."""
    for query in load()["queries"]:
        qid = query.get("id")
        assert set(query) == {"id", "user", "group", "text", "answers"}, (
            f"query {qid}: {sorted(query)}"
        )
        assert isinstance(qid, str) and qid, f"query {query}"
        assert isinstance(query["user"], str), f"query {qid}: user is not a string"
        assert query["group"] in GROUPS, f"query {qid}: group {query['group']!r}"
        assert isinstance(query["text"], str) and query["text"].strip(), f"query {qid}: text"
        assert isinstance(query["answers"], list), f"query {qid}: answers is not a list"
        assert all(isinstance(a, str) for a in query["answers"]), f"query {qid}: answer ids"


def test_minimum_sizes() -> None:
    """Too few users, memories or queries make the per-group scores noise."""
    data = load()
    assert len(data["users"]) >= MIN_USERS, f"{len(data['users'])} users"
    assert len(memories()) >= MIN_MEMORIES, f"{len(memories())} memories"
    assert len(data["queries"]) >= MIN_QUERIES, f"{len(data['queries'])} queries"
    per_group = Counter(query["group"] for query in data["queries"])
    for group in GROUPS:
        assert per_group[group] >= MIN_PER_GROUP, f"group {group}: {per_group[group]} queries"


def test_every_user_has_every_language() -> None:
    """Every group can be asked of every user only if each user has all three languages."""
    for user in load()["users"]:
        per_lang = Counter(memory["lang"] for memory in user["memories"])
        for lang in sorted(LANGS):
            assert per_lang[lang] >= MIN_PER_LANG_PER_USER, (
                f"user {user['id']}: {per_lang[lang]} {lang} memories"
            )


def test_ids_are_unique() -> None:
    """Answers refer to memories by id; a duplicate id makes a hit ambiguous."""
    data = load()
    ids = [user["id"] for user in data["users"]]
    ids += [memory["id"] for _, memory in memories()]
    ids += [query["id"] for query in data["queries"]]
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    assert not duplicates, f"duplicate ids: {duplicates}"


def test_no_duplicate_memory_text_within_a_user() -> None:
    """Two identical memories of one user would make a single-answer query ambiguous."""
    for user in load()["users"]:
        seen: dict[str, str] = {}
        for memory in user["memories"]:
            text = memory["text"].strip()
            assert text not in seen, f"memory {memory['id']} repeats {seen[text]}: {text!r}"
            seen[text] = memory["id"]


def test_answers_exist_belong_to_the_user_and_are_not_fillers() -> None:
    """The runner asks within the query's user scope; other answers could never be hit."""
    index = memory_index()
    users = {user["id"] for user in load()["users"]}
    for query in load()["queries"]:
        qid, answers = query["id"], query["answers"]
        assert query["user"] in users, f"query {qid}: unknown user {query['user']!r}"
        assert 1 <= len(answers) <= 2, f"query {qid}: {len(answers)} answers"
        assert len(set(answers)) == len(answers), f"query {qid}: repeated answer"
        for answer in answers:
            assert answer in index, f"query {qid}: unknown answer {answer!r}"
            owner, memory = index[answer]
            assert owner == query["user"], f"query {qid}: answer {answer} belongs to {owner}"
            assert memory["kind"] != "filler", f"query {qid}: answer {answer} is a filler"


def test_group_matches_answer_language() -> None:
    """A group's score is only meaningful if its answers are in the language it names."""
    index = memory_index()
    for query in load()["queries"]:
        allowed = GROUPS[query["group"]]
        for answer in query["answers"]:
            lang = index[answer][1]["lang"]
            assert lang in allowed, (
                f"query {query['id']} ({query['group']}): answer {answer} is {lang}"
            )


def test_memory_text_is_in_its_declared_language() -> None:
    """A mislabelled memory would move a query into the wrong group's score."""
    for _, memory in memories():
        mid, text, lang = memory["id"], memory["text"], memory["lang"]
        cjk = cjk_count(text)
        if lang == "zh":
            letters = sum(ch.isalpha() for ch in text)
            share = cjk / letters if letters else 0.0
            assert share >= MIN_CJK_SHARE, f"memory {mid}: CJK share {share:.2f} in {text!r}"
        elif lang == "en":
            assert cjk == 0, f"memory {mid}: English text with CJK characters: {text!r}"
        else:
            assert cjk > 0, f"memory {mid}: mixed text without CJK characters: {text!r}"
            assert LATIN_WORD.search(text), f"memory {mid}: mixed text without a Latin word"


def test_query_text_is_in_its_group_language() -> None:
    """The first half of a group names the query language."""
    for query in load()["queries"]:
        qid, text = query["id"], query["text"]
        if query["group"].startswith("zh-"):
            assert cjk_count(text) > 0, f"query {qid}: Chinese query without CJK: {text!r}"
        else:
            assert cjk_count(text) == 0, f"query {qid}: English query with CJK: {text!r}"
