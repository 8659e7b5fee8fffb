"""Where a request's scope comes from, and the one id grammar: every refusal names its field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memorystore.scope import EntityIds, InvalidId, ScopeError, id_problem, split_scope
from memorystore.service.api.schemas import SearchRequest, check_metadata, json_problem
from memorystore.service.app import create_app
from memorystore.service.ops.runner import embedded_config

# Valid, however hostile they look: ids are literal strings, matched exactly.
LITERAL_IDS = [
    "alice",
    "Alice",
    "alice2",
    "$ne",
    '{"$ne":1}',
    "%",
    "alice%",
    ".*",
    "**",
    "a*",
    "project:x",
    "用户一",
    "مرحبا",
    "🙂",
    "e\u0301",  # é decomposed: a different id from "é"
    "é",
    "x" * 256,
    "';DROP_TABLE_memories;--",
]
# (value, what the refusal says)
INVALID_IDS = [
    ('{"$ne": 1}', "whitespace"),
    ("", "must not be empty"),
    ("*", "'\\*' is not an id"),
    ("x" * 257, "at most 256 characters"),
    (" alice", "whitespace"),
    ("alice ", "whitespace"),
    ("al ice", "whitespace"),
    ("a\tb", "whitespace"),
    ("a\u00a0b", "whitespace"),
    ("a\u3000b", "whitespace"),
    ("a\nb", "whitespace"),
    ("a\x00b", "control"),
    ("a\x7fb", "control"),
    ("a\u200bb", "format"),
    ("\u202eevil", "format"),
    ("a\ufeff", "format"),
    ("a\ud800", "surrogate"),
    (5, "must be a string, not a number"),
    (True, "must be a string, not a boolean"),
    (None, "must be a string, not null"),
    (["a"], "must be a string, not an array"),
    ({"$ne": "a"}, "must be a string, not an object"),
]


def req(**kw) -> SearchRequest:
    return SearchRequest(query="q", **kw)


@pytest.mark.parametrize("value", LITERAL_IDS)
def test_hostile_looking_ids_are_literals(value):
    assert id_problem(value) is None
    assert EntityIds(user_id=value).filters() == {"user_id": value}
    assert split_scope(req(), {"AND": [{"agent_id": value}]})[0] == EntityIds(agent_id=value)


@pytest.mark.parametrize(("value", "reason"), INVALID_IDS)
def test_invalid_ids_are_refused_everywhere_naming_the_field(value, reason):
    assert id_problem(value) is not None
    if value is not None:  # None is "not given" to EntityIds
        with pytest.raises(InvalidId, match=f"^run_id: .*{reason}"):
            EntityIds(run_id=value)  # the engine's own check, whatever the caller did
    with pytest.raises(ScopeError, match=f"^filters.user_id: .*{reason}"):
        split_scope(req(), {"user_id": value})
    with pytest.raises(ScopeError, match=rf"^filters.AND\[1\].agent_id: .*{reason}"):
        split_scope(req(), {"AND": [{"user_id": "u"}, {"agent_id": value}]})


def test_scope_from_filters_and_top_level():
    scope, rest = split_scope(req(user_id="u"), {"agent_id": "a", "topic": "x"})
    assert scope == EntityIds(user_id="u", agent_id="a")
    assert rest == {"topic": "x"}


def test_scope_from_and_list_keeps_other_conditions():
    filters = {"AND": [{"user_id": "u"}, {"run_id": "r"}, {"category": {"eq": "food"}}]}
    scope, rest = split_scope(req(), filters)
    assert scope == EntityIds(user_id="u", run_id="r")
    assert rest == {"AND": [{"category": {"eq": "food"}}]}


def test_metadata_filters_keep_every_other_shape():
    filters = {
        "user_id": "u",
        "OR": [{"topic": "a"}, {"topic": {"in": ["b", "c"]}}],
        "NOT": [{"actor_id": "bot"}],
        "date": {"gte": "2024-01-01"},
    }
    scope, rest = split_scope(req(), filters)
    assert scope == EntityIds(user_id="u")
    assert rest == {k: v for k, v in filters.items() if k != "user_id"}


def test_an_agent_only_scope_contains_no_user_memory():
    agent = EntityIds(agent_id="planner")
    assert agent.contains({"agent_id": "planner"})
    assert agent.contains({"agent_id": "planner", "user_id": None})
    assert not agent.contains({"agent_id": "planner", "user_id": "alice"})
    assert EntityIds(user_id="alice").contains({"agent_id": "planner", "user_id": "alice"})
    assert not EntityIds(user_id="alice").contains({"user_id": "alice2"})
    assert not EntityIds(run_id="r").contains({"run_id": "r", "user_id": "*"})
    assert not EntityIds().contains({})


@pytest.mark.parametrize(
    ("body", "filters", "message"),
    [
        ({}, None, "a scope is required"),
        ({}, {"topic": "x"}, "a scope is required"),
        ({"user_id": "u"}, {"user_id": "v"}, "^filters.user_id: user_id is given twice"),
        ({}, {"user_id": "u", "AND": [{"user_id": "v"}]}, r"^filters.AND\[0\].user_id: .*twice"),
        # identity keys in any other shape: refused, naming the path
        ({}, {"user_id": {"ne": "u"}}, "^filters.user_id: must be a string"),
        ({}, {"user_id": "u", "OR": [{"user_id": "v"}]}, r"^filters.OR\[0\].user_id: "),
        ({}, {"agent_id": "a", "NOT": [{"user_id": "v"}]}, r"^filters.NOT\[0\].user_id: "),
        ({}, {"user_id": "u", "$or": [{"run_id": "r"}]}, r"^filters.\$or\[0\].run_id: "),
        ({}, {"AND": [{"user_id": "u", "topic": "x"}]}, r"^filters.AND\[0\].user_id: "),
        ({}, {"user_id": "u", "AND": [{"OR": [{"agent_id": "a"}]}]}, r"AND\[0\].OR\[0\].agent_id"),
        ({}, {"user_id": "u", "topic": {"user_id": "v"}}, "^filters.topic.user_id: "),
        ({}, {"user_id": "u", "AND": {"user_id": "v"}}, "^filters.AND: must be a list of obj"),
        # mem0's search assumed objects here (a 500 on its path): the shape is checked first
        ({}, {"user_id": "u", "AND": [1]}, "^filters.AND: must be a list of objects"),
        ({}, {"user_id": "u", "OR": ["x"]}, "^filters.OR: must be a list of objects"),
        ({}, {"user_id": "u", "$not": "x"}, r"^filters.\$not: must be a list of objects"),
    ],
)
def test_bad_scopes_are_refused_with_the_reason(body, filters, message):
    with pytest.raises(ScopeError, match=message):
        split_scope(req(**body), filters)


RESERVED = "user_id agent_id run_id actor_id role data hash created_at updated_at"
RESERVED += " text_lemmatized prev_id index_version attributed_to expiration_date id"


@pytest.mark.parametrize("key", RESERVED.split())
def test_metadata_may_not_set_identity_or_internal_keys(key):
    with pytest.raises(ScopeError, match=f"^metadata.{key}: reserved"):
        check_metadata({"topic": "ui", key: "x"})


def test_ordinary_metadata_passes():
    check_metadata({"topic": "ui", "date": "2024-05-01", "nested": {"user_id": "x"}})
    check_metadata(None)


def test_json_too_deep_or_with_lone_surrogates_is_named():
    deep: object = "x"
    for _ in range(40):
        deep = {"a": deep}
    assert json_problem({"metadata": deep}, "").startswith("metadata.a.a.a")
    assert "nested deeper than 32" in json_problem({"metadata": deep}, "")
    assert json_problem({"q": ["ok", "bad\ud800"]}, "") == (
        "q[1]: contains a lone surrogate (not valid Unicode text)"
    )
    assert json_problem({"k\udfff": 1}, "").startswith("k\\udfff: contains a lone surrogate")
    assert json_problem({"emoji": "🙂", "nested": [[{"a": 1}]]}, "") is None
    assert json_problem({"m": {"x": float("nan")}}, "") == "m.x: nan is not a JSON number"
    assert json_problem({"f": [float("-inf")]}, "") == "f[0]: -inf is not a JSON number"


# --- the same refusals over HTTP, on the real app: status code and field named ------------

MEMORY = "00000000-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> Iterator[TestClient]:
    cfg = embedded_config(Path(tmp_path_factory.mktemp("svc")))
    key = cfg.api_key.resolve("apiKey").get_secret_value()
    with TestClient(create_app(cfg), headers={"Authorization": f"Token {key}"}) as http:
        added = http.post(
            "/v3/memories/add/",
            json={"messages": [{"role": "user", "content": "seeded fact"}], "user_id": "seed"},
        )
        assert added.status_code == 200, added.text
        yield http


def deep(levels: int) -> object:
    value: object = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


def search(**body) -> tuple[str, str, dict]:
    return "post", "/v3/memories/search/", {"json": {"query": "q", **body}}


def scoped_call(method: str, path: str, **params) -> tuple[str, str, dict]:
    extra = {"json": {"text": "new"}} if method == "put" else {}
    return method, path, {"params": params, **extra}


def raw(path: str, body: str) -> tuple[str, str, dict]:
    headers = {"content-type": "application/json"}
    return "post", path, {"content": body.encode(), "headers": headers}


def add(**body) -> tuple[str, str, dict]:
    messages = [{"role": "user", "content": "x"}]
    return "post", "/v3/memories/add/", {"json": {"messages": messages, **body}}


LONE_IN_TEXT = '{"messages":[{"role":"user","content":"\\ud800"}],"user_id":"u"}'
NAN_IN_METADATA = '{"messages":[{"role":"user","content":"x"}],"user_id":"u","metadata":{"n":NaN}}'
LONE_IN_KEY = '{"query":"q","user_id":"u","filters":{"t\\udc00":1}}'
REFUSALS = [
    # body ids: pydantic, 422
    (search(user_id="*"), 422, "body.user_id: '*' is not an id"),
    (search(user_id=""), 422, "body.user_id: "),
    (search(user_id=" alice"), 422, "body.user_id: must not contain whitespace"),
    (search(agent_id="a\u200bb"), 422, "body.agent_id: must not contain a format"),
    (search(run_id="a\x00"), 422, "body.run_id: must not contain a control"),
    (search(user_id=5), 422, "body.user_id: "),
    (search(user_id={"$ne": 1}), 422, "body.user_id: "),
    (search(user_id="x" * 257), 422, "body.user_id: "),
    (add(user_id="*"), 422, "body.user_id: '*' is not an id"),
    (("post", "/v1/recall/", {"json": {"query": "q", "user_id": "*"}}), 422, "body.user_id"),
    (("post", "/v3/memories/", {"json": {"agent_id": "*"}}), 422, "body.agent_id"),
    # filter ids: 400
    (search(filters={"user_id": "*"}), 400, "filters.user_id: '*' is not an id"),
    (search(filters={"user_id": None}), 400, "filters.user_id: must be a string, not null"),
    (search(filters={"user_id": {"$ne": "x"}}), 400, "filters.user_id: must be a string"),
    (search(filters={"user_id": ["a", "b"]}), 400, "filters.user_id: must be a string"),
    (search(filters={"AND": [{"user_id": "*"}]}), 400, "filters.AND[0].user_id: '*'"),
    (search(filters={"AND": [{"user_id": "a", "t": 1}]}), 400, "filters.AND[0].user_id: "),
    (search(filters={"user_id": "a", "OR": [{"user_id": "b"}]}), 400, "filters.OR[0].user_id"),
    (search(filters={"agent_id": "a", "NOT": [{"user_id": "b"}]}), 400, "filters.NOT[0].user_id"),
    (search(user_id="a", filters={"user_id": "b"}), 400, "filters.user_id: user_id is given twice"),
    (
        ("post", "/v3/memories/", {"json": {"filters": {"run_id": "a b"}}}),
        400,
        "filters.run_id: must not contain whitespace",
    ),
    (
        ("post", "/v1/recall/", {"json": {"query": "q", "filters": {"user_id": "*"}}}),
        400,
        "filters.user_id: '*'",
    ),
    # query-parameter ids: given empty or invalid is refused, never read as absent
    (scoped_call("get", f"/v1/memories/{MEMORY}/", user_id=""), 422, "query.user_id: "),
    (scoped_call("get", f"/v1/memories/{MEMORY}/", user_id="*"), 422, "query.user_id: '*'"),
    (scoped_call("put", f"/v1/memories/{MEMORY}/", agent_id="a b"), 422, "query.agent_id: "),
    (scoped_call("delete", f"/v1/memories/{MEMORY}/", run_id="\x00"), 422, "query.run_id: "),
    (scoped_call("get", f"/v1/memories/{MEMORY}/history/", user_id="*"), 422, "query.user_id"),
    (scoped_call("delete", "/v1/memories/", user_id="*"), 422, "query.user_id: '*' is not an id"),
    (scoped_call("delete", "/v1/memories/", user_id=""), 422, "query.user_id: "),
    (scoped_call("delete", "/v1/memories/", agent_id="\u202e"), 422, "query.agent_id: "),
    (scoped_call("delete", "/v1/memories/"), 400, "a scope is required"),
    (("delete", "/v2/entities/user/*/", {}), 422, "path.name: '*' is not an id"),
    (("delete", "/v2/entities/user/a%20b/", {}), 422, "path.name: must not contain whitespace"),
    (("delete", "/v2/entities/agent/%E2%80%8B/", {}), 422, "path.name: must not contain a format"),
    # metadata cannot set the scope or the service's own keys: refused, not dropped
    (add(user_id="u", metadata={"user_id": "seed"}), 400, "metadata.user_id: reserved"),
    (add(user_id="u", metadata={"role": "system"}), 400, "metadata.role: reserved"),
    (add(user_id="u", metadata={"prev_id": MEMORY}), 400, "metadata.prev_id: reserved"),
    (
        ("put", f"/v1/memories/{MEMORY}/", {"json": {"metadata": {"agent_id": "x"}}}),
        400,
        "metadata.agent_id: reserved",
    ),
    # bounded paging
    (
        ("post", "/v3/memories/", {"params": {"page": 101, "page_size": 100}, "json": {}}),
        422,
        "page: page × page_size may not exceed limits.maxListWindow (10000)",
    ),
    (("get", "/v1/entities/", {"params": {"page_size": 101}}), 422, "page_size must be at most"),
    (("get", "/v1/entities/", {"params": {"page": 0}}), 422, "query.page: "),
    # what the store could not read back, or store at all
    (add(user_id="u", metadata=deep(40)), 422, "body: metadata.a.a.a"),
    (search(user_id="u", filters={"OR": [deep(40)]}), 422, "body: filters.OR[0].a.a"),
    (raw("/v3/memories/add/", LONE_IN_TEXT), 422, "body: messages[0].content: contains a lone"),
    (raw("/v3/memories/search/", LONE_IN_KEY), 422, "body: filters.t\\udc00: contains a lone"),
    (raw("/v3/memories/add/", NAN_IN_METADATA), 422, "body: metadata.n: nan is not a JSON number"),
]


@pytest.mark.parametrize(("call", "status", "needle"), REFUSALS)
def test_refusals_name_the_field_and_change_nothing(client, call, status, needle):
    method, path, kwargs = call
    response = client.request(method.upper(), path, **kwargs)
    assert response.status_code == status, response.text
    assert needle in response.json()["detail"]
    listed = client.post("/v3/memories/", json={"filters": {"user_id": "seed"}})
    assert [m["memory"] for m in listed.json()["results"]] == ["seeded fact"]


@pytest.mark.parametrize("value", LITERAL_IDS)
def test_literal_ids_are_accepted_and_match_nothing_else(client, value):
    for body in ({"user_id": value}, {"filters": {"agent_id": value}}):
        response = client.post("/v3/memories/search/", json={"query": "seeded fact", **body})
        assert response.status_code == 200, response.text
        assert response.json()["results"] == []
    assert client.get(f"/v1/memories/{MEMORY}/", params={"run_id": value}).status_code == 404
    path = "/v2/entities/user/" + value.replace("%", "%25").replace("/", "%2F") + "/"
    if "/" not in value:  # a slash cannot be one path segment
        assert client.delete(path).json()["deleted"] == 0


def test_docs_are_off_unless_configured(client, tmp_path):
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert client.get(path).status_code == 404
    assert "/v3/memories/search/" in client.app.openapi()["paths"]  # still built in-process
    cfg = embedded_config(tmp_path / "docs", apiDocs=True)
    with TestClient(create_app(cfg)) as docs:
        schema = docs.get("/openapi.json")
        assert schema.status_code == 200
        assert "/v1/entities/" in json.loads(schema.text)["paths"]
        assert docs.get("/docs").status_code == 200
