"""Each text memory links to the one written just before it in its scope (`prev_id`): the
context it is embedded with and the neighbour search gives a share of its score to."""

from __future__ import annotations

import httpx
import pytest

from memorystore.service import engine


def add(http: httpx.Client, user: str, text: str) -> str:
    body = {"messages": [{"role": "user", "content": text}], "user_id": user, "infer": False}
    response = http.post("/v3/memories/add/", json=body)
    response.raise_for_status()
    return response.json()["results"][0]["id"]


def prev_of(http: httpx.Client, memory_id: str) -> str | None:
    response = http.get(f"/v1/memories/{memory_id}/")
    response.raise_for_status()
    return (response.json().get("metadata") or {}).get("prev_id")


def test_memories_chain_per_scope(http):
    first = add(http, "alice", "I moved to Hangzhou.")
    add(http, "bob", "I like tea.")
    second = add(http, "alice", "I work from home now.")
    assert prev_of(http, first) is None
    assert prev_of(http, second) == first, "bob's write in between is another scope"


def test_the_chain_cache_is_bounded(http, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(engine, "CHAIN_SCOPES", 1)
    add(http, "alice", "I moved to Hangzhou.")
    add(http, "bob", "I like tea.")  # alice's scope falls out of the cache
    assert prev_of(http, add(http, "alice", "I work from home now.")) is None
