"""Memory that stays true, on the real service and engine: repeats, outdated facts, sessions.

No model: the offline rules (`memorystore.rules`). With a model: the
scripted OpenAI-compatible STAND-IN (`support.scripted_models`) as extraction model and
judge, behind mem0's real OpenAI provider.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.scope import id_problem
from memorystore.service.lifecycle.judge import JUDGE_HEADER
from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.spec import ConsolidationSettings, RetrievalSettings
from support.scripted_models import KEY_ENV, scripted_llm


def add(http: httpx.Client, *texts: str, infer: bool = False, **scope) -> list[dict]:
    scope = scope or {"user_id": "alice"}
    body = {
        "messages": [{"role": "user", "content": t} for t in texts],
        "infer": infer,
        **scope,
    }
    response = http.post("/v3/memories/add/", json=body)
    assert response.status_code == 200, response.text
    return response.json()["results"]


def texts(http: httpx.Client, include_retired: bool = False, **scope) -> list[str]:
    body = {"filters": scope or {"user_id": "alice"}, "include_retired": include_retired}
    response = http.post("/v3/memories/", json=body)
    assert response.status_code == 200, response.text
    return sorted(r["memory"] for r in response.json()["results"])


def recall(http: httpx.Client, query: str, **extra) -> dict:
    response = http.post("/v1/recall/", json={"query": query, "user_id": "alice", **extra})
    assert response.status_code == 200, response.text
    return response.json()


def journal(http: httpx.Client, session: str, user: str, assistant: str, **extra) -> dict:
    body = {
        "messages": [
            {"role": "user", "content": user},
            {"role": "assistant", "content": assistant},
        ],
        "user_id": extra.pop("user_id", "alice"),
        **extra,
    }
    response = http.post(f"/v1/sessions/{session}/exchanges/", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def end(http: httpx.Client, session: str, user_id: str = "alice") -> dict:
    response = http.post(f"/v1/sessions/{session}/end/", json={"user_id": user_id, "wait": True})
    assert response.status_code == 200, response.text
    return response.json()


# --- write-time de-duplication ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ("I live in Hangzhou.", "i live in hangzhou"),
        ("用户住在杭州。", "用户住在杭州"),
        ("The user prefers dark mode for charts", "The user prefers dark-mode for charts."),
    ],
)
def test_a_repeated_fact_is_not_stored_again(http, first, again):
    (kept,) = add(http, first)
    (repeat,) = add(http, again)
    assert repeat["event"] == "NONE"
    assert repeat["id"] == repeat["duplicate_of"] == kept["id"]
    assert repeat["rule"]
    assert texts(http) == [first]


def test_a_fuller_fact_replaces_the_one_it_holds(http):
    (short,) = add(http, "I live in Hangzhou")
    full, merged = add(http, "I live in Hangzhou, near West Lake")
    assert (full["event"], merged["event"]) == ("ADD", "DELETE")
    assert merged["id"] == short["id"] and merged["superseded_by"] == full["id"]
    assert texts(http) == ["I live in Hangzhou, near West Lake"]


def test_changed_values_and_negations_are_not_duplicates(http):
    add(http, "I am 31 years old")
    add(http, "I like green tea")
    assert add(http, "I am 32 years old")[0]["event"] == "ADD"
    assert add(http, "I don't like green tea")[0]["event"] == "ADD"


def test_turns_are_kept_as_said_even_when_alike(http):
    """Conversation turns (a message with a speaker) are records, not facts: only an identical
    text is kept once, as before."""
    body = {"messages": [{"role": "user", "content": "Yes, I live in Hangzhou", "name": "a"}]}
    first = http.post("/v3/memories/add/", json={**body, "user_id": "alice"}).json()["results"]
    body["messages"][0]["content"] = "yes i live in hangzhou"
    second = http.post("/v3/memories/add/", json={**body, "user_id": "alice"}).json()["results"]
    assert [first[0]["event"], second[0]["event"]] == ["ADD", "ADD"]


def test_deduplication_can_be_switched_off(tmp_path):
    off = ConsolidationSettings(deduplicate=False, supersede=False)
    with ServiceThread(embedded_config(tmp_path, consolidation=off)) as svc:
        headers = {"Authorization": f"Token {svc.api_key}"}
        with httpx.Client(base_url=svc.url, headers=headers, timeout=30) as http:
            add(http, "I live in Hangzhou.")
            assert add(http, "i live in hangzhou")[0]["event"] == "ADD"
            add(http, "I moved to Shanghai")
            assert len(texts(http)) == 3


# --- supersession without a model -------------------------------------------------------------


def test_a_move_retires_the_old_residence(http):
    (old,) = add(http, "I live in Hangzhou")
    add(http, "I prefer matplotlib for charts")
    new, retired = add(http, "I moved to Shanghai last month")
    assert (new["event"], retired["event"]) == ("ADD", "DELETE")
    assert retired["id"] == old["id"] and retired["superseded_by"] == new["id"]
    assert "hangzhou" in retired["reason"].lower() and "shanghai" in retired["reason"].lower()

    # search, recall and listings leave the retired one out unless asked
    assert texts(http) == ["I moved to Shanghai last month", "I prefer matplotlib for charts"]
    context = recall(http, "Where do I live?")["context"]
    assert "Shanghai" in context and "Hangzhou" not in context
    everything = http.post(
        "/v3/memories/search/",
        json={"query": "where do I live", "user_id": "alice", "include_retired": True},
    ).json()["results"]
    (stale,) = [r for r in everything if r["id"] == old["id"]]
    assert stale["metadata"]["lifecycle"] == "retired"
    assert stale["metadata"]["superseded_by"] == new["id"]
    assert "Hangzhou" in recall(http, "Where do I live?", include_retired=True)["context"]

    # the old one still answers by id, and its history says DELETE after ADD
    assert http.get(f"/v1/memories/{old['id']}/").status_code == 200
    events = [h["event"] for h in http.get(f"/v1/memories/{old['id']}/history/").json()]
    assert events == ["ADD", "DELETE"]


def test_chinese_move_and_switched_preference(http):
    (home,) = add(http, "我住在杭州")
    (editor,) = add(http, "我最喜欢的编辑器是 VS Code")
    moved = add(http, "我们上周搬到上海了")
    switched = add(http, "我从 VS Code 换成了 Neovim")
    assert [r["id"] for r in moved if r["event"] == "DELETE"] == [home["id"]]
    assert [r["id"] for r in switched if r["event"] == "DELETE"] == [editor["id"]]
    assert texts(http) == sorted(["我们上周搬到上海了", "我从 VS Code 换成了 Neovim"])


def test_other_peoples_facts_and_other_users_are_never_retired(http):
    add(http, "My sister lives in Paris")
    (bob,) = add(http, "I live in Hangzhou", user_id="bob")
    results = add(http, "I moved to Shanghai")
    assert [r["event"] for r in results] == ["ADD"]
    assert texts(http, user_id="bob") == ["I live in Hangzhou"]
    assert bob["event"] == "ADD"


# --- supersession with a model (the scripted stand-in) ----------------------------------------


@pytest.fixture
def with_model(tmp_path: Path, monkeypatch):
    calls: list[dict] = []
    monkeypatch.setenv(KEY_ENV, "sk-scripted")
    with (
        scripted_llm(calls) as llm,
        ServiceThread(embedded_config(tmp_path / "data", llm=llm)) as svc,
        httpx.Client(
            base_url=svc.url, headers={"Authorization": f"Token {svc.api_key}"}, timeout=60
        ) as http,
    ):
        yield http, calls


def test_the_model_retires_what_a_new_fact_makes_outdated(with_model):
    http, calls = with_model
    first = add(http, "I live in Hangzhou", infer=True)
    hangzhou = next(r for r in first if r["memory"] == "Lives in Hangzhou")
    moved = add(http, "Big news: I moved to Shanghai", infer=True)
    assert [(r["event"], r["memory"]) for r in moved] == [
        ("ADD", "Lives in Shanghai"),
        ("DELETE", "Lives in Hangzhou"),
    ]
    assert moved[1]["id"] == hangzhou["id"] and moved[1]["superseded_by"] == moved[0]["id"]
    assert moved[1]["reason"] == "now shanghai"  # the model's own words
    judged = [c for c in calls if JUDGE_HEADER in c["body"]["messages"][0]["content"]]
    assert judged, "the model was asked which memories are outdated"
    assert texts(http) == ["Is based in China", "Lives in Shanghai"]


def test_a_repeat_the_model_extracts_again_is_removed(with_model):
    http, _ = with_model
    add(http, "I live in Hangzhou", infer=True)
    # mem0's own hash dedup misses a re-worded repeat; ours catches "lives in hangzhou."
    again = add(http, "I told you, I live in Hangzhou", infer=True)
    assert {r["event"] for r in again} <= {"NONE"}
    assert texts(http) == ["Is based in China", "Lives in Hangzhou"]


# --- session-end consolidation ----------------------------------------------------------------


def _backlog(http: httpx.Client) -> tuple[float, float | None]:
    """The journal's backlog as /metrics shows it: pending exchanges, oldest timestamp."""
    found = {}
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("memorystore_consolidation_"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    pending = found["memorystore_consolidation_pending_exchanges"]
    return pending, found.get("memorystore_consolidation_oldest_pending_timestamp_seconds")


def test_a_session_becomes_the_users_statements_once(http):
    waiting, _ = _backlog(http)
    before = time.time()
    journal(http, "s1", "I live in Hangzhou, I love hiking.", "Got it: Hangzhou and hiking!")
    journal(http, "s1", "Can you draw me a bar chart of sales?", "```python\nplt.bar(...)\n```")
    journal(http, "s1", "Thanks!", "You're welcome.")
    journal(http, "s1", "As I said, I live in Hangzhou.", "Noted again.")
    assert texts(http) == []  # nothing is memory before the session ends
    pending, oldest = _backlog(http)  # the backlog a dashboard shows
    assert pending == waiting + 4 and oldest is not None and oldest <= time.time()
    if waiting == 0:
        assert oldest >= before - 1  # the database's clock stamped it

    first = end(http, "s1")
    assert _backlog(http)[0] == waiting
    assert first["exchanges"] == 4
    assert [r["event"] for r in first["results"]] == ["ADD", "ADD", "NONE"]  # said again
    stored = texts(http)
    assert stored == ["I live in Hangzhou", "I love hiking."]  # no reply, request or ack
    assert end(http, "s1") == {"session_id": "s1", "exchanges": 0, "results": []}
    assert texts(http) == stored

    # the next session's move retires the old statement
    journal(http, "s2", "We moved to Shanghai last week.", "Congratulations on the move!")
    result = end(http, "s2")
    assert [r["event"] for r in result["results"]] == ["ADD", "DELETE"]
    assert texts(http) == ["I love hiking.", "We moved to Shanghai last week."]


def test_session_end_is_exactly_once_under_concurrent_ends(service):
    async def scenario() -> list[dict]:
        headers = {"Authorization": f"Token {service.api_key}"}
        async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=60) as c:
            for i in range(6):
                body = {
                    "messages": [{"role": "user", "content": f"My locker number is {i}0{i}."}],
                    "user_id": "alice",
                }
                (await c.post("/v1/sessions/s1/exchanges/", json=body)).raise_for_status()
            ends = [
                c.post("/v1/sessions/s1/end/", json={"user_id": "alice", "wait": True})
                for _ in range(5)
            ]
            return [r.json() for r in await asyncio.gather(*ends)]

    answers = asyncio.run(scenario())
    assert sorted(a["exchanges"] for a in answers) == [0, 0, 0, 0, 6]
    headers = {"Authorization": f"Token {service.api_key}"}
    with httpx.Client(base_url=service.url, headers=headers) as http:
        assert len(texts(http)) == 6


def test_sessions_are_scoped_by_user(http):
    journal(http, "shared", "I live in Hangzhou.", "ok", user_id="alice")
    journal(http, "shared", "I live in Lisbon.", "ok", user_id="bob")
    assert end(http, "shared", "bob")["exchanges"] == 1
    assert texts(http) == [] and texts(http, user_id="bob") == ["I live in Lisbon."]
    assert end(http, "shared", "alice")["exchanges"] == 1


def test_an_exchange_the_agent_saved_itself_is_not_stored_again(http):
    journal(http, "s1", "Remember: I use matplotlib.", "Saved.", saved=True)
    assert end(http, "s1")["results"] == []


def test_project_scope_without_a_model_stores_no_raw_statement(http):
    journal(http, "s1", "I live in Hangzhou.", "ok", user_id="project:acme", raw_fallback=False)
    assert end(http, "s1", "project:acme")["exchanges"] == 1
    assert texts(http, user_id="project:acme") == []


def test_deleting_a_users_memories_drops_their_pending_sessions(http):
    journal(http, "s1", "I live in Hangzhou.", "ok")
    assert http.delete("/v1/memories/", params={"user_id": "alice"}).status_code == 200
    assert end(http, "s1")["exchanges"] == 0
    assert texts(http) == []


def test_an_idle_session_is_consolidated_by_the_service(tmp_path):
    settings = ConsolidationSettings(session_idle_minutes=0.1)  # 6 s, swept every 1.5 s
    with ServiceThread(embedded_config(tmp_path, consolidation=settings)) as svc:
        headers = {"Authorization": f"Token {svc.api_key}"}
        with httpx.Client(base_url=svc.url, headers=headers, timeout=30) as http:
            journal(http, "s1", "I live in Hangzhou.", "ok")
            deadline = time.monotonic() + 30
            while not texts(http) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert texts(http) == ["I live in Hangzhou."]
            assert end(http, "s1")["exchanges"] == 0


def test_a_session_end_answered_at_once_consolidates_in_the_background(http):
    journal(http, "s1", "I live in Hangzhou.", "ok")
    response = http.post("/v1/sessions/s1/end/", json={"user_id": "alice"})
    assert response.status_code == 202
    deadline = time.monotonic() + 30
    while not texts(http) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert texts(http) == ["I live in Hangzhou."]


@pytest.mark.parametrize("session", ["*", "a b", "x\u200by", "é" * 300])
def test_hostile_session_ids_are_refused_naming_the_field(http, session):
    body = {"messages": [{"role": "user", "content": "hi"}], "user_id": "alice"}
    response = http.post(f"/v1/sessions/{quote(session, safe='')}/exchanges/", json=body)
    assert response.status_code == 422
    assert "session_id" in response.json()["detail"]


# --- recall without repeats -------------------------------------------------------------------


def test_recall_packs_each_fact_once(tmp_path):
    off = ConsolidationSettings(deduplicate=False, supersede=False)  # let repeats be stored
    with ServiceThread(embedded_config(tmp_path, consolidation=off)) as svc:
        headers = {"Authorization": f"Token {svc.api_key}"}
        with httpx.Client(base_url=svc.url, headers=headers, timeout=30) as http:
            add(http, "The user lives in Hangzhou.", "the user lives in hangzhou", "I like tea.")
            packed = recall(http, "where does the user live?")
            lines = packed["context"].lower().count("lives in hangzhou")
            assert lines == 1 and packed["repeats"] == 1


def test_mem0s_own_search_path_leaves_retired_memories_out_too(tmp_path):
    """Without fusion the service searches through mem0's pipeline, which must honour the
    same filter (it rewrites NOT into its own spelling)."""
    plain = RetrievalSettings.mem0_search()
    with ServiceThread(embedded_config(tmp_path, retrieval=plain)) as svc:
        headers = {"Authorization": f"Token {svc.api_key}"}
        with httpx.Client(base_url=svc.url, headers=headers, timeout=30) as http:
            (old,) = add(http, "I live in Hangzhou")
            assert add(http, "I moved to Shanghai")[1]["id"] == old["id"]
            body = {"query": "where do I live", "user_id": "alice"}
            found = http.post("/v3/memories/search/", json=body).json()["results"]
            assert [r["memory"] for r in found] == ["I moved to Shanghai"]
            both = http.post("/v3/memories/search/", json={**body, "include_retired": True})
            assert {r["memory"] for r in both.json()["results"]} == {
                "I moved to Shanghai",
                "I live in Hangzhou",
            }


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    session=st.text(min_size=1, max_size=40).filter(lambda s: "/" not in s and s not in (".", ".."))
)
def test_generated_session_ids_are_journalled_exactly_or_refused(http, session):
    """Any session id: refused with 422 naming it when outside the id grammar; otherwise its
    exchange is journalled under exactly that id, in exactly that scope."""
    path = f"/v1/sessions/{quote(session, safe='')}"
    body = {"messages": [{"role": "user", "content": "I keep bees."}], "user_id": "gen"}
    response = http.post(f"{path}/exchanges/", json=body)
    if id_problem(session) is not None:
        assert response.status_code == 422 and "session_id" in response.json()["detail"]
        return
    assert response.status_code == 200, response.text
    other = http.post(f"{path}/end/", json={"user_id": "someone-else", "wait": True})
    assert other.json()["exchanges"] == 0
    mine = http.post(f"{path}/end/", json={"user_id": "gen", "wait": True})
    assert mine.json()["exchanges"] == 1 and mine.json()["session_id"] == session
