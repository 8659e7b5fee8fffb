"""The request guard as an attacker meets it: duplicated JSON keys at any depth, spelled any
way JSON allows; repeated query parameters, however encoded; oversized bodies, declared or
streamed. Each is refused naming what is wrong, and the app behind never sees the request;
everything else reaches the app byte for byte."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.service.ops.request_guard import RequestGuard, duplicate_key, repeated_parameter

LIMIT = 4096


@dataclass
class Recorder:
    """An ASGI app that keeps what reached it and answers 200."""

    seen: list[tuple[str, bytes]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.seen.append((scope["query_string"].decode(), body))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def guarded() -> Iterator[tuple[httpx.AsyncClient, Recorder]]:
    app = Recorder()
    transport = httpx.ASGITransport(app=RequestGuard(app, LIMIT))
    yield httpx.AsyncClient(transport=transport, base_url="http://svc"), app


JSON = {"content-type": "application/json"}


# --- generated JSON with one key given twice, at a random depth -----------------------------


@dataclass
class Obj:
    pairs: list[tuple[str, Any]]


keys = st.text(max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))


def _obj(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Obj]:
    return st.dictionaries(keys, children, max_size=4).map(lambda d: Obj(list(d.items())))


trees = st.recursive(
    st.one_of(scalars, _obj(scalars)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), _obj(inner)),
    max_leaves=20,
)


class Escaped(str):
    """A key written with every character as a \\u escape: the same key, spelled otherwise."""


def dumps(node: Any) -> str:
    """JSON text of a tree whose objects may repeat keys."""
    if isinstance(node, Obj):
        parts = []
        for key, value in node.pairs:
            text = json.dumps(key)
            if isinstance(key, Escaped):
                text = '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else c for c in key)
                text += '"'
            parts.append(f"{text}:{dumps(value)}")
        return "{" + ",".join(parts) + "}"
    if isinstance(node, list):
        return "[" + ",".join(dumps(item) for item in node) + "]"
    return json.dumps(node)


def objects(node: Any, path: list[str | int]) -> Iterator[tuple[Obj, list[str | int]]]:
    if isinstance(node, Obj):
        yield node, path
        for key, value in node.pairs:
            yield from objects(value, [*path, key])
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from objects(item, [*path, i])


@st.composite
def with_duplicate(draw: st.DrawFn) -> tuple[str, list[str | int]]:
    """JSON text with exactly one key given twice in one object, and that key's path."""
    root = draw(_obj(trees))
    target, path = draw(st.sampled_from(list(objects(root, []))))
    if target.pairs and draw(st.booleans()):
        key = draw(st.sampled_from([k for k, _ in target.pairs]))
    else:
        key = draw(keys.filter(lambda k: k not in {k2 for k2, _ in target.pairs}))
        target.pairs.insert(draw(st.integers(0, len(target.pairs))), (key, draw(scalars)))
    again = Escaped(key) if draw(st.booleans()) else key
    target.pairs.insert(draw(st.integers(0, len(target.pairs))), (again, draw(trees)))
    return dumps(root), [*path, key]


def dotted(path: list[str | int]) -> str:
    return "body" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


@given(case=with_duplicate())
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_a_key_given_twice_anywhere_is_found_with_its_path(case):
    text, path = case
    assert duplicate_key(text) == path
    assert duplicate_key(text.encode()) == path


@given(tree=_obj(trees))
@settings(max_examples=200, deadline=None, derandomize=True, database=None)
def test_json_without_a_repeated_key_passes(tree):
    assert duplicate_key(dumps(tree)) is None


async def test_the_guard_refuses_a_duplicate_key_naming_it_and_the_app_sees_nothing(guarded):
    http, app = guarded
    cases: list[tuple[str, list[str | int]]] = []

    @given(case=with_duplicate())
    @settings(max_examples=100, deadline=None, derandomize=True, database=None)
    def collect(case: tuple[str, list[str | int]]) -> None:
        cases.append(case)  # drawn here, sent below: hypothesis runs sync, the client is async

    collect()
    assert len(cases) >= 50
    for text, path in cases:
        response = await http.post("/v3/memories/add/", content=text.encode(), headers=JSON)
        assert response.status_code == 400, (text, response.text)
        body = response.json()
        assert body["detail"].startswith(f"{dotted(path)}: given twice"), (path, body)
        assert body["errors"] == [
            {"loc": ["body", *map(str, path)], "msg": "given twice", "type": "duplicate_key"}
        ]
    assert app.seen == []


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"user_id": "alice", "user_id": "bob"}', "body.user_id"),
        ('{"metadata": {"color": "red", "color": "blue"}}', "body.metadata.color"),
        (
            '{"filters": {"OR": [{"a": 1}, {"b": {"in": [1], "in": [2]}}]}}',
            "body.filters.OR[1].b.in",
        ),
        ('{"memories": [{}, {"memory_id": "x", "memory_id": "y"}]}', "body.memories[1].memory_id"),
        ('{"a": 1, "\\u0061": 2}', "body.a"),  # the same key, escaped
        ('{"\\ud800": 1, "\\ud800": 2}', "body.\\ud800"),  # a lone surrogate, echoed escaped
    ],
)
async def test_hand_picked_duplicates(guarded, text, where):
    http, app = guarded
    response = await http.post("/x", content=text.encode(), headers=JSON)
    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"{where}: given twice")
    assert app.seen == []


@pytest.mark.parametrize(
    "content_type",
    [None, "application/json", "application/json; charset=utf-8", "application/problem+json"],
)
async def test_every_body_fastapi_reads_as_json_is_checked(guarded, content_type):
    http, app = guarded
    headers = {"content-type": content_type} if content_type else {}
    response = await http.post("/x", content=b'{"a":1,"a":2}', headers=headers)
    assert response.status_code == 400, response.text
    assert app.seen == []


async def test_other_bodies_and_non_json_reach_the_app_unchanged(guarded):
    http, app = guarded
    for content, headers in (
        (b'{"a":1,"a":2}', {"content-type": "text/plain"}),  # not read as JSON by FastAPI
        (b"{not json", JSON),  # FastAPI answers its own 422
        ('{"k": "ünïcode 用户", "n": [1, {"m": null}]}'.encode(), JSON),
        (b"", {}),
    ):
        response = await http.post("/x?a=1&b=2", content=content, headers=headers)
        assert response.status_code == 200
        assert app.seen[-1] == ("a=1&b=2", content)


async def test_nesting_past_the_parser_is_a_400(guarded):
    http, app = guarded
    response = await http.post("/x", content=b"[" * 1500 + b"]" * 1500, headers=JSON)
    assert response.status_code == 400 and "nested too deeply" in response.json()["detail"]
    assert app.seen == []


# --- repeated query parameters -------------------------------------------------------------

names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=10)
values = st.text(st.characters(exclude_categories=("Cs",)), max_size=10)


def spelled(name: str, every: bool) -> str:
    """`name` percent-encoded as a client may: only what must be, or every byte."""
    if every:
        return "".join(f"%{b:02X}" for b in name.encode())
    return quote(name, safe="")


@given(
    pairs=st.lists(st.tuples(names, values), max_size=5, unique_by=lambda p: p[0]),
    name=names,
    first=values,
    second=values,
    every=st.booleans(),
    at=st.integers(0, 5),
)
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_a_repeated_parameter_is_found_however_it_is_spelled(pairs, name, first, second, every, at):
    pairs = [(n, v) for n, v in pairs if n != name]
    parts = [urlencode([pair]) for pair in pairs]
    parts.insert(min(at, len(parts)), f"{quote(name, safe='')}={quote(first, safe='')}")
    parts.append(f"{spelled(name, every)}={quote(second, safe='')}")
    assert repeated_parameter("&".join(parts).encode("latin-1")) == name


@given(pairs=st.lists(st.tuples(names, values), max_size=6, unique_by=lambda p: p[0]))
@settings(max_examples=200, deadline=None, derandomize=True, database=None)
def test_distinct_parameters_pass(pairs):
    assert repeated_parameter(urlencode(pairs).encode("latin-1")) is None


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("user_id=alice&user_id=bob", "user_id"),
        ("user_id=alice&user%5Fid=bob", "user_id"),
        ("user_id=alice&agent_id=a&user_id=alice", "user_id"),  # even the same value twice
        ("page=1&page=2", "page"),
        ("run_id&run_id=", "run_id"),
    ],
)
async def test_the_guard_refuses_a_repeated_parameter_naming_it(guarded, query, name):
    http, app = guarded
    response = await http.delete(f"/v1/memories/?{query}")
    assert response.status_code == 422
    body = response.json()
    assert body["detail"].startswith(f"query.{name}: given more than once")
    assert body["errors"] == [
        {"loc": ["query", name], "msg": "given more than once", "type": "repeated"}
    ]
    assert app.seen == []


# --- size ------------------------------------------------------------------------------------


async def test_declared_and_streamed_bodies_over_the_limit_are_413(guarded):
    http, app = guarded
    response = await http.post("/x", content=b"x" * (LIMIT + 1))
    assert response.status_code == 413 and "maxRequestBytes" in response.json()["detail"]

    async def chunks() -> Any:
        for _ in range(LIMIT // 100 + 2):
            yield b"y" * 100

    streamed = await http.post("/x", content=chunks())
    assert streamed.status_code == 413 and str(LIMIT) in streamed.json()["detail"]
    assert app.seen == []

    async def small() -> Any:
        for _ in range(3):
            yield b'{"a":1}'[:3]

    assert (
        await http.post("/x", content=small(), headers={"content-type": "text/plain"})
    ).status_code == 200
    assert app.seen == [("", b'{"a{"a{"a')]
