"""The bulk add (`POST /v1/memories/bulk/`) on a real service: progress after each chunk,
stored as one add of all the messages would store them, the whole request checked before
anything is stored, its own body bound, and a stop mid-way that says where it stopped."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from memorystore.config import Limits
from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.service.retrieval.indexing import PREV_KEY

CHUNK = 20  # limits.maxMessages here: progress after every 20 messages
LIMITS = Limits(max_messages=CHUNK, max_bulk_messages=500, max_bulk_bytes=4 * 1_048_576)


@pytest.fixture(scope="module")
def svc(tmp_path_factory) -> Iterator[ServiceThread]:
    data = Path(tmp_path_factory.mktemp("bulk"))
    with ServiceThread(embedded_config(data, limits=LIMITS)) as service:
        yield service


def _client(svc: ServiceThread) -> httpx.Client:
    return httpx.Client(
        base_url=svc.url, headers={"Authorization": f"Token {svc.api_key}"}, timeout=120
    )


def _bulk(svc: ServiceThread, body: dict) -> list[dict]:
    with _client(svc) as client, client.stream("POST", "/v1/memories/bulk/", json=body) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"] == "application/x-ndjson"
        return [json.loads(line) for line in r.iter_lines()]


def _count(svc: ServiceThread, user: str) -> int:
    with _client(svc) as client:
        return client.post("/v3/memories/", json={"filters": {"user_id": user}}).json()["count"]


def _turns(n: int, user_role_only_after: int | None = None) -> list[dict]:
    out = []
    for i in range(n):
        role = (
            "assistant"
            if i % 2 and (user_role_only_after is None or i < user_role_only_after)
            else "user"
        )
        out.append({"role": role, "content": f"message {i}: the blue heron came back to pond {i}"})
    return out


def test_progress_after_each_chunk_then_every_result(svc):
    lines = _bulk(svc, {"user_id": "progress", "messages": _turns(50)})
    assert [line["done"] for line in lines] == [20, 40, 50]
    assert all(line["total"] == 50 for line in lines)
    assert "results" not in lines[0] and "error" not in lines[-1]
    results = lines[-1]["results"]
    assert [r["memory"] for r in results] == [m["content"] for m in _turns(50)]
    assert {r["event"] for r in results} == {"ADD"}
    assert _count(svc, "progress") == 50


def test_chunks_are_stored_as_one_request_would_be(svc):
    """Turns are judged on the whole request (both sides in it: a conversation), so the
    chunks after the last assistant message are still turns, chained to the one before."""
    messages = _turns(60, user_role_only_after=10)  # chunks 2 and 3 hold only user messages
    results = _bulk(svc, {"user_id": "chain", "messages": messages})[-1]["results"]
    store = svc.app.state.services.engine.store
    ids = [r["id"] for r in results]
    for before, after in pairwise(ids):
        assert store.get(after).payload[PREV_KEY] == before


def test_the_whole_request_is_checked_before_anything_is_stored(svc):
    messages = _turns(45)
    messages[44]["content"] = "x" * (LIMITS.max_memory_chars + 1)
    with _client(svc) as client:
        r = client.post("/v1/memories/bulk/", json={"user_id": "checked", "messages": messages})
        assert r.status_code == 422 and "messages.content[44]" in r.json()["detail"]
        over = {"user_id": "checked", "messages": _turns(LIMITS.max_bulk_messages + 1)}
        r = client.post("/v1/memories/bulk/", json=over)
        assert r.status_code == 422 and "limits.maxBulkMessages" in r.json()["detail"]
        r = client.post("/v1/memories/bulk/", json={"messages": _turns(2)})  # no scope
        assert r.status_code == 400 and "a scope is required" in r.json()["detail"]
    assert _count(svc, "checked") == 0


def test_its_body_bound_is_its_own(svc):
    """2 MiB (JSON padded with whitespace: the bound is on bytes, embedding them would only
    be slow): over every other route's maxRequestBytes, within the bulk's maxBulkBytes."""
    messages = json.dumps({"user_id": "bound", "messages": _turns(3)})
    body = messages[:-1] + " " * 2 * 1_048_576 + "}"
    assert LIMITS.max_request_bytes < len(body) < LIMITS.max_bulk_bytes
    headers = {"content-type": "application/json"}
    with _client(svc) as client:
        add = client.post("/v1/memories/", content=body, headers=headers)
        assert add.status_code == 413 and "limits.maxRequestBytes" in add.json()["detail"]
        with client.stream("POST", "/v1/memories/bulk/", content=body, headers=headers) as r:
            assert r.status_code == 200
            lines = [json.loads(line) for line in r.iter_lines()]
    assert lines[-1]["done"] == 3 and _count(svc, "bound") == 3
    huge = " " * (LIMITS.max_bulk_bytes + 1)
    with _client(svc) as client:
        r = client.post("/v1/memories/bulk/", content=huge, headers=headers)
        assert r.status_code == 413 and "limits.maxBulkBytes" in r.json()["detail"]


def test_a_stop_mid_way_says_how_far_it_got(svc, monkeypatch):
    writes = svc.app.state.services.engine._writes
    real = writes.add_raw
    calls = []

    async def failing(messages, *args, **kwargs):
        calls.append(len(messages))
        if len(calls) == 3:
            raise RuntimeError("disk went away (secret detail)")
        return await real(messages, *args, **kwargs)

    monkeypatch.setattr(writes, "add_raw", failing)
    lines = _bulk(svc, {"user_id": "stopped", "messages": _turns(100)})
    assert [line["done"] for line in lines] == [20, 40, 40]
    assert "resend from there" in lines[-1]["error"]
    assert "secret detail" not in lines[-1]["error"]  # the cause is logged, not answered
    assert _count(svc, "stopped") == 40


def test_a_client_gone_mid_way_leaves_whole_chunks(svc):
    """The chunk being stored when the client leaves is finished; the rest is not begun."""
    with _client(svc) as client:
        body = {"user_id": "gone", "messages": _turns(200)}
        with client.stream("POST", "/v1/memories/bulk/", json=body) as r:
            first = json.loads(next(r.iter_lines()))
            assert first["done"] == CHUNK
    deadline = time.monotonic() + 30
    seen = []
    while time.monotonic() < deadline:
        seen.append(_count(svc, "gone"))
        if len(seen) >= 5 and len(set(seen[-5:])) == 1:
            break
        time.sleep(0.2)
    assert seen[-1] % CHUNK == 0 and CHUNK <= seen[-1] <= 200, seen
