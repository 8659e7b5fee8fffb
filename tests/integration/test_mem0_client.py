"""The real `mem0.AsyncMemoryClient` against the service, unchanged: every call it makes."""

from __future__ import annotations

import asyncio

import pytest
from mem0 import AsyncMemoryClient


async def test_ping_validates_the_key(service):
    with pytest.raises(ValueError, match="API key"):
        await asyncio.to_thread(AsyncMemoryClient, api_key="wrong", host=service.url)


async def test_add_search_get_update_history_delete(client):
    added = await client.add(
        [{"role": "user", "content": "I prefer dark mode for every chart."}],
        user_id="alice",
        metadata={"topic": "ui"},
    )
    (item,) = added["results"]
    assert item["event"] == "ADD" and item["memory"] == "I prefer dark mode for every chart."
    memory_id = item["id"]

    found = await client.search("which colour theme for charts?", filters={"user_id": "alice"})
    assert found["results"][0]["id"] == memory_id
    assert found["results"][0]["metadata"]["topic"] == "ui"
    assert 0 < found["results"][0]["score"] <= 1

    got = await client.get(memory_id)
    assert got["memory"] == "I prefer dark mode for every chart." and got["user_id"] == "alice"

    await client.update(memory_id, text="I prefer light mode for charts.")
    assert (await client.get(memory_id))["memory"] == "I prefer light mode for charts."

    events = [h["event"] for h in await client.history(memory_id)]
    assert events == ["ADD", "UPDATE"]

    await client.delete(memory_id)
    with pytest.raises(Exception, match="not found"):
        await client.get(memory_id)


async def test_paginated_list_and_delete_by_entity(client):
    for i in range(7):
        await client.add(f"fact number {i} about bob", user_id="bob")
    await client.add("a fact about carol", user_id="carol")

    page1 = await client.get_all(filters={"user_id": "bob"}, page=1, page_size=3)
    page3 = await client.get_all(filters={"user_id": "bob"}, page=3, page_size=3)
    assert page1["count"] == 7 and len(page1["results"]) == 3
    assert page1["next"] and page1["previous"] is None
    assert len(page3["results"]) == 1 and page3["next"] is None
    every = await client.get_all(filters={"user_id": "bob"}, page=1, page_size=100)
    assert len({m["id"] for m in every["results"]}) == 7

    await client.delete_all(user_id="bob")
    assert (await client.get_all(filters={"user_id": "bob"}))["count"] == 0
    assert (await client.get_all(filters={"user_id": "carol"}))["count"] == 1


async def test_entities_and_delete_users(client):
    await client.add("likes tea", user_id="dan")
    await client.add("likes coffee", user_id="erin", agent_id="barista")
    entities = {
        (e["type"], e["name"]): e["total_memories"] for e in (await client.users())["results"]
    }
    assert entities == {("user", "dan"): 1, ("user", "erin"): 1, ("agent", "barista"): 1}

    await client.delete_users(user_id="dan")
    remaining = {(e["type"], e["name"]) for e in (await client.users())["results"]}
    assert ("user", "dan") not in remaining and ("user", "erin") in remaining
