"""Erased means erased: after a delete, no copy of the text is readable through the API, in
any file under the data directory, or in any table of the state's PostgreSQL.

Each test fills a real `memorystore serve` (the embedded engine; SQLite state, or the
harness's PostgreSQL as `history.postgres`, or PostgreSQL for the vectors too) with
everything that keeps text: memories, a retired one, turns in a chain, an updated memory's
history, an idempotency record, a pending and a consolidated session, a stored export and,
with the scripted extraction model, mem0's recent messages. Then it erases, as a tenant
would (a user, an entity, one memory, a batch), and searches byte by byte for the erased
words (`support.erasure_probe`), and for the words of everyone else, which must all stay.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.scope import EntityIds
from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore_dev.postgres import PostgresServer
from support.erasure_probe import Served, in_database, marker, on_disk, served, service_config
from support.scripted_models import KEY_ENV, scripted_llm

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ADD = "/v1/memories/"
LABELS = (
    "fact",  # a fact written on its own
    "old",  # a favourite, retired by `new`
    "new",
    "turn",  # an exchange: two turns, the reply chained to the turn
    "reply",
    "before",  # a memory's text before an update: only its history holds it
    "updated",
    "keyed",  # written with an Idempotency-Key
    "pending",  # a journalled exchange of a session not yet ended
    "session",  # a session ended: its consolidated exchange, and its fact (no model)
    "context",  # with the model: the message mem0 keeps as extraction context
)


@dataclass
class Person:
    user: str
    marks: dict[str, str]
    ids: dict[str, str] = field(default_factory=dict)
    key: str = ""
    export: str = ""

    def body(self, text: str) -> dict:
        return {"messages": [{"role": "user", "content": text}], "user_id": self.user}


def ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def write(svc: Served, person: Person, text: str, **extra: object) -> list[dict]:
    headers = extra.pop("headers", {})
    body = {**person.body(text), "infer": False, **extra}
    return ok(svc.call("POST", ADD, json=body, headers=headers))["results"]


def populate(svc: Served, user: str, rng: random.Random, model: bool) -> Person:
    """Everything that keeps text, for one user (see the module's docstring)."""
    p = Person(user, {label: marker(rng, accented=i % 2 == 0) for i, label in enumerate(LABELS)})
    m = p.marks
    p.ids["fact"] = write(svc, p, f"My locker code is {m['fact']}")[0]["id"]
    p.ids["old"] = write(svc, p, f"My favourite colour is {m['old']}")[0]["id"]
    moved = write(svc, p, f"My favourite colour is now {m['new']}")
    assert [r["event"] for r in moved] == ["ADD", "DELETE"], moved  # `old` retired
    p.ids["new"] = moved[0]["id"]
    exchange = [
        {"role": "user", "content": f"We talked about {m['turn']} today"},
        {"role": "assistant", "content": f"Yes, {m['reply']} was the topic"},
    ]
    turns = ok(svc.call("POST", ADD, json={**p.body(""), "messages": exchange, "infer": False}))
    p.ids["turn"], p.ids["reply"] = (r["id"] for r in turns["results"])
    p.ids["updated"] = write(svc, p, f"My bike is called {m['before']}")[0]["id"]
    changed = {"text": f"My bike is called {m['updated']}"}
    ok(svc.call("PUT", f"/v1/memories/{p.ids['updated']}/", json=changed))
    p.key = f"key-{uuid.uuid4()}"
    keyed = write(
        svc, p, f"I keep a {m['keyed']} in the garage", headers={"Idempotency-Key": p.key}
    )
    p.ids["keyed"] = keyed[0]["id"]
    for session, text in (("open", f"{m['pending']} is my dog's name"), ("closed", "")):
        said = text or f"I work at {m['session']}"
        journal = {**p.body(said), "messages": [*p.body(said)["messages"], _reply()]}
        ok(svc.call("POST", f"/v1/sessions/{session}/exchanges/", json=journal))
    ended = ok(svc.call("POST", "/v1/sessions/closed/end/", json={"user_id": user, "wait": True}))
    if not model:
        p.ids["session"] = ended["results"][0]["id"]
    if model:
        write(svc, p, f"I live in Hangzhou near {m['context']}", infer=True)
    export = {"user_id": user, "schema": {"type": "object"}}
    p.export = ok(svc.call("POST", "/v1/exports/", json=export))["id"]
    return p


def _reply() -> dict:
    return {"role": "assistant", "content": "Noted."}


def everywhere(svc: Served, dsn: str | None, texts: list[str]) -> dict[str, list[str]]:
    """Where each text survives: files under the data directory, tables of the database."""
    found = on_disk(svc.data, texts)
    if dsn is not None:
        for text, tables in in_database(dsn, texts).items():
            found.setdefault(text, []).extend(tables)
    return found


def gone_through_the_api(svc: Served, person: Person, erased: set[str]) -> None:
    for label in erased & set(person.ids):
        memory_id = person.ids[label]
        assert svc.call("GET", f"/v1/memories/{memory_id}/").status_code == 404, label
        for params in ({}, {"user_id": person.user}):
            history = svc.call("GET", f"/v1/memories/{memory_id}/history/", params=params)
            assert history.status_code == 404, (label, history.text)
    listed = ok(
        svc.call(
            "POST",
            "/v3/memories/",
            json={"filters": {"user_id": person.user}, "include_retired": True},
        )
    )
    texts = " ".join(r["memory"] for r in listed["results"])
    for label in erased:
        assert person.marks[label] not in texts, label


@pytest.fixture(params=["sqlite", "postgres", "pgvector"])
def state(request, tmp_path: Path):
    """(where the state is, its DSN or None)"""
    if request.param == "sqlite":
        yield request.param, None
        return
    pg: PostgresServer = request.getfixturevalue("pg_server")
    yield request.param, pg.database(f"e_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def model(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-scripted")
    with scripted_llm([]) as llm:
        yield llm


@pytest.mark.parametrize("route", ["user", "entity"])
def test_erasing_a_user_leaves_no_copy_of_their_words_anywhere(state, model, route, tmp_path):
    kind, dsn = state
    tier = "postgres" if kind == "pgvector" else "embedded"
    config = service_config(tmp_path, dsn, tier, model)
    rng = random.Random(f"{kind}-{route}")
    with served(config, tmp_path) as svc:
        bob = populate(svc, "bob", rng, model=True)
        alice = populate(svc, "alice", rng, model=True)
        every = [*bob.marks.values(), *alice.marks.values()]
        before = everywhere(svc, dsn, every)
        missing = [t for t in every if t not in before]
        assert not missing, f"the test wrote these nowhere: {missing}"

        path = "/v2/entities/user/bob/" if route == "entity" else ADD
        params = {} if route == "entity" else {"user_id": "bob"}
        answer = ok(svc.call("DELETE", path, params=params))
        assert answer["deleted"] == len(
            ok(
                svc.call(
                    "POST",
                    "/v3/memories/",
                    json={"filters": {"user_id": "alice"}, "include_retired": True},
                )
            )["results"]
        ), "bob and alice wrote the same memories"

        left = everywhere(svc, dsn, every)
        survived = {
            bob.marks[label]: left[bob.marks[label]] for label in LABELS if bob.marks[label] in left
        }
        assert not survived, f"erased words still stored: {survived}"
        assert all(text in left for text in alice.marks.values()), "alice lost words"

        gone_through_the_api(svc, bob, set(LABELS))
        got = svc.call("POST", "/v1/exports/get/", json={"memory_export_id": bob.export})
        assert got.status_code == 404
        ok(svc.call("POST", "/v1/exports/get/", json={"memory_export_id": alice.export}))
        ended = ok(
            svc.call("POST", "/v1/sessions/open/end/", json={"user_id": "bob", "wait": True})
        )
        assert ended["exchanges"] == 0, "an erased exchange was consolidated"
        entities = ok(svc.call("GET", "/v1/entities/"))["results"]
        assert {e["name"] for e in entities} >= {"alice"} and "bob" not in {
            e["name"] for e in entities
        }
        assert [
            h["event"] for h in ok(svc.call("GET", f"/v1/memories/{alice.ids['updated']}/history/"))
        ] == ["ADD", "UPDATE"]

        # the write's retry no longer replays the erased answer: it runs again
        retry = write(
            svc,
            bob,
            f"I keep a {bob.marks['keyed']} in the garage",
            headers={"Idempotency-Key": bob.key},
        )
        assert retry[0]["id"] != bob.ids["keyed"]
        again = svc.call(
            "POST",
            ADD,
            json={**alice.body(f"I keep a {alice.marks['keyed']} in the garage"), "infer": False},
            headers={"Idempotency-Key": alice.key},
        )
        assert again.headers.get("Idempotent-Replayed") == "true"

    # closed: nothing was written back at shutdown either
    assert not set(bob.marks.values()) - {bob.marks["keyed"]} & set(on_disk(svc.data, every))


@pytest.mark.parametrize("how", ["one", "batch"])
def test_erasing_memories_by_id_removes_their_words_and_only_theirs(state, how, tmp_path):
    kind, dsn = state
    tier = "postgres" if kind == "pgvector" else "embedded"
    config = service_config(tmp_path, dsn, tier)
    with served(config, tmp_path) as svc:
        bob = populate(svc, "bob", random.Random(f"{kind}-{how}"), model=False)
        # `new` retired `old` with a reason quoting it; `turn` is `reply`'s context; `session`
        # came from a consolidated session
        erased = {"new"} if how == "one" else {"new", "turn", "session", "fact"}
        if how == "one":
            ok(svc.call("DELETE", f"/v1/memories/{bob.ids['new']}/", params={"user_id": "bob"}))
        else:
            batch = {"memories": [{"memory_id": bob.ids[label]} for label in sorted(erased)]}
            ok(svc.call("DELETE", "/v1/batch/", json=batch))

        left = everywhere(svc, dsn, list(bob.marks.values()))
        survived = {label: left[bob.marks[label]] for label in erased if bob.marks[label] in left}
        assert not survived, f"erased words still stored: {survived}"
        kept = set(LABELS) - erased - {"context"}  # no model: no extraction context
        assert all(bob.marks[label] in left for label in kept), {
            label: bob.marks[label] in left for label in kept
        }
        gone_through_the_api(svc, bob, erased)
        old = ok(svc.call("GET", f"/v1/memories/{bob.ids['old']}/"))
        assert old["memory"].endswith(bob.marks["old"])  # still there, still retired
        assert bob.marks["new"] not in str(old)
        reply = ok(svc.call("GET", f"/v1/memories/{bob.ids['reply']}/"))
        assert bob.ids.get("turn") not in str(reply) or "turn" not in erased
        # every stored export held an erased memory: none is handed out any more
        got = svc.call("POST", "/v1/exports/get/", json={"memory_export_id": bob.export})
        assert got.status_code == 404


# --- generated: random writers and scopes, one scope erased -----------------------------------

SCOPES = [
    {"user_id": "u1"},
    {"user_id": "u1", "agent_id": "a1"},
    {"user_id": "u1", "agent_id": "a1", "run_id": "r1"},
    {"user_id": "u2"},
    {"user_id": "u2", "run_id": "r1"},
    {"agent_id": "a1"},
    {"agent_id": "a1", "run_id": "r1"},
    {"run_id": "r1"},
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> ServiceThread:
    with ServiceThread(embedded_config(tmp_path_factory.mktemp("erasure") / "data")) as svc:
        yield svc


_examples = iter(range(10**6))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    writes=st.lists(st.tuples(st.sampled_from(SCOPES), st.booleans()), min_size=1, max_size=10),
    erase=st.sampled_from(SCOPES),
    seed=st.integers(0, 2**32),
)
def test_an_erased_scope_is_unreadable_through_every_route_and_the_rest_intact(
    shared, writes, erase, seed
):
    """Any writers in any scopes; one scope erased: what it held is gone from every route and
    every file, what it did not hold reads as before."""
    n = next(_examples)
    rng = random.Random(f"{seed}-{n}")  # a replayed example writes new words

    def named(scope: dict[str, str]) -> dict[str, str]:
        return {k: f"{v}-{n}" for k, v in scope.items()}

    headers = {"Authorization": f"Token {shared.api_key}"}
    with httpx.Client(base_url=shared.url, headers=headers, timeout=60) as http:
        written = []  # (id, text, scope)
        for scope, turn in writes:
            text = f"The {marker(rng)} is mine"
            message = {"role": "user", "content": text, **({"name": "speaker"} if turn else {})}
            body = {"messages": [message], "infer": False, **named(scope)}
            (result,) = ok(http.post(ADD, json=body))["results"]
            written.append((result["id"], text, named(scope)))
        target = EntityIds(**named(erase))
        ok(http.delete(ADD, params=target.filters()))

        erased = [(i, t, s) for i, t, s in written if target.contains(s)]
        kept = [(i, t, s) for i, t, s in written if not target.contains(s)]
        for memory_id, text, scope in erased:
            assert http.get(f"/v1/memories/{memory_id}/").status_code == 404
            assert http.get(f"/v1/memories/{memory_id}/history/").status_code == 404
            asked = {"filters": scope, "include_retired": True}
            export = ok(http.post("/v1/exports/", json={**scope, "schema": {}}))["id"]
            for route, body in (
                ("/v3/memories/", asked),
                ("/v3/memories/search/", {**asked, "query": text}),
                ("/v1/recall/", {**scope, "query": text, "include_retired": True}),
                ("/v1/exports/get/", {"memory_export_id": export}),
            ):
                assert text not in json.dumps(ok(http.post(route, json=body))), route
        for memory_id, text, scope in kept:
            assert ok(http.get(f"/v1/memories/{memory_id}/"))["memory"] == text
            assert ok(http.get(f"/v1/memories/{memory_id}/history/"))[0]["event"] == "ADD"
            listed = ok(
                http.post("/v3/memories/", json={"filters": scope, "include_retired": True})
            )
            assert text in {r["memory"] for r in listed["results"]}
        disk = on_disk(Path(shared.cfg.data_dir), [t for _, t, _ in written])
        survived = {t: disk[t] for _, t, _ in erased if t in disk}
        assert not survived, f"erased texts still on disk: {survived}"
        assert all(t in disk for _, t, _ in kept), "a kept text is gone from disk"
