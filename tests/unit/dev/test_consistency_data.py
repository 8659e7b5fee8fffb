"""The consistency ("memory that stays true") benchmark data set is well formed and fair.

Why: the benchmark replays these scripted conversations into the memory service and, after each
session, checks whether recall ranks a memory with a CURRENT marker of a fact above any memory
with a STALE (superseded) marker. It trusts the file blindly: a question whose `current` is not
the latest value of its key, a `stale` list that misses an earlier value, a marker that also
shows up in unrelated chatter, or a query that contains its own answer would silently turn the
measurement into noise.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from functools import cache
from itertools import pairwise
from typing import Any

from memorystore.rules import scripts
from support.paths import REPO

DATA_PATH = REPO / "dev/memorystore_dev/bench/consistency_data.json"

LANGUAGES = {"en", "zh"}
USERS_PER_LANGUAGE = 6
SESSIONS = range(3, 5)
TURNS = range(5, 9)
QUESTIONS = range(2, 5)
MIN_TURNS = 240
MIN_QUESTIONS = 100
MIN_USERS_PER_BEHAVIOUR = 8
MIN_USERS_PER_CHANGE_KIND = 4
MIN_TWICE_CHANGED_SLOTS = 3
FACTLESS_SHARE = (0.30, 0.55)

RESIDENCE_KEYS = {"residence"}
JOB_KEYS = {"employer", "job_title"}
PREFERENCE_KEYS = {
    "favourite_editor",
    "favourite_language",
    "chart_theme",
    "drink",
    "diet",
    "phone_brand",
    "note_app",
    "spreadsheet_app",
}
CANCELLED = "cancelled"

TOP_KEYS = {"version", "about", "users"}
USER_KEYS = {"id", "language", "sessions"}
SESSION_KEYS = {"turns", "questions"}
TURN_KEYS = {"user", "assistant", "facts"}
FACT_KEYS = {"key", "value", "text"}
QUESTION_KEYS = {"query", "key", "current", "stale"}

USER_ID = re.compile(r"^(en|zh)-\d{2}$")
SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
HAN = re.compile(f"[{scripts.HAN}]")


@cache
def load() -> dict[str, Any]:
    """The data set, parsed once per session."""
    return json.loads(DATA_PATH.read_text(encoding="utf-8"))


def users() -> list[dict[str, Any]]:
    return load()["users"]


def turns_of(user: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for session in user["sessions"]:
        yield from session["turns"]


def questions_in_order(
    user: dict[str, Any],
) -> Iterator[tuple[int, dict[str, Any], list[tuple[str, str, str, str]]]]:
    """(session index, question, every fact stated up to that session).

    Facts are (key, value, fact text, fact text + the user and assistant text of its turn).
    """
    facts: list[tuple[str, str, str, str]] = []
    for index, session in enumerate(user["sessions"]):
        for turn in session["turns"]:
            dialogue = turn["user"] + "\n" + turn["assistant"]
            facts.extend(
                (f["key"], f["value"], f["text"], f["text"] + "\n" + dialogue)
                for f in turn["facts"]
            )
        for question in session["questions"]:
            yield index, question, list(facts)


def history(user: dict[str, Any]) -> dict[str, list[str]]:
    """Key -> the values of its facts in conversation order (repeats included)."""
    out: dict[str, list[str]] = {}
    for turn in turns_of(user):
        for fact in turn["facts"]:
            out.setdefault(fact["key"], []).append(fact["value"])
    return out


def changes(values: list[str]) -> list[tuple[str, str]]:
    """(old, new) for every fact whose value differs from the previous one of its key."""
    return [(old, new) for old, new in pairwise(values) if old != new]


def markers_by_key(user: dict[str, Any]) -> dict[str, set[str]]:
    """Key -> every current or stale marker any question of this user uses for it."""
    out: dict[str, set[str]] = {}
    for session in user["sessions"]:
        for question in session["questions"]:
            out.setdefault(question["key"], set()).update(question["current"], question["stale"])
    return out


def contains(text: str, marker: str) -> bool:
    return marker.casefold() in text.casefold()


def nonempty(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and value == value.strip()


def change_kind(key: str) -> str:
    if key in RESIDENCE_KEYS:
        return "residence"
    if key in JOB_KEYS:
        return "job"
    if key in PREFERENCE_KEYS:
        return "preference"
    if key.endswith("_plan"):
        return "plan"
    return "other"


def test_top_level_schema() -> None:
    """The runner reads exactly these keys; anything else is a typo that would be ignored."""
    data = load()
    assert set(data) == TOP_KEYS, sorted(data)
    assert data["version"] == 1
    assert nonempty(data["about"]) and "MemoryStore" in data["about"]
    assert isinstance(data["users"], list) and data["users"]


def test_nested_schema() -> None:
    """Users, sessions, turns, facts and questions have exactly the documented keys and types."""
    for user in users():
        uid = user.get("id")
        assert isinstance(user, dict) and set(user) == USER_KEYS, f"user {uid}: {sorted(user)}"
        assert nonempty(uid) and nonempty(user["language"]), uid
        assert isinstance(user["sessions"], list) and user["sessions"], uid
        for s, session in enumerate(user["sessions"]):
            where = f"{uid} session {s + 1}"
            assert isinstance(session, dict) and set(session) == SESSION_KEYS, where
            assert isinstance(session["turns"], list) and session["turns"], where
            assert isinstance(session["questions"], list) and session["questions"], where
            for t, turn in enumerate(session["turns"]):
                at = f"{where} turn {t + 1}"
                assert isinstance(turn, dict) and set(turn) == TURN_KEYS, f"{at}: {sorted(turn)}"
                assert nonempty(turn["user"]) and nonempty(turn["assistant"]), at
                assert isinstance(turn["facts"], list), at
                for fact in turn["facts"]:
                    assert isinstance(fact, dict) and set(fact) == FACT_KEYS, f"{at}: {fact}"
                    assert all(nonempty(fact[k]) for k in FACT_KEYS), f"{at}: {fact}"
                    assert SNAKE.match(fact["key"]), f"{at}: key {fact['key']!r}"
                    assert fact["value"] == fact["value"].lower(), f"{at}: {fact['value']!r}"
                keys = [fact["key"] for fact in turn["facts"]]
                assert len(keys) == len(set(keys)), f"{at}: one fact per key, got {keys}"
            for q, question in enumerate(session["questions"]):
                at = f"{where} question {q + 1}"
                assert isinstance(question, dict), at
                assert set(question) == QUESTION_KEYS, f"{at}: {sorted(question)}"
                assert nonempty(question["query"]) and nonempty(question["key"]), at
                assert SNAKE.match(question["key"]), at
                assert isinstance(question["current"], list) and question["current"], at
                assert isinstance(question["stale"], list), at
                markers = question["current"] + question["stale"]
                assert all(nonempty(m) for m in markers), f"{at}: {markers}"
                folded = [m.casefold() for m in markers]
                assert len(folded) == len(set(folded)), f"{at}: duplicate marker {markers}"


def test_ids_and_languages() -> None:
    """Twelve users, six per language, with unique ids whose prefix is their language."""
    ids = [user["id"] for user in users()]
    assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
    for user in users():
        assert USER_ID.match(user["id"]), user["id"]
        assert user["language"] in LANGUAGES, user["id"]
        assert user["id"].split("-")[0] == user["language"], user["id"]
    per_language = Counter(user["language"] for user in users())
    assert per_language == {lang: USERS_PER_LANGUAGE for lang in LANGUAGES}, per_language


def test_text_matches_language() -> None:
    """Chinese users write Chinese and get 用户… facts; English users stay in English.

    A Chinese assistant may answer with a bare code block, so only most of its replies have to
    contain Han characters.
    """
    for user in users():
        zh = user["language"] == "zh"
        replies = list(turns_of(user))
        for turn in replies:
            assert bool(HAN.search(turn["user"])) == zh, f"{user['id']}: {turn['user']!r}"
            if not zh:
                assert not HAN.search(turn["assistant"]), f"{user['id']}: {turn['assistant']!r}"
            for fact in turn["facts"]:
                prefix = "用户" if zh else "The user"
                assert fact["text"].startswith(prefix), f"{user['id']}: {fact['text']!r}"
                assert bool(HAN.search(fact["text"])) == zh, f"{user['id']}: {fact['text']!r}"
        if zh:
            han_replies = sum(bool(HAN.search(turn["assistant"])) for turn in replies)
            assert han_replies >= 0.9 * len(replies), f"{user['id']}: {han_replies} Chinese"
        for _, question, _ in questions_in_order(user):
            assert bool(HAN.search(question["query"])) == zh, f"{user['id']}: {question}"


def test_counts_within_ranges() -> None:
    """3-4 sessions a user, 5-8 turns and 2-4 questions a session, and enough data overall."""
    total_turns = total_questions = 0
    for user in users():
        assert len(user["sessions"]) in SESSIONS, user["id"]
        for s, session in enumerate(user["sessions"]):
            assert len(session["turns"]) in TURNS, f"{user['id']} session {s + 1}"
            assert len(session["questions"]) in QUESTIONS, f"{user['id']} session {s + 1}"
            total_turns += len(session["turns"])
            total_questions += len(session["questions"])
    assert total_turns >= MIN_TURNS, total_turns
    assert total_questions >= MIN_QUESTIONS, total_questions


def test_supersession_bookkeeping() -> None:
    """`current` names the latest value of the key, `stale` exactly its earlier values.

    The canonical fact text of the latest value carries a current marker and no stale one; each
    earlier value's fact text carries a stale marker and no current one; every stale marker is
    a spelling used in a turn that stated an earlier value.
    """
    for user in users():
        for index, question, facts in questions_in_order(user):
            at = f"{user['id']} session {index + 1}: {question['query']!r}"
            key_facts = [fact[1:] for fact in facts if fact[0] == question["key"]]
            assert key_facts, f"{at}: key {question['key']!r} was never stated before"
            current, latest_text, _ = key_facts[-1]
            earlier = {value for value, _, _ in key_facts if value != current}
            assert bool(question["stale"]) == bool(earlier), f"{at}: earlier values {earlier}"
            assert any(contains(latest_text, m) for m in question["current"]), (
                f"{at}: no current marker {question['current']} in {latest_text!r}"
            )
            for value, text, _ in key_facts:
                if value == current:
                    for marker in question["stale"]:
                        assert not contains(text, marker), f"{at}: stale {marker!r} in {text!r}"
                    continue
                assert any(contains(text, m) for m in question["stale"]), (
                    f"{at}: earlier value {value!r} has no stale marker in {text!r}"
                )
                for marker in question["current"]:
                    assert not contains(text, marker), f"{at}: current {marker!r} in {text!r}"
            for marker in question["stale"]:
                assert any(
                    contains(turn_text, marker)
                    for value, _, turn_text in key_facts
                    if value in earlier
                ), f"{at}: stale marker {marker!r} is not a spelling of an earlier value"
            for marker in question["current"]:
                assert any(
                    contains(turn_text, marker)
                    for value, _, turn_text in key_facts
                    if value == current
                ), f"{at}: current marker {marker!r} is not a spelling of the current value"


def test_marker_hygiene() -> None:
    """A marker of key K only occurs in turns that carry a fact of K, never in other facts."""
    for user in users():
        by_key = markers_by_key(user)
        owners: dict[str, set[str]] = {}
        for key, markers in by_key.items():
            for marker in markers:
                owners.setdefault(marker.casefold(), set()).add(key)
        shared = {m: keys for m, keys in owners.items() if len(keys) > 1}
        assert not shared, f"{user['id']}: markers used by several keys {shared}"
        for turn in turns_of(user):
            keys = {fact["key"] for fact in turn["facts"]}
            dialogue = turn["user"] + "\n" + turn["assistant"]
            for key, markers in by_key.items():
                other_facts = [f["text"] for f in turn["facts"] if f["key"] != key]
                for marker in markers:
                    if key not in keys:
                        assert not contains(dialogue, marker), (
                            f"{user['id']}: {key} marker {marker!r} in a turn without {key}: "
                            f"{turn['user']!r}"
                        )
                    for text in other_facts:
                        assert not contains(text, marker), (
                            f"{user['id']}: {key} marker {marker!r} in fact {text!r}"
                        )


def test_queries_do_not_give_the_answer_away() -> None:
    """A query mentions none of its own markers, current or stale."""
    checked = 0
    for user in users():
        for _, question, _ in questions_in_order(user):
            for marker in question["current"] + question["stale"]:
                assert not contains(question["query"], marker), (
                    f"{user['id']}: {question['query']!r} contains {marker!r}"
                )
            checked += 1
    assert checked >= MIN_QUESTIONS


def test_assistant_only_echoes_stated_values() -> None:
    """A marker in an assistant reply was first said by the user (same value, any spelling)."""
    for user in users():
        groups: dict[str, set[str]] = {}
        for _, question, _ in questions_in_order(user):
            group = {m.casefold() for m in question["current"]}
            for marker in group:
                groups.setdefault(marker, set()).update(group)
        for markers in markers_by_key(user).values():
            for marker in markers:
                groups.setdefault(marker.casefold(), {marker.casefold()})
        said = ""
        for turn in turns_of(user):
            said += "\n" + turn["user"]
            for marker, group in groups.items():
                if contains(turn["assistant"], marker):
                    assert any(contains(said, m) for m in group), (
                        f"{user['id']}: assistant introduced {marker!r}: {turn['assistant']!r}"
                    )


def test_texts_identify_their_facts() -> None:
    """The bench's stand-in model finds a turn's facts by its user text and a memory's labels
    by its fact text, across all users: both lookups must be unambiguous."""
    everything = [turn for user in users() for turn in turns_of(user)]
    for i, turn in enumerate(everything):
        if not turn["facts"]:
            continue
        for j, other in enumerate(everything):
            if i != j:
                assert turn["user"] not in other["user"] + "\n" + other["assistant"], (
                    f"{turn['user']!r} also occurs in another turn"
                )
    labels: dict[str, set[tuple[str, str]]] = {}
    for turn in everything:
        for fact in turn["facts"]:
            labels.setdefault(fact["text"], set()).add((fact["key"], fact["value"]))
    ambiguous = {text: facts for text, facts in labels.items() if len(facts) > 1}
    assert labels and not ambiguous, ambiguous


def test_later_sessions_probe_changed_slots() -> None:
    """From session 2 on, at least half the questions are about a slot that has changed."""
    for user in users():
        for s, session in enumerate(user["sessions"]):
            changed = sum(bool(q["stale"]) for q in session["questions"])
            if s == 0:
                assert changed == 0, f"{user['id']}: session 1 cannot have stale values yet"
            else:
                assert 2 * changed >= len(session["questions"]), f"{user['id']} session {s + 1}"


def test_every_change_is_probed_while_current() -> None:
    """Each new value is asked about (with the old one as stale) before it changes again."""
    for user in users():
        pending: dict[str, str] = {}
        last: dict[str, str] = {}
        for session in user["sessions"]:
            for turn in session["turns"]:
                for fact in turn["facts"]:
                    key, value = fact["key"], fact["value"]
                    if key in last and last[key] != value:
                        assert key not in pending, (
                            f"{user['id']}: {key}={pending[key]!r} changed again unprobed"
                        )
                        pending[key] = value
                    last[key] = value
            for question in session["questions"]:
                if question["stale"]:
                    pending.pop(question["key"], None)
        assert not pending, f"{user['id']}: changes never probed {pending}"


def test_coverage_of_stated_repeated_and_changed() -> None:
    """Enough users state, repeat and change facts, across all kinds of change."""
    stated = repeated = changed = 0
    kind_users: dict[str, set[str]] = {}
    twice: list[tuple[str, str]] = []
    cancelled_plans = switched_plans = 0
    for user in users():
        values_by_key = history(user)
        stated += bool(values_by_key)
        repeated += any(
            old == new for values in values_by_key.values() for old, new in pairwise(values)
        )
        changed += any(changes(values) for values in values_by_key.values())
        for key, values in values_by_key.items():
            moves = changes(values)
            if moves:
                kind_users.setdefault(change_kind(key), set()).add(user["id"])
            if len(moves) >= 2:
                twice.append((user["id"], key))
            if change_kind(key) == "plan":
                cancelled_plans += any(new == CANCELLED for _, new in moves)
                switched_plans += any(new != CANCELLED for _, new in moves)
    assert stated >= MIN_USERS_PER_BEHAVIOUR, stated
    assert repeated >= MIN_USERS_PER_BEHAVIOUR, repeated
    assert changed >= MIN_USERS_PER_BEHAVIOUR, changed
    for kind in ("residence", "job", "preference", "plan"):
        assert len(kind_users.get(kind, ())) >= MIN_USERS_PER_CHANGE_KIND, (kind, kind_users)
    assert cancelled_plans >= 2 and switched_plans >= 2, (cancelled_plans, switched_plans)
    assert len(twice) >= MIN_TWICE_CHANGED_SLOTS, twice


def test_factless_share() -> None:
    """Roughly 40 % of turns are requests, questions or small talk that carry no fact."""
    all_turns = [turn for user in users() for turn in turns_of(user)]
    share = sum(not turn["facts"] for turn in all_turns) / len(all_turns)
    low, high = FACTLESS_SHARE
    assert low <= share <= high, f"{share:.0%} of turns carry no fact"


def test_summary_table() -> None:
    """Print per-user counts (run with -s to see them); the rows add up to the totals."""
    kinds = ("residence", "job", "preference", "plan", "other")
    header = ["user", "sessions", "turns", "factless", "questions", "stale_q", *kinds]
    rows: list[list[object]] = []
    for user in users():
        turns = list(turns_of(user))
        questions = [q for s in user["sessions"] for q in s["questions"]]
        by_kind = Counter(
            change_kind(key) for key, values in history(user).items() for _ in changes(values)
        )
        rows.append(
            [
                user["id"],
                len(user["sessions"]),
                len(turns),
                sum(not t["facts"] for t in turns),
                len(questions),
                sum(bool(q["stale"]) for q in questions),
                *(by_kind[k] for k in kinds),
            ]
        )
    totals: list[object] = ["total", *(sum(int(r[i]) for r in rows) for i in range(1, len(header)))]
    widths = [max(len(str(r[i])) for r in [header, *rows, totals]) for i in range(len(header))]
    for row in [header, *rows, totals]:
        print("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths, strict=True)))
    assert len(rows) == 2 * USERS_PER_LANGUAGE
    assert totals[2] == sum(len(list(turns_of(u))) for u in users())
    assert int(totals[2]) >= MIN_TURNS and int(totals[4]) >= MIN_QUESTIONS
    assert sum(int(v) for v in totals[6:10]) > 0
