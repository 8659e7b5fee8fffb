"""Ambiguous and oversized requests against the real service, as an attacker sends them.

- A scope or id given twice (`?user_id=alice&user_id=bob`, or a JSON key twice at any depth)
  used to resolve to the last value: `DELETE /v1/memories/?user_id=alice&user_id=bob`
  deleted bob's memories. Every repeated query parameter is now a 422 naming it, every
  repeated JSON key a 400 naming its path, on every route, and nothing is read, written or
  deleted. Generated: random routes, parameters, depths and spellings.
- A chunked body over limits.maxRequestBytes is a 413 (it was FastAPI's 400), over a raw
  socket to the real server.
- Filters (conditions, nesting) and metadata are capped by `limits.*`, refused with 422
  naming the field and the limit; at the limit they pass.
- The issue's request, one search with an OR of 40,000 conditions, against a real
  `memorystore serve`: the process's RSS before and after is printed, and stays put.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.config import Limits
from memorystore.service.ops.runner import ServiceThread, embedded_config, wait_until_ready
from memorystore_dev.devcluster.cluster import free_port
from support.rss import MIB, RssWatch, peak_of, rss_of, service_memory_limit

ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits()
VICTIM, ATTACKER = "bob", "mallory"


@dataclass
class Svc:
    service: ServiceThread
    http: httpx.Client
    victim_id: str
    attacker_id: str


@pytest.fixture(scope="module")
def rss_watch() -> RssWatch:
    return RssWatch()


@pytest.fixture(scope="module")
def svc(tmp_path_factory, rss_watch) -> Iterator[Svc]:
    cfg = embedded_config(Path(tmp_path_factory.mktemp("limits")))
    with ServiceThread(cfg) as service:
        headers = {"Authorization": f"Token {service.api_key}"}
        with httpx.Client(base_url=service.url, headers=headers, timeout=60) as http:
            ids = []
            for user in (VICTIM, ATTACKER):
                added = http.post(
                    "/v3/memories/add/",
                    json={
                        "messages": [{"role": "user", "content": f"{user}'s secret is tea"}],
                        "user_id": user,
                        "infer": False,
                    },
                )
                assert added.status_code == 200, added.text
                ids.append(added.json()["results"][0]["id"])
            yield Svc(service, http, *ids)


def snapshot(http: httpx.Client) -> dict[str, Any]:
    """Everything a refused request must leave as it was: each user's memories, with their
    text, metadata and history, and the entity counts."""
    out: dict[str, Any] = {}
    for user in (VICTIM, ATTACKER):
        rows = http.post("/v3/memories/", json={"user_id": user}).json()["results"]
        for row in rows:
            history = http.get(f"/v1/memories/{row['id']}/history/").json()
            out[row["id"]] = (row["memory"], row.get("metadata"), len(history))
    out["entities"] = http.get("/v1/entities/").json()["results"]
    return out


# --- the cases, by hand --------------------------------------------------------------


def test_an_ambiguous_scope_in_the_query_reads_and_deletes_nothing(svc):
    before = snapshot(svc.http)
    victim = svc.victim_id
    calls = [
        ("DELETE", "/v1/memories/?user_id=mallory&user_id=bob", "user_id"),
        ("GET", f"/v1/memories/{victim}/?user_id=mallory&user_id=bob", "user_id"),
        ("GET", f"/v1/memories/{victim}/history/?user_id=mallory&user_id=bob", "user_id"),
        ("DELETE", f"/v1/memories/{victim}/?user_id=bob&user_id=bob", "user_id"),
        ("DELETE", "/v1/memories/?user_id=bob&agent_id=a&agent_id=b", "agent_id"),
        ("GET", "/v1/entities/?page=1&page=2", "page"),
    ]
    for method, url, name in calls:
        response = svc.http.request(method, url)
        assert response.status_code == 422, (url, response.text)
        assert response.json()["detail"].startswith(f"query.{name}: given more than once")
        assert "secret" not in response.text  # no memory of bob's answered
    put = svc.http.put(f"/v1/memories/{victim}/?user_id=a&user_id=bob", json={"text": "pwned"})
    assert put.status_code == 422 and "query.user_id" in put.json()["detail"]
    assert snapshot(svc.http) == before


def test_an_ambiguous_scope_in_a_body_reads_and_deletes_nothing(svc):
    before = snapshot(svc.http)
    raw = {"content-type": "application/json"}
    for url, text, where in [
        ("/v3/memories/search/", '{"query": "secret", "user_id": "mallory", "user_id": "bob"}',
         "body.user_id"),
        ("/v3/memories/", '{"filters": {"user_id": "mallory", "user_id": "bob"}}',
         "body.filters.user_id"),
        ("/v3/memories/add/",
         '{"messages": [{"role": "user", "content": "x", "content": "y"}], "user_id": "bob"}',
         "body.messages[0].content"),
    ]:  # fmt: skip
        response = svc.http.post(url, content=text.encode(), headers=raw)
        assert response.status_code == 400, response.text
        assert response.json()["detail"].startswith(f"{where}: given twice")
    assert snapshot(svc.http) == before


# --- generated: repeated query parameters on every route that reads one -------------------------

QUERY_ROUTES = [
    ("GET", "/v1/memories/{id}/", ("user_id", "agent_id", "run_id")),
    ("PUT", "/v1/memories/{id}/", ("user_id", "agent_id", "run_id")),
    ("DELETE", "/v1/memories/{id}/", ("user_id", "agent_id", "run_id")),
    ("GET", "/v1/memories/{id}/history/", ("user_id", "agent_id", "run_id")),
    ("DELETE", "/v1/memories/", ("user_id", "agent_id", "run_id")),
    ("GET", "/v1/entities/", ("page", "page_size")),
    ("POST", "/v3/memories/", ("page", "page_size")),
]
values = st.sampled_from([VICTIM, ATTACKER, "1", "2", "100", "*", "", "a b"])


@st.composite
def repeated_queries(draw: st.DrawFn) -> tuple[str, str, str, str]:
    method, path, params = draw(st.sampled_from(QUERY_ROUTES))
    chosen = draw(st.lists(st.sampled_from(params), min_size=1, unique=True))
    twice = draw(st.sampled_from(chosen))
    pairs = [(name, draw(values)) for name in chosen]
    pairs.insert(draw(st.integers(0, len(pairs))), (twice, draw(values)))
    parts = []
    for name, value in pairs:
        if draw(st.booleans()):  # the same name, spelled with every byte percent-encoded
            name = "".join(f"%{b:02X}" for b in name.encode())
        parts.append(f"{name}={quote(value, safe='')}")
    return method, path, "&".join(parts), twice


@given(case=repeated_queries())
@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_generated_repeated_query_parameters_are_refused_naming_them(svc, case):
    method, path, query, name = case
    before = snapshot(svc.http)
    url = path.format(id=svc.victim_id) + "?" + query
    body = {"text": "pwned"} if method == "PUT" else {"user_id": VICTIM} if "v3" in path else None
    response = svc.http.request(method, url, json=body)
    assert response.status_code == 422, (method, url, response.text)
    assert response.json()["detail"].startswith(f"query.{name}: given more than once"), url
    assert snapshot(svc.http) == before


# --- generated: a key given twice at any depth of any route's body ------------------------------


def bodies(svc: Svc) -> list[tuple[str, str, dict[str, Any]]]:
    """A valid body for every route that takes one (the attacker's own scope)."""
    mine, msg = svc.attacker_id, [{"role": "user", "content": "I like green tea"}]
    doc = {
        "format": "memorystore.export/1",
        "scope": {"user_id": ATTACKER},
        "memories": [{"id": str(uuid.uuid4()), "memory": "imported", "user_id": ATTACKER}],
    }
    search = {"AND": [{"user_id": ATTACKER}, {"k": {"in": [1, 2]}}]}
    return [
        ("POST", "/v3/memories/add/", {"messages": msg, "user_id": ATTACKER, "metadata": {"k": 1}}),
        ("POST", "/v1/memories/", {"messages": msg, "user_id": ATTACKER, "infer": False}),
        ("POST", "/v3/memories/search/", {"query": "tea", "filters": search}),
        ("POST", "/v1/recall/", {"query": "tea", "user_id": ATTACKER, "top_k": 5}),
        ("POST", "/v3/memories/", {"filters": {"user_id": ATTACKER}}),
        ("PUT", f"/v1/memories/{mine}/", {"text": "new", "metadata": {"a": {"b": [1, {"c": 2}]}}}),
        ("PUT", "/v1/batch/", {"memories": [{"memory_id": mine, "text": "changed"}]}),
        ("DELETE", "/v1/batch/", {"memories": [{"memory_id": mine}]}),
        ("POST", "/v1/exports/", {"schema": {"type": "object"}, "user_id": ATTACKER}),
        ("POST", "/v1/exports/get/", {"filters": {"user_id": ATTACKER}}),
        ("POST", "/v1/imports/", doc),
        ("POST", "/v1/sessions/s1/exchanges/", {"messages": msg, "user_id": ATTACKER}),
        ("POST", "/v1/sessions/s1/end/", {"user_id": ATTACKER, "wait": True}),
        ("POST", "/v1/backups/", {"name": "b1"}),
    ]


def with_pairs(value: Any) -> Any:
    """A JSON value with every object as a list of [key, value] pairs (so keys can repeat)."""
    if isinstance(value, dict):
        return PairList([k, with_pairs(v)] for k, v in value.items())
    if isinstance(value, list):
        return [with_pairs(v) for v in value]
    return value


class PairList(list[Any]):
    pass


def dumps(value: Any) -> str:
    if isinstance(value, PairList):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value)


def objects(value: Any, path: list[Any]) -> Iterator[tuple[PairList, list[Any]]]:
    if isinstance(value, PairList):
        yield value, path
        for k, v in value:
            yield from objects(v, [*path, k])
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from objects(v, [*path, i])


hostile = st.one_of(
    st.sampled_from([VICTIM, "*", None, {"$ne": "x"}, [VICTIM], "changed", 100]), st.text()
)


@given(data=st.data())
@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_generated_duplicate_keys_are_refused_naming_their_path(svc, data):
    method, url, body = data.draw(st.sampled_from(bodies(svc)))
    tree = with_pairs(body)
    target, path = data.draw(st.sampled_from(list(objects(tree, []))))
    names = [k for k, _ in target]
    if names and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(names))
    else:
        key = data.draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in names))
        target.insert(data.draw(st.integers(0, len(target))), [key, data.draw(hostile)])
    target.insert(data.draw(st.integers(0, len(target))), [key, data.draw(hostile)])
    before = snapshot(svc.http)
    response = svc.http.request(
        method, url, content=dumps(tree).encode(), headers={"content-type": "application/json"}
    )
    where = "body" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in [*path, key])
    assert response.status_code == 400, (url, dumps(tree), response.text)
    assert response.json()["detail"].startswith(f"{where}: given twice"), response.text
    assert snapshot(svc.http) == before


# --- size ------------------------------------------------------------------------------------


def raw_request(url: str, head: bytes, chunks: Iterator[bytes]) -> tuple[int, bytes]:
    """Send a request over a plain socket, chunk by chunk; the status and body answered
    (the server may answer and stop reading before the body is complete)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(head)
        try:
            for chunk in chunks:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the end: the answer is waiting
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer) < answer.index(b"\r\n\r\n") + 4 + int(
            _header(answer, b"content-length") or 0
        ):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    status = int(answer.split(b" ", 2)[1])
    return status, answer.split(b"\r\n\r\n", 1)[1]


def _header(answer: bytes, name: bytes) -> bytes | None:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def test_a_chunked_body_over_the_limit_is_413_and_under_it_is_served(svc):
    key = svc.service.api_key
    head = (
        b"POST /v3/memories/add/ HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\n"
        b"Authorization: Token %s\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ) % key.encode()
    filler = b" " * 65536  # JSON whitespace: the body would be valid if it were allowed
    chunks = iter([b'{"user_id": "mallory", "messages": [{"role": "user", "content": "x"}]'])
    big = (c for part in (chunks, iter([filler] * 20), iter([b"}"])) for c in part)
    before = snapshot(svc.http)
    status, body = raw_request(svc.service.url, head, big)
    assert status == 413, body
    assert json.loads(body) == {
        "detail": f"request body exceeds limits.maxRequestBytes ({LIMITS.max_request_bytes} bytes)"
    }
    assert snapshot(svc.http) == before
    small = [b'{"user_id": "mallory", ', b'"infer": false, ', b'"messages": [{"role": "user", ']
    small += [b'"content": "chunked, and whole"}]}']
    status, body = raw_request(svc.service.url, head, iter(small))
    assert status == 200, body
    assert json.loads(body)["results"][0]["memory"] == "chunked, and whole"


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"topic": "x"}
    for i in range(depth):
        node = {("AND", "OR", "NOT")[i % 3]: [node]}
    return node


def conditions(n: int) -> dict[str, Any]:
    return {"OR": [{"color": {"eq": f"v{i}"}} for i in range(n)]}


FILTER_ROUTES = [
    ("/v3/memories/search/", {"query": "tea", "user_id": ATTACKER}),
    ("/v1/recall/", {"query": "tea", "user_id": ATTACKER}),
    ("/v1/exports/", {"schema": {}, "user_id": ATTACKER}),
    ("/v1/exports/get/", {"user_id": ATTACKER}),
]


@pytest.mark.parametrize(("url", "body"), FILTER_ROUTES, ids=[u for u, _ in FILTER_ROUTES])
def test_filters_are_capped_in_conditions_and_depth(svc, url, body):
    n, depth = LIMITS.max_filter_conditions, LIMITS.max_filter_depth
    http = svc.http
    too_many = http.post(url, json={**body, "filters": conditions(n + 1)})
    assert too_many.status_code == 422, too_many.text
    assert too_many.json()["detail"].startswith(
        f"filters: more than limits.maxFilterConditions ({n}) conditions"
    )
    in_lists = http.post(url, json={**body, "filters": {"color": {"in": list(range(n + 1))}}})
    assert in_lists.status_code == 422 and "maxFilterConditions" in in_lists.json()["detail"]
    too_deep = http.post(url, json={**body, "filters": nested(depth + 1)})
    assert too_deep.status_code == 422, too_deep.text
    detail = too_deep.json()["detail"]
    assert f"nested deeper than limits.maxFilterDepth ({depth})" in detail
    assert detail.startswith("filters." + "[0].".join(("AND", "OR", "NOT")[i % 3] for i in
                                                       reversed(range(depth + 1))))  # fmt: skip
    if "exports" in url:
        return  # an export holds a whole scope: any metadata filter is refused anyway
    for fine in (conditions(n), nested(depth)):
        at_limit = http.post(url, json={**body, "filters": fine})
        assert at_limit.status_code == 200, at_limit.text


def test_metadata_is_capped_wherever_it_is_written(svc):
    cap = LIMITS.max_metadata_bytes
    over = {"note": "x" * cap}  # the key and quotes make it larger than the cap
    exact = {"n": "é" * ((cap - len('{"n":""}')) // 2)}  # 2 bytes a character in UTF-8
    assert len(json.dumps(exact, ensure_ascii=False, separators=(",", ":")).encode()) <= cap
    http, mine = svc.http, svc.attacker_id
    msg = [{"role": "user", "content": "metadata test"}]
    doc = {
        "format": "memorystore.export/1",
        "scope": {"user_id": ATTACKER},
        "memories": [
            {"id": str(uuid.uuid4()), "memory": "m", "user_id": ATTACKER, "metadata": over}
        ],
    }
    before = snapshot(http)
    for method, url, body, field in [
        ("POST", "/v3/memories/add/", {"messages": msg, "user_id": ATTACKER, "metadata": over},
         "metadata"),
        ("POST", "/v1/sessions/s2/exchanges/",
         {"messages": msg, "user_id": ATTACKER, "metadata": over}, "metadata"),
        ("PUT", f"/v1/memories/{mine}/", {"metadata": over}, "metadata"),
        ("PUT", "/v1/batch/", {"memories": [{"memory_id": mine, "metadata": over}]},
         "memories[0].metadata"),
        ("POST", "/v1/imports/", doc, "memories[0].metadata"),
    ]:  # fmt: skip
        response = http.request(method, url, json=body)
        assert response.status_code == 422, (url, response.text)
        detail = response.json()["detail"]
        assert detail.startswith(f"{field}: ") and f"limits.maxMetadataBytes ({cap})" in detail
    assert snapshot(http) == before
    added = http.post(
        "/v3/memories/add/",
        json={"messages": msg, "user_id": "meta-ok", "metadata": exact, "infer": False},
    )
    assert added.status_code == 200, added.text
    stored = http.get(f"/v1/memories/{added.json()['results'][0]['id']}/").json()
    assert stored["metadata"]["n"] == exact["n"]
    http.delete("/v1/memories/", params={"user_id": "meta-ok"})


def test_the_peak_rss_of_this_module_stays_under_the_default_limit(svc, rss_watch, capsys):
    """Runs after the generated tests above (pytest keeps file order)."""
    line = rss_watch.check("request limits (in-process service)")
    with capsys.disabled():
        print(f"\n{line}")


# --- the request against a real `memorystore serve` ------------------------------------


@pytest.mark.slow
def test_an_or_of_40000_conditions_leaves_the_service_as_it_was(tmp_path, capsys):
    port = free_port()
    env = {
        **os.environ,
        "MEMORYSTORE_DATA_DIR": str(tmp_path / "data"),
        "MEMORYSTORE_PORT": str(port),
        "MEMORYSTORE_API_KEY": "k",
    }
    config = str(ROOT / "examples/service.yaml")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memorystore", "serve", "--config", config],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, proc)
        with httpx.Client(base_url=url, headers={"Authorization": "Token k"}, timeout=300) as http:
            for i in range(20):
                body = {
                    "messages": [{"role": "user", "content": f"I like colour {i}"}],
                    "user_id": "alice",
                    "metadata": {"color": f"v{i}"},
                    "infer": False,
                }
                assert http.post("/v3/memories/add/", json=body).status_code == 200
            for _ in range(5):  # warm: the search path's first allocations
                warm = {"query": "colour", "user_id": "alice", "filters": {"color": "v1"}}
                assert http.post("/v3/memories/search/", json=warm).status_code == 200
            before, peak_before = rss_of(proc.pid), peak_of(proc.pid)
            text = json.dumps(
                {"query": "colour", "user_id": "alice", "filters": conditions(40_000)},
                separators=(",", ":"),
            )
            assert len(text) < LIMITS.max_request_bytes  # under the body cap: the filter cap acts
            response = http.post(
                "/v3/memories/search/",
                content=text.encode(),
                headers={"content-type": "application/json"},
            )
            after, peak_after = rss_of(proc.pid), peak_of(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    with capsys.disabled():
        print(
            f"\nOR of 40,000 conditions ({len(text) / 1024:.0f} KiB) to a real `memorystore "
            f"serve`: {response.status_code}; RSS {before / MIB:.0f} -> {after / MIB:.0f} MiB "
            f"(kept {(after - before) / MIB:+.0f}), peak {peak_before / MIB:.0f} -> "
            f"{peak_after / MIB:.0f} MiB; default limit {service_memory_limit() / MIB:.0f} MiB"
        )
    assert response.status_code == 422 and "maxFilterConditions" in response.json()["detail"]
    assert peak_after < service_memory_limit()
    # measured before the cap: +63 MiB kept and +124 MiB at the peak; with it about +3 / +18
    assert peak_after - before < 64 * MIB
