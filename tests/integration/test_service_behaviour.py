"""The service's own guarantees: isolation, concurrency, idempotency, bad input, restart."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from memorystore.service.ops.runner import ServiceThread, embedded_config


def add(http: httpx.Client, text: str, **scope) -> httpx.Response:
    return http.post(
        "/v3/memories/add/", json={"messages": [{"role": "user", "content": text}], **scope}
    )


def count(http: httpx.Client, **scope) -> int:
    response = http.post("/v3/memories/", json={"filters": scope})
    assert response.status_code == 200, response.text
    return response.json()["count"]


def test_isolation_across_many_users(http):
    users = [f"user-{i}" for i in range(20)]
    for i, user in enumerate(users):
        assert (
            add(
                http, f"My secret code word is token{i}x and I like colour {i}", user_id=user
            ).status_code
            == 200
        )
    for i, user in enumerate(users):
        hits = http.post(
            "/v3/memories/search/",
            json={
                "query": "what is my secret code word?",
                "filters": {"user_id": user},
                "top_k": 50,
            },
        ).json()["results"]
        assert [h["user_id"] for h in hits] == [user]
        assert f"token{i}x" in hits[0]["memory"]
    # by-id calls with another user's scope neither read, change nor delete
    mine = http.post("/v3/memories/", json={"filters": {"user_id": "user-0"}}).json()["results"][0][
        "id"
    ]
    assert http.get(f"/v1/memories/{mine}/", params={"user_id": "user-1"}).status_code == 404
    assert (
        http.put(
            f"/v1/memories/{mine}/", params={"user_id": "user-1"}, json={"text": "hijacked"}
        ).status_code
        == 404
    )
    assert http.delete(f"/v1/memories/{mine}/", params={"user_id": "user-1"}).status_code == 404
    assert (
        http.get(f"/v1/memories/{mine}/", params={"user_id": "user-0"})
        .json()["memory"]
        .startswith("My secret")
    )
    # agent scope narrows within a user
    add(http, "agent-specific note", user_id="user-0", agent_id="planner")
    assert count(http, user_id="user-0", agent_id="planner") == 1
    assert count(http, user_id="user-0") == 2


async def test_concurrent_writers_lose_and_duplicate_nothing(service):
    headers = {"Authorization": f"Token {service.api_key}"}
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=60) as client:

        async def writer(w: int) -> list[int]:
            codes = []
            for i in range(25):
                body = {
                    "messages": [{"role": "user", "content": f"writer {w} fact {i}"}],
                    "user_id": "shared",
                }
                codes.append((await client.post("/v3/memories/add/", json=body)).status_code)
                # the same text again, concurrently with others: stored once
                codes.append((await client.post("/v3/memories/add/", json=body)).status_code)
            return codes

        codes = await asyncio.gather(*(writer(w) for w in range(8)))
        assert {c for batch in codes for c in batch} == {200}
        listed = await client.post(
            "/v3/memories/",
            params={"page_size": 100, "page": 1},
            json={"filters": {"user_id": "shared"}},
        )
        assert listed.json()["count"] == 200
        texts = []
        for page in (1, 2):
            rows = await client.post(
                "/v3/memories/",
                params={"page_size": 100, "page": page},
                json={"filters": {"user_id": "shared"}},
            )
            texts += [r["memory"] for r in rows.json()["results"]]
        assert sorted(texts) == sorted(f"writer {w} fact {i}" for w in range(8) for i in range(25))


async def test_the_same_text_written_concurrently_is_stored_once(service):
    headers = {"Authorization": f"Token {service.api_key}"}
    body = {"messages": [{"role": "user", "content": "I live in Hangzhou"}], "user_id": "twin"}
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=60) as client:
        responses = await asyncio.gather(
            *(client.post("/v3/memories/add/", json=body) for _ in range(8))
        )
        events = sorted(r.json()["results"][0]["event"] for r in responses)
        assert events == ["ADD"] + ["NONE"] * 7
        assert len({r.json()["results"][0]["id"] for r in responses}) == 1
        listed = await client.post("/v3/memories/", json={"filters": {"user_id": "twin"}})
        assert listed.json()["count"] == 1


async def test_idempotent_retries_store_once(service):
    headers = {"Authorization": f"Token {service.api_key}", "Idempotency-Key": "reply-42"}
    body = {"messages": [{"role": "user", "content": "remember the milk"}], "user_id": "ida"}
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=60) as client:
        responses = await asyncio.gather(
            *(client.post("/v3/memories/add/", json=body) for _ in range(6))
        )
        assert {r.status_code for r in responses} == {200}
        ids = {r.json()["results"][0]["id"] for r in responses}
        assert len(ids) == 1
        assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in responses) == 5
        # the same key for a different body is refused, and stores nothing
        other = dict(body, messages=[{"role": "user", "content": "something else"}])
        refused = await client.post("/v3/memories/add/", json=other)
        assert refused.status_code == 422 and "Idempotency-Key" in refused.json()["detail"]
        listed = await client.post("/v3/memories/", json={"filters": {"user_id": "ida"}})
        assert listed.json()["count"] == 1


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "needle"),
    [
        (
            "post",
            "/v3/memories/add/",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            422,
            "JSON",
        ),
        (
            "post",
            "/v3/memories/add/",
            {"json": {"messages": [{"role": "user", "content": "x"}]}},
            400,
            "scope is required",
        ),
        ("post", "/v3/memories/add/", {"json": {"messages": [], "user_id": "u"}}, 422, "messages"),
        (
            "post",
            "/v3/memories/add/",
            {"json": {"messages": [{"role": "robot", "content": "x"}], "user_id": "u"}},
            422,
            "messages.0.role",
        ),
        (
            "post",
            "/v3/memories/add/",
            {"json": {"messages": [{"role": "user", "content": "x" * 20000}], "user_id": "u"}},
            422,
            "maxMemoryChars",
        ),
        (
            "post",
            "/v3/memories/add/",
            {
                "content": b"{" + b" " * 2_000_000 + b"}",
                "headers": {"content-type": "application/json"},
            },
            413,
            "maxRequestBytes",
        ),
        (
            "post",
            "/v3/memories/search/",
            {"json": {"query": "q", "filters": {"user_id": "u"}, "top_k": 5000}},
            422,
            "top_k",
        ),
        (
            "post",
            "/v3/memories/search/",
            {"json": {"query": "q", "filters": {"user_id": "u", "n": {"regex": "x"}}}},
            400,
            "regex",
        ),
        ("get", "/v1/memories/00000000-0000-4000-8000-000000000000/", {}, 404, "not found"),
        ("get", "/v1/memories/not-a-uuid/", {}, 404, "not found"),
        ("delete", "/v1/memories/", {}, 400, "scope is required"),
        ("delete", "/v2/entities/planet/mars/", {}, 400, "planet"),
        ("put", "/v1/memories/00000000-0000-4000-8000-000000000000/", {"json": {}}, 422, "text"),
    ],
)
def test_bad_input_is_a_named_4xx_and_writes_nothing(http, method, path, kwargs, status, needle):
    add(http, "already stored", user_id="u")
    response = getattr(http, method)(path, **kwargs)
    assert response.status_code == status, response.text
    assert needle in response.json()["detail"]
    assert count(http, user_id="u") == 1


def test_wrong_or_missing_key_is_401(service):
    for headers in ({}, {"Authorization": "Token wrong"}, {"Authorization": service.api_key}):
        response = httpx.post(
            f"{service.url}/v3/memories/search/",
            json={"query": "q", "user_id": "u"},
            headers=headers,
        )
        assert response.status_code == 401
        assert "API key" in response.json()["detail"]


def test_recall_packs_to_the_budget(http):
    for text in ("Charts should use dark mode.", "Use matplotlib for plots.", "Lives in Hangzhou."):
        add(http, text, user_id="alice")
    full = http.post(
        "/v1/recall/",
        json={"query": "draw a sales bar chart", "user_id": "alice", "threshold": 0.0},
    ).json()
    assert len(full["memories"]) == 3 and full["dropped"] == 0
    assert full["context"].count("\n- ") == 2
    tight = http.post(
        "/v1/recall/",
        json={
            "query": "draw a sales bar chart",
            "user_id": "alice",
            "threshold": 0.0,
            "token_budget": 8,
        },
    ).json()
    assert tight["tokens"] <= 8 and tight["dropped"] >= 1
    order = [m["id"] for m in full["memories"]]
    kept = [m["id"] for m in tight["memories"]]
    assert kept and kept == [i for i in order if i in kept]  # still best first


def test_health_ready_and_metrics(http):
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").json() == {"status": "ok"}
    add(http, "counted", user_id="m")
    http.post("/v3/memories/search/", json={"query": "q", "user_id": "m"})
    http.post("/v3/memories/search/", json={"query": "q"})
    text = http.get("/metrics").text
    route = 'route="/v3/memories/search/"'
    assert f'memorystore_request_seconds_count{{method="POST",{route},status="200"}} 1.0' in text
    assert 'memorystore_errors_total{kind="client",route="/v3/memories/search/"} 1.0' in text
    assert "memorystore_memories 1.0" in text
    # the embedded engine's point outside its graph (one memory, far below indexAfter)
    assert "memorystore_vector_unindexed_points 1.0" in text


def test_data_survives_a_restart(tmp_path):
    cfg = embedded_config(tmp_path / "data")
    with ServiceThread(cfg) as svc:
        headers = {"Authorization": f"Token {svc.api_key}"}
        response = httpx.post(
            f"{svc.url}/v3/memories/add/",
            json={"messages": [{"role": "user", "content": "I live in Hangzhou"}], "user_id": "r"},
            headers=headers,
        )
        memory_id = response.json()["results"][0]["id"]
    with ServiceThread(embedded_config(tmp_path / "data")) as svc:
        headers = {"Authorization": f"Token {svc.api_key}"}
        got = httpx.get(f"{svc.url}/v1/memories/{memory_id}/", headers=headers)
        assert got.json()["memory"] == "I live in Hangzhou"
        history = httpx.get(f"{svc.url}/v1/memories/{memory_id}/history/", headers=headers).json()
        assert [h["event"] for h in history] == ["ADD"]
