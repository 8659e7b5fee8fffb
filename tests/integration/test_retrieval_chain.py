"""Each conversation turn links to the turn written just before it in its scope (`prev_id`):
the context it is embedded with and the neighbour search gives a share of its score to. A
fact written on its own (no speaker, not part of an exchange) stands alone."""

from __future__ import annotations

import httpx
import pytest

from memorystore.service.state import scope_chain


def add(http: httpx.Client, user: str, text: str, speaker: str | None = "Ann") -> str:
    message = {"role": "user", "content": text, **({"name": speaker} if speaker else {})}
    body = {"messages": [message], "user_id": user, "infer": False}
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
    monkeypatch.setattr(scope_chain, "CHAIN_SCOPES", 1)
    add(http, "alice", "I moved to Hangzhou.")
    add(http, "bob", "I like tea.")  # alice's scope falls out of the cache
    assert prev_of(http, add(http, "alice", "I work from home now.")) is None


def test_facts_stand_alone_and_an_exchange_chains(http):
    turn = add(http, "carol", "I moved to Hangzhou.")
    fact = add(http, "carol", "The user likes oolong tea.", speaker=None)
    assert prev_of(http, fact) is None, "a fact without a speaker is not a conversation turn"
    assert prev_of(http, add(http, "carol", "And I cycle to work.")) == turn, "facts stay out"
    body = {
        "messages": [
            {"role": "user", "content": "Draw me a chart."},
            {"role": "assistant", "content": "Here is your chart."},
        ],
        "user_id": "dave",
        "infer": False,
    }
    response = http.post("/v3/memories/add/", json=body)
    response.raise_for_status()
    asked, answered = (r["id"] for r in response.json()["results"])
    assert prev_of(http, answered) == asked, "both sides of an exchange are turns"
