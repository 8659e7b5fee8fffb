"""Property: no scope ever sees or changes another's memories, on any route, for any ids.

Two tenants (two real services, different keys and data dirs; one searches through the
service's fused retrieval, the other through mem0's own search) share the same hostile ids.
Hypothesis drives random sequences of every route (add, search, recall, list, get, update,
delete, delete-all, delete-entity, history, entities) with ids drawn to collide: wildcards and
operator-looking strings, prefixes of one another, case and Unicode-normalisation twins, CJK,
RTL, emoji, 256 characters. A model (a dict) holds what each tenant stores; every response is
checked against it, and after every step each tenant's entity counts must equal the model's.
Invalid ids are drawn too, and each must be refused with a 4xx that names the field.
The process's peak resident set over the runs (the services run in it) is printed and must
stay under the memory service's default memory limit.
"""

from __future__ import annotations

import itertools
import unicodedata
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memorystore.scope import id_problem
from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.spec import RetrievalSettings
from support.rss import RssWatch

# tenant b searches through mem0's own pipeline (no hybrid, no neighbours), tenant a through
# the service's fused one: both search paths are under test
MEM0_SEARCH = RetrievalSettings.mem0_search()

KEYS = ("user_id", "agent_id", "run_id")
TENANTS = (0, 1)
WORDS = ("tea", "coffee", "hiking", "chess", "paris", "tokyo", "violin", "garden")

# ids that look like patterns, operators or injections, and near-collisions of each other
HOSTILE = [
    "%", "_", ".*", "**", "a*", "?", "$ne", "$gt", '{"$ne":1}', "{", "}", "[]", "null",
    "None", "0", "'", '"', "\\", "../", "%2A", "%00", "alice", "alice2", "Alice", "ALICE",
    "ali", "project:x", "user_id", "用户", "用户二", "مستخدم", "שלום", "🙂", "👩‍💻", "é",
    "e\u0301", "Å", "A\u030a", "ﬁ", "fi", "ß", "ss", "x" * 256, "y" * 255 + "🙂",
]  # fmt: skip
# (value, what the refusal must say); non-strings only where JSON can carry them
INVALID = [
    ("*", "'*' is not an id"),
    ("", ""),
    (" alice", "whitespace"),
    ("alice ", "whitespace"),
    ("al ice", "whitespace"),
    ('{"$ne": 1}', "whitespace"),
    ("a\tb", "whitespace"),
    ("a\u3000b", "whitespace"),
    ("a\u2028b", "whitespace"),
    ("a\x00b", "control"),
    ("\x1b[31m", "control"),
    ("a\u200bb", "format"),
    ("\u202eevil", "format"),
    ("x" * 257, ""),
]
NON_STRINGS = [(5, "must be a string"), (None, "must be a string, not null")]
NON_STRINGS += [({"$ne": "x"}, "must be a string"), (["a"], "must be a string")]
NON_STRINGS += [(True, "must be a string")]

_id_chars = st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zs", "Zl", "Zp"))
valid_ids = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(_id_chars, min_size=1, max_size=12),
    st.text(st.sampled_from("aA*%$.用🙂é"), min_size=1, max_size=6),
).filter(lambda s: id_problem(s) is None)


def twins(value: str) -> list[str]:
    """Ids that differ from `value` only a little: what a loose matcher would confuse."""
    out = [
        value + "2",
        value[:-1],
        value.swapcase(),
        value.upper(),
        unicodedata.normalize("NFC", value),
        unicodedata.normalize("NFD", value),
        unicodedata.normalize("NFKC", value),
        value + "*",
        "*" + value,
    ]
    return [t for t in out if t != value and id_problem(t) is None]


@st.composite
def id_pool(draw: st.DrawFn, size: int) -> list[str]:
    """`size` distinct valid ids, the later ones often twins of the earlier ones."""
    pool = [draw(valid_ids)]
    while len(pool) < size:
        near = [t for t in twins(pool[-1]) if t not in pool]
        candidates = st.sampled_from(near) if near else valid_ids
        value = draw(st.one_of(candidates, valid_ids) if near else candidates)
        if value not in pool:
            pool.append(value)
    return pool


@dataclass
class Mem:
    text: str
    user_id: str | None
    agent_id: str | None
    run_id: str | None

    def ids(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in KEYS if getattr(self, k) is not None}


def in_scope(scope: dict[str, str], mem: Mem) -> bool:
    """The documented rule, written independently of the service's code."""
    if any(getattr(mem, k) != v for k, v in scope.items()):
        return False
    return "user_id" in scope or mem.user_id is None


class Counts:
    examples = rules = calls = by_id = cross_checks = refusals = 0


@dataclass
class Tenant:
    service: ServiceThread
    http: httpx.Client


@pytest.fixture(scope="module")
def rss_watch() -> RssWatch:
    return RssWatch()  # before the services start: their growth is measured from here


@pytest.fixture(scope="module")
def tenants(tmp_path_factory, rss_watch) -> Iterator[list[Tenant]]:
    a_dir = Path(tmp_path_factory.mktemp("tenant-a"))
    b_dir = Path(tmp_path_factory.mktemp("tenant-b"))
    with (
        ServiceThread(embedded_config(a_dir, tenant="a")) as a,
        ServiceThread(embedded_config(b_dir, tenant="b", retrieval=MEM0_SEARCH)) as b,
    ):
        assert a.api_key != b.api_key
        out = []
        for svc in (a, b):
            headers = {"Authorization": f"Token {svc.api_key}"}
            out.append(Tenant(svc, httpx.Client(base_url=svc.url, headers=headers, timeout=60)))
        yield out
        for t in out:
            t.http.close()


def scope_query(scope: dict[str, str]) -> dict[str, str]:
    return dict(scope)


def entity_counts(http: httpx.Client) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    page = 1
    while True:
        response = http.get("/v1/entities/", params={"page": page, "page_size": 100})
        assert response.status_code == 200, response.text
        body = response.json()
        for row in body["results"]:
            counts[(row["type"], row["name"])] = row["total_memories"]
        if body["next"] is None:
            assert body["count"] == len(counts)
            return counts
        page += 1


invalid_cases = st.tuples(
    st.sampled_from(INVALID + NON_STRINGS),
    st.sampled_from(KEYS),
    st.sampled_from(["body", "filters", "and", "query", "path", "add", "recall", "list"]),
    st.sampled_from(["", "history/", "delete-all"]),
)
shape_cases = st.tuples(
    st.sampled_from(["or", "not", "nested", "operator", "multi-and", "metadata"]),
    st.sampled_from(KEYS),
)


def check_invalid_id(http: httpx.Client, case: tuple[Any, ...], user: str) -> None:
    """An invalid id anywhere a scope can be given: a 4xx naming the field, and its reason."""
    (value, reason), key, where, target = case
    if where in ("query", "path") and not isinstance(value, str):
        value, reason = "*", "'*' is not an id"
    if where in ("body", "add") and not isinstance(value, str):
        # pydantic words type errors itself; a top-level null is "not given"
        value, reason = (5 if value is None else value), ""
    if where == "path" and (value in ("", ".", "..") or "/" in value):
        value, reason = "a b", "whitespace"
    # a valid user keeps the request otherwise well-formed
    good = {"user_id": user} if key != "user_id" else {}
    if where == "body":
        call = ("post", "/v3/memories/search/", {"json": {"query": "q", key: value}})
        field = f"body.{key}"
    elif where == "add":
        body = {"messages": [{"role": "user", "content": "x"}], key: value}
        call, field = ("post", "/v3/memories/add/", {"json": body}), f"body.{key}"
    elif where == "filters":
        body = {"query": "q", "filters": {**good, key: value}}
        call, field = ("post", "/v3/memories/search/", {"json": body}), f"filters.{key}"
    elif where == "and":
        body = {"filters": {"AND": [good, {key: value}] if good else [{key: value}]}}
        index = 1 if good else 0
        call, field = ("post", "/v3/memories/", {"json": body}), f"filters.AND[{index}].{key}"
    elif where == "recall":
        body = {"query": "q", "filters": {**good, key: value}}
        call, field = ("post", "/v1/recall/", {"json": body}), f"filters.{key}"
    elif where == "list":
        body = {**good, "filters": {key: value}}
        call, field = ("post", "/v3/memories/", {"json": body}), f"filters.{key}"
    elif where == "query":
        if target == "delete-all":
            call = ("delete", "/v1/memories/", {"params": {**good, key: value}})
        else:
            path = f"/v1/memories/{uuid.uuid4()}/{target}"
            call = ("get", path, {"params": {key: value}})
        field = f"query.{key}"
    else:
        kind = key.removesuffix("_id")
        call = ("delete", f"/v2/entities/{kind}/{quote(value, safe='')}/", {})
        field = "path.name"
    method, path, kwargs = call
    response = http.request(method.upper(), path, **kwargs)
    assert response.status_code in (400, 422), (call, response.text)
    detail = response.json()["detail"]
    assert field in detail and reason in detail, (call, detail)
    Counts.refusals += 1


def check_identity_elsewhere(
    http: httpx.Client, case: tuple[str, str], value: str, scope: dict[str, str]
) -> None:
    """An identity key in OR, NOT, nested, with operators, in a multi-key AND or in metadata."""
    shape, key = case
    filters: dict[str, Any] = dict(scope)
    if shape == "or":
        filters["OR"] = [{key: value}, {"topic": "x"}]
        field = f"filters.OR[0].{key}"
    elif shape == "not":
        filters["NOT"] = [{key: value}]
        field = f"filters.NOT[0].{key}"
    elif shape == "nested":
        filters["topic"] = {"in": [{key: value}]}
        field = f"filters.topic.in[0].{key}"
    elif shape == "operator":
        filters = {key: {"ne": value}}
        field = f"filters.{key}: must be a string"
    elif shape == "multi-and":
        filters = {"AND": [{key: value, "topic": "x"}]}
        field = f"filters.AND[0].{key}"
    if shape == "metadata":
        body = {"messages": [{"role": "user", "content": "x"}], **scope, "metadata": {key: value}}
        response = http.post("/v3/memories/add/", json=body)
        field = f"metadata.{key}: reserved"
    else:
        response = http.post("/v3/memories/search/", json={"query": "q", "filters": filters})
    assert response.status_code == 400, response.text
    assert field in response.json()["detail"], (filters, response.text)
    Counts.refusals += 1


def make_machine(tenants: list[Tenant]) -> type[RuleBasedStateMachine]:
    class Isolation(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model: dict[tuple[int, str], Mem] = {}
            self.serial = itertools.count()
            self.scopes: list[dict[str, str]] = []
            Counts.examples += 1

        # --- set-up: empty both tenants, draw the ids every scope is made of ---------------

        @initialize(users=id_pool(3), agents=id_pool(2), runs=id_pool(2))
        def setup(self, users: list[str], agents: list[str], runs: list[str]) -> None:
            for t in tenants:
                for _ in range(3):
                    rows = entity_counts(t.http)
                    if not rows:
                        break
                    for kind, name in rows:
                        gone = t.http.delete("/v1/memories/", params={f"{kind}_id": name})
                        assert gone.status_code == 200, gone.text
                assert entity_counts(t.http) == Counter()
            self.scopes = (
                [{"user_id": u} for u in users]
                + [{"user_id": u, "agent_id": a} for u in users[:2] for a in agents]
                + [{"user_id": users[0], "run_id": r} for r in runs]
                + [{"agent_id": a} for a in agents]
                + [{"run_id": r} for r in runs]
                + [{"agent_id": agents[0], "run_id": runs[0]}]
            )

        # --- helpers -------------------------------------------------------------------

        def visible(self, tenant: int, scope: dict[str, str]) -> dict[str, Mem]:
            return {
                mid: m for (t, mid), m in self.model.items() if t == tenant and in_scope(scope, m)
            }

        def body_scope(self, data: st.DataObject, scope: dict[str, str]) -> dict[str, Any]:
            """The scope as a client may send it: top-level ids, filters, or AND items."""
            style = data.draw(st.sampled_from(["top", "filters", "and", "mixed"]))
            if style == "top":
                return dict(scope)
            if style == "filters":
                return {"filters": dict(scope)}
            if style == "and":
                return {"filters": {"AND": [{k: v} for k, v in scope.items()]}}
            first, *rest = scope.items()
            return {first[0]: first[1], "filters": dict(rest)}

        def pick_mem(self, data: st.DataObject) -> tuple[int, str, Mem]:
            # insertion order, not ids: uuids differ between replays of the same example
            (tenant, mid), mem = data.draw(st.sampled_from(list(self.model.items())))
            return tenant, mid, mem

        def step(self) -> None:
            Counts.calls += 1

        # --- writes --------------------------------------------------------------------

        @rule(data=st.data())
        def add(self, data: st.DataObject) -> None:
            Counts.rules += 1
            self.step()
            tenant = data.draw(st.sampled_from(TENANTS))
            scope = data.draw(st.sampled_from(self.scopes))
            n = next(self.serial)
            words = data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
            text = f"canary t{tenant} n{n}: I like {' and '.join(words)}."
            self._add(tenant, scope, text)

        @precondition(lambda self: self.model)
        @rule(data=st.data())
        def add_a_known_text_elsewhere(self, data: st.DataObject) -> None:
            """The same text in another scope or tenant is a new memory (dedup is per scope)."""
            Counts.rules += 1
            self.step()
            _, _, mem = self.pick_mem(data)
            tenant = data.draw(st.sampled_from(TENANTS))
            self._add(tenant, data.draw(st.sampled_from(self.scopes)), mem.text)

        def _add(self, tenant: int, scope: dict[str, str], text: str) -> None:
            body = {"messages": [{"role": "user", "content": text}], **scope}
            response = tenants[tenant].http.post("/v3/memories/add/", json=body)
            assert response.status_code == 200, response.text
            (result,) = response.json()["results"]
            same = {mid for mid, m in self.visible(tenant, scope).items() if m.text == text}
            if same:
                assert result["event"] == "NONE" and result["id"] in same, (result, same)
                return
            assert result["event"] == "ADD", result
            assert (tenant, result["id"]) not in self.model
            self.model[(tenant, result["id"])] = Mem(text, **{k: scope.get(k) for k in KEYS})

        def update_one(self, data: st.DataObject) -> None:
            owner, mid, mem, tenant, params, allowed = self.aim(data)
            text = f"updated t{owner} n{next(self.serial)}."
            response = tenants[tenant].http.put(
                f"/v1/memories/{mid}/", params=params, json={"text": text}
            )
            if allowed:
                assert response.status_code == 200, response.text
                assert response.json()["memory"] == text
                mem.text = text
            else:
                assert response.status_code == 404, response.text

        def delete_one(self, data: st.DataObject) -> None:
            owner, mid, _, tenant, params, allowed = self.aim(data)
            response = tenants[tenant].http.delete(f"/v1/memories/{mid}/", params=params)
            if allowed:
                assert response.status_code == 200, response.text
                del self.model[(owner, mid)]
            else:
                assert response.status_code == 404, response.text

        @rule(data=st.data())
        def delete_all(self, data: st.DataObject) -> None:
            Counts.rules += 1
            self.step()
            tenant = data.draw(st.sampled_from(TENANTS))
            scope = data.draw(st.sampled_from(self.scopes))
            gone = self.visible(tenant, scope)
            http = tenants[tenant].http
            (key, name), *more = scope.items()
            path_safe = name not in (".", "..") and "/" not in name
            if not more and path_safe and data.draw(st.booleans()):
                kind = key.removesuffix("_id")
                response = http.delete(f"/v2/entities/{kind}/{quote(name, safe='')}/")
            else:
                response = http.delete("/v1/memories/", params=scope_query(scope))
            assert response.status_code == 200, response.text
            assert response.json()["deleted"] == len(gone), (scope, gone)
            for mid in gone:
                del self.model[(tenant, mid)]

        # --- reads ---------------------------------------------------------------------

        @rule(data=st.data(), route=st.sampled_from(["search", "recall"]))
        def search(self, data: st.DataObject, route: str) -> None:
            Counts.rules += 1
            self.step()
            tenant = data.draw(st.sampled_from(TENANTS))
            scope = data.draw(st.sampled_from(self.scopes))
            known = [m.text for m in self.model.values()]
            query = data.draw(st.sampled_from(known + list(WORDS)))
            body = {"query": query, **self.body_scope(data, scope)}
            mine = self.visible(tenant, scope)
            http = tenants[tenant].http
            if route == "search":
                body |= {"top_k": 100, "threshold": 0.0}
                response = http.post("/v3/memories/search/", json=body)
                assert response.status_code == 200, response.text
                hits = response.json()["results"]
            else:
                body |= {"top_k": 100, "threshold": 0.0, "token_budget": 100_000}
                response = http.post("/v1/recall/", json=body)
                assert response.status_code == 200, response.text
                hits = response.json()["memories"]
                for mem in self.model.values():  # nobody else's text is in the context
                    if mem.text not in {m.text for m in mine.values()}:
                        assert mem.text not in response.json()["context"]
            for hit in hits:
                assert hit["id"] in mine, (scope, hit)
                assert hit["memory"] == mine[hit["id"]].text
            if query in {m.text for m in mine.values()}:  # its own text finds it
                assert query in {hit["memory"] for hit in hits}

        @rule(data=st.data())
        def list_scope(self, data: st.DataObject) -> None:
            Counts.rules += 1
            self.step()
            tenant = data.draw(st.sampled_from(TENANTS))
            scope = data.draw(st.sampled_from(self.scopes))
            self.check_list(tenant, scope, self.body_scope(data, scope))

        def check_list(self, tenant: int, scope: dict[str, str], body: dict[str, Any]) -> None:
            response = tenants[tenant].http.post("/v3/memories/", json=body)
            assert response.status_code == 200, response.text
            mine = self.visible(tenant, scope)
            listed = {row["id"]: row["memory"] for row in response.json()["results"]}
            assert listed == {mid: m.text for mid, m in mine.items()}, scope
            assert response.json()["count"] == len(mine)

        def aim(self, data: st.DataObject) -> tuple[int, str, Mem, int, dict[str, str], bool]:
            """A memory, the tenant asking, the scope asked with, and whether it may see it."""
            owner, mid, mem = self.pick_mem(data)
            tenant = data.draw(st.sampled_from([owner, owner, 1 - owner]))
            how = data.draw(st.sampled_from(["own", "part", "twin", "other", "none"]))
            ids = mem.ids()
            if how == "own":
                params = ids
            elif how == "part":  # e.g. its agent without its user: must not reach it
                keys = data.draw(st.lists(st.sampled_from(sorted(ids)), min_size=1, unique=True))
                params = {k: ids[k] for k in keys}
            elif how == "twin":  # one id swapped for a near-collision: must not reach it
                key = data.draw(st.sampled_from(sorted(ids)))
                near = twins(ids[key])
                params = {**ids, key: data.draw(st.sampled_from(near))} if near else ids
            elif how == "other":
                params = data.draw(st.sampled_from(self.scopes))
            else:
                params = {}  # the id alone: the tenant key holder's capability
            allowed = tenant == owner and (not params or in_scope(params, mem))
            if tenant != owner or not allowed:
                Counts.cross_checks += 1
            return owner, mid, mem, tenant, params, allowed

        def get_one(self, data: st.DataObject) -> None:
            _, mid, mem, tenant, params, allowed = self.aim(data)
            response = tenants[tenant].http.get(f"/v1/memories/{mid}/", params=params)
            if allowed:
                assert response.status_code == 200, response.text
                assert response.json()["memory"] == mem.text
                assert {k: response.json().get(k) for k in mem.ids()} == mem.ids()
            else:
                assert response.status_code == 404, response.text

        def history(self, data: st.DataObject) -> None:
            _, mid, mem, tenant, params, allowed = self.aim(data)
            response = tenants[tenant].http.get(f"/v1/memories/{mid}/history/", params=params)
            if allowed:
                assert response.status_code == 200, response.text
                events = response.json()
                assert events[0]["event"] == "ADD"
                assert events[-1]["new_memory"] == mem.text
            else:
                assert response.status_code == 404, response.text

        def unknown_ids_are_404(self, data: st.DataObject) -> None:
            tenant = data.draw(st.sampled_from(TENANTS))
            mid = str(uuid.UUID(int=data.draw(st.integers(0, 2**128 - 1)), version=4))
            for method in ("get", "delete"):
                response = tenants[tenant].http.request(method.upper(), f"/v1/memories/{mid}/")
                assert response.status_code == 404, response.text

        # --- refusals (module-level checks, also run on their own below) --------------

        def invalid_ids_are_refused(self, data: st.DataObject) -> None:
            http = tenants[data.draw(st.sampled_from(TENANTS))].http
            check_invalid_id(http, data.draw(invalid_cases), self.scopes[0]["user_id"])

        def identity_keys_in_other_shapes_are_refused(self, data: st.DataObject) -> None:
            http = tenants[data.draw(st.sampled_from(TENANTS))].http
            value = next(iter(data.draw(st.sampled_from(self.scopes)).values()))
            scope = data.draw(st.sampled_from(self.scopes))
            check_identity_elsewhere(http, data.draw(shape_cases), value, scope)

        # --- the rules that drive those checks (by-id calls weigh most) ---------------------

        @precondition(lambda self: self.model)
        @rule(data=st.data())
        def reads_of_one_memory(self, data: st.DataObject) -> None:
            """By-id reads, each of a memory from any scope, asked by any scope or tenant."""
            Counts.rules += 1
            self.by_id(data, [self.get_one, self.history])
            self.unknown_ids_are_404(data)

        @precondition(lambda self: self.model)
        @rule(data=st.data())
        def writes_to_one_memory(self, data: st.DataObject) -> None:
            Counts.rules += 1
            self.by_id(data, [self.update_one, self.update_one, self.delete_one])

        def by_id(self, data: st.DataObject, routes: list[Any]) -> None:
            for _ in range(5):
                if not self.model:
                    return
                self.step()
                Counts.by_id += 1
                data.draw(st.sampled_from(routes))(data)

        @rule(data=st.data())
        def refusals(self, data: st.DataObject) -> None:
            Counts.rules += 1
            self.step()
            check = data.draw(
                st.sampled_from(
                    [self.invalid_ids_are_refused, self.identity_keys_in_other_shapes_are_refused]
                )
            )
            check(data)

        def check_all_lists(self) -> None:
            """Every scope of both tenants lists exactly its memories (at the end of a run)."""
            for tenant in TENANTS:
                for scope in self.scopes:
                    self.step()
                    self.check_list(tenant, scope, {"filters": scope})

        # --- after every step ----------------------------------------------------------

        @invariant()
        def entity_counts_match_the_model(self) -> None:
            if not self.scopes:
                return
            for tenant in TENANTS:
                expected: Counter[tuple[str, str]] = Counter()
                for (t, _), mem in self.model.items():
                    if t == tenant:
                        for k, v in mem.ids().items():
                            expected[(k.removesuffix("_id"), v)] += 1
                assert entity_counts(tenants[tenant].http) == expected

        def teardown(self) -> None:
            if self.scopes:
                self.check_all_lists()

    return Isolation


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~2 min alone; several times that beside other workers on 2 cores
def test_no_scope_sees_or_changes_another(tenants, rss_watch, capsys):
    machine = make_machine(tenants)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25,  # 25 × 40 steps: about 1,000 steps and 2,000 checked calls
            stateful_step_count=40,
            deadline=None,
            derandomize=True,
            database=None,
            # no shrinking: a failure is reported as drawn (every step is printed), within
            # the test's timeout; shrinking a stateful run can take minutes
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    with capsys.disabled():
        print(
            f"\nisolation property: {Counts.examples} examples, {Counts.rules} steps, "
            f"{Counts.calls} checked calls ({Counts.by_id} by id, {Counts.cross_checks} of them "
            f"across scopes or tenants; {Counts.refusals} refusals)"
        )
        print(rss_watch.check("isolation property"))
    assert Counts.rules > 0 and Counts.refusals > 0 and Counts.cross_checks > 0


@given(
    case=invalid_cases,
    shape=shape_cases,
    user=valid_ids,
    scope_key=st.sampled_from(KEYS),
    tenant=st.sampled_from(TENANTS),
)
@settings(max_examples=150, deadline=None, derandomize=True, database=None)
def test_invalid_ids_and_misplaced_identity_keys_are_refused(
    tenants, case, shape, user, scope_key, tenant
):
    """Every refusal on its own, more cases than the state machine reaches; nothing stored."""
    before = [entity_counts(t.http) for t in tenants]
    check_invalid_id(tenants[tenant].http, case, user)
    check_identity_elsewhere(tenants[tenant].http, shape, user, {scope_key: user})
    assert [entity_counts(t.http) for t in tenants] == before


def test_one_tenants_key_opens_nothing_of_the_other(tenants):
    a, b = tenants
    for url in (a.service.url, b.service.url):
        other = b if url == a.service.url else a
        response = httpx.post(
            f"{url}/v3/memories/search/",
            json={"query": "q", "user_id": "u"},
            headers={"Authorization": f"Token {other.service.api_key}"},
        )
        assert response.status_code == 401


def test_the_modules_peak_rss_stays_under_the_default_limit(tenants, rss_watch, capsys):
    """After both property tests above (file order): the whole module's peak."""
    line = rss_watch.check("isolation properties, whole module")
    with capsys.disabled():
        print(f"\n{line}")
