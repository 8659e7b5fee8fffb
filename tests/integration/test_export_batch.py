"""Batch update/delete, exports and imports: the real `mem0.AsyncMemoryClient` and HTTP
against the real service (embedded engine, offline embedder), as test_mem0_client.py does."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mem0 import AsyncMemoryClient
from mem0.exceptions import MemoryNotFoundError

from memorystore.config import ServiceEmbedder
from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.spec import RetrievalSettings
from support.backups import every

SCHEMA = {"title": "Memories", "type": "object", "properties": {"facts": {"type": "array"}}}
EXPORT_MESSAGE = "Memory export request received. The export will be ready in a few seconds."


async def add(client: AsyncMemoryClient, text: str, **kwargs: Any) -> str:
    (item,) = [r for r in (await client.add(text, **kwargs))["results"] if r["event"] == "ADD"]
    return item["id"]


def texts(http: httpx.Client, **scope: str) -> dict[str, str]:
    return {i: m["memory"] for i, m in every(http, **scope).items()}


def refused(response: httpx.Response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    for word in words:
        assert word in detail, detail
    return detail


# --- batch update / delete ------------------------------------------------------------------


async def test_batch_update_changes_texts_and_metadata(client, http):
    ids = [
        await add(client, "I prefer dark mode for every chart.", user_id="alice"),
        await add(client, "My dog is called Biscuit.", user_id="alice", metadata={"a": 1}),
        await add(client, "I am allergic to peanuts.", user_id="alice"),
    ]
    answer = await client.batch_update(
        [
            {"memory_id": ids[0], "text": "I prefer light mode for charts."},
            {"memory_id": ids[1], "metadata": {"topic": "pets"}},
            {"memory_id": ids[2], "text": "I am allergic to shellfish.", "metadata": {"x": 2}},
        ]
    )
    assert answer == {"message": "Successfully updated 3 memories"}

    got = [await client.get(i) for i in ids]
    assert [g["memory"] for g in got] == [
        "I prefer light mode for charts.",
        "My dog is called Biscuit.",
        "I am allergic to shellfish.",
    ]
    assert got[1]["metadata"].items() >= {"a": 1, "topic": "pets"}.items()
    assert got[2]["metadata"]["x"] == 2
    for memory_id in ids:
        assert [h["event"] for h in await client.history(memory_id)] == ["ADD", "UPDATE"]
    found = await client.search("which food allergy?", filters={"user_id": "alice"})
    assert found["results"][0]["id"] == ids[2]
    assert found["results"][0]["memory"] == "I am allergic to shellfish."


async def test_batch_delete(client, http):
    ids = [await add(client, f"fact {word} about bob", user_id="bob") for word in "abc"]
    answer = await client.batch_delete([{"memory_id": i} for i in ids[:2]])
    assert answer == {"message": "Successfully deleted 2 memories"}
    assert list(texts(http, user_id="bob")) == [ids[2]]
    # a deleted memory is erased: its history is gone too (docs/operations/erasure.md)
    for erased in ids[:2]:
        with pytest.raises(MemoryNotFoundError):
            await client.history(erased)
    assert [h["event"] for h in await client.history(ids[2])] == ["ADD"]


async def test_batch_refusals_change_nothing(client, http):
    ids = [await add(client, f"note {word} for carol", user_id="carol") for word in "ab"]
    before = texts(http, user_id="carol")
    unknown = str(uuid.uuid4())

    too_many = [{"memory_id": ids[0], "text": "x"}] * 1001
    refused(http.put("/v1/batch/", json={"memories": too_many}), 422, "memories", "at most 1000")
    refused(
        http.request("DELETE", "/v1/batch/", json={"memories": [{"memory_id": ids[0]}] * 1001}),
        422,
        "memories",
        "at most 1000",
    )
    refused(http.put("/v1/batch/", json={"memories": []}), 422, "memories")
    refused(http.request("DELETE", "/v1/batch/", json={"memories": []}), 422, "memories")

    items = [{"memory_id": ids[0], "text": "changed"}, {"memory_id": unknown, "text": "y"}]
    refused(http.put("/v1/batch/", json={"memories": items}), 404, unknown, "memories[1]")
    with pytest.raises(Exception, match=unknown):
        await client.batch_delete([{"memory_id": ids[1]}, {"memory_id": unknown}])

    dup = [{"memory_id": ids[0], "text": "p"}, {"memory_id": ids[0], "text": "q"}]
    refused(http.put("/v1/batch/", json={"memories": dup}), 422, ids[0], "twice")
    dup_delete = {"memories": [{"memory_id": ids[1]}, {"memory_id": ids[1]}]}
    refused(http.request("DELETE", "/v1/batch/", json=dup_delete), 422, ids[1], "twice")

    empty = [{"memory_id": ids[0], "text": "ok"}, {"memory_id": ids[1]}]
    refused(http.put("/v1/batch/", json={"memories": empty}), 422, "memories[1]")
    reserved = [{"memory_id": ids[0], "metadata": {"user_id": "mallory"}}]
    refused(http.put("/v1/batch/", json={"memories": reserved}), 400, "memories[0].metadata")
    long_text = [{"memory_id": ids[0], "text": "x" * 100_000}]
    refused(http.put("/v1/batch/", json={"memories": long_text}), 422, "memories[0].text")

    assert texts(http, user_id="carol") == before
    for memory_id in ids:
        assert [h["event"] for h in await client.history(memory_id)] == ["ADD"]


# --- exports --------------------------------------------------------------------------------


async def test_create_and_get_exports(client, http):
    first = await add(client, "I prefer tea over coffee.", user_id="dan")
    created = await client.create_memory_export(schema=SCHEMA, user_id="dan")
    assert created["message"] == EXPORT_MESSAGE and uuid.UUID(created["id"])

    by_id = await client.get_memory_export(memory_export_id=created["id"])
    assert by_id["format"] == "memorystore.export/1" and by_id["id"] == created["id"]
    assert by_id["scope"] == {"user_id": "dan"} and by_id["schema"] == SCHEMA
    assert [m["id"] for m in by_id["memories"]] == [first]
    assert by_id["counts"] == {"memories": 1, "history_events": 1}

    second_id = await add(client, "I play chess on Sundays.", user_id="dan")
    later = await client.create_memory_export(schema=SCHEMA, filters={"user_id": "dan"})
    latest = await client.get_memory_export(filters={"user_id": "dan"})
    assert latest["id"] == later["id"] and {m["id"] for m in latest["memories"]} == {
        first,
        second_id,
    }
    # the client's `schema: str` works too: a string holding a JSON object
    as_text = http.post("/v1/exports/", json={"schema": '{"type": "object"}', "user_id": "dan"})
    assert as_text.status_code == 200, as_text.text

    refused(http.post("/v1/exports/get/", json={"memory_export_id": str(uuid.uuid4())}), 404)
    other_scope = {"memory_export_id": created["id"], "user_id": "erin"}
    refused(http.post("/v1/exports/get/", json=other_scope), 404, "memory_export_id")
    refused(http.post("/v1/exports/get/", json={"user_id": "erin"}), 404, "erin")
    refused(http.post("/v1/exports/", json={"schema": SCHEMA}), 400, "a scope is required")
    refused(http.post("/v1/exports/get/", json={}), 400, "a scope is required")
    for schema in ([1], 5, "not json", None):
        refused(http.post("/v1/exports/", json={"schema": schema, "user_id": "dan"}), 422, "schema")
    refused(http.post("/v1/exports/", json={"user_id": "dan"}), 422, "schema")
    narrowed = {"schema": SCHEMA, "filters": {"user_id": "dan", "topic": "x"}}
    refused(http.post("/v1/exports/", json=narrowed), 422, "filters.topic")
    refused(http.post("/v1/exports/", json={"schema": SCHEMA, "user_id": "*"}), 422, "user_id")


async def test_export_scopes_are_isolated(client, http):
    alice = await add(client, "I collect vintage stamps.", user_id="alice")
    coach = await add(client, "I run five km each morning.", user_id="alice", agent_id="coach")
    agent_only = await add(client, "The coach agent speaks French.", agent_id="coach")
    bob = await add(client, "I collect vintage coins.", user_id="bob")

    async def export_ids(**scope: str) -> set[str]:
        made = await client.create_memory_export(schema=SCHEMA, **scope)
        doc = await client.get_memory_export(memory_export_id=made["id"])
        return {m["id"] for m in doc["memories"]}

    assert await export_ids(user_id="alice") == {alice, coach}
    assert await export_ids(user_id="alice", agent_id="coach") == {coach}
    assert await export_ids(agent_id="coach") == {agent_only}
    assert await export_ids(user_id="bob") == {bob}
    assert await export_ids(user_id="nobody") == set()


async def test_deleting_a_scope_deletes_its_exports(client, http):
    await add(client, "I like hiking.", user_id="alice")
    await add(client, "I like sailing.", user_id="alice", agent_id="coach")
    await add(client, "I like rowing.", user_id="bob")
    alice = (await client.create_memory_export(schema=SCHEMA, user_id="alice"))["id"]
    coach = await client.create_memory_export(schema=SCHEMA, user_id="alice", agent_id="coach")
    bob = (await client.create_memory_export(schema=SCHEMA, user_id="bob"))["id"]

    # deleting alice's coach memories erases the coach export and alice's (it holds them)
    assert http.delete("/v1/memories/?user_id=alice&agent_id=coach").status_code == 200
    for gone in (alice, coach["id"]):
        refused(http.post("/v1/exports/get/", json={"memory_export_id": gone}), 404)
    assert (await client.get_memory_export(memory_export_id=bob))["scope"] == {"user_id": "bob"}

    again = (await client.create_memory_export(schema=SCHEMA, user_id="alice"))["id"]
    assert http.delete("/v2/entities/user/alice/").status_code == 200
    refused(http.post("/v1/exports/get/", json={"memory_export_id": again}), 404)
    refused(http.post("/v1/exports/get/", json={"user_id": "alice"}), 404)
    await client.delete_all(user_id="bob")
    refused(http.post("/v1/exports/get/", json={"memory_export_id": bob}), 404)


# --- the round trip -------------------------------------------------------------------------

QUERIES = [
    "which colour theme for charts?",
    "what is my dog called?",
    "where do I live?",
    "how far do I run?",
    "what did we say about the trip to Kyoto?",
    "Hangzhou",
]


async def searches(client: AsyncMemoryClient, http: httpx.Client) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for query in QUERIES:
        hits = (await client.search(query, filters={"user_id": "alice"}, top_k=5))["results"]
        found[query] = [h["id"] for h in hits]
        body = {"query": query, "user_id": "alice", "top_k": 5, "include_retired": True}
        hits = http.post("/v3/memories/search/", json=body).raise_for_status().json()["results"]
        found[f"{query} (retired too)"] = [h["id"] for h in hits]
    return found


async def test_export_delete_import_round_trip(client, http, capsys):
    chart = await add(client, "I prefer dark mode for every chart.", user_id="alice")
    dog = await add(
        client, "My dog is called Biscuit.", user_id="alice", metadata={"date": "2026-01-02"}
    )
    hangzhou = await add(client, "I live in Hangzhou.", user_id="alice")
    shanghai = await add(client, "I moved to Shanghai.", user_id="alice")
    await add(client, "I run five km each morning.", user_id="alice", agent_id="coach")
    turns = await client.add(
        [
            {"role": "user", "content": "We are planning a trip to Kyoto in May.", "name": "alice"},
            {"role": "assistant", "content": "Kyoto in May is lovely; book early."},
        ],
        user_id="alice",
    )
    assert len(turns["results"]) == 2
    await client.update(chart, text="I prefer light mode for charts.")
    await client.batch_update([{"memory_id": chart, "metadata": {"topic": "ui"}}])

    stored = every(http, user_id="alice")
    assert stored[hangzhou]["metadata"]["lifecycle"] == "retired", "the move retires Hangzhou"
    before_search = await searches(client, http)
    assert before_search["what is my dog called?"][0] == dog
    assert before_search["where do I live?"][0] == shanghai
    assert hangzhou not in before_search["Hangzhou"]
    assert hangzhou in before_search["Hangzhou (retired too)"]

    made = await client.create_memory_export(schema=SCHEMA, user_id="alice")
    export = await client.get_memory_export(memory_export_id=made["id"])
    memories = {m["id"]: m for m in export["memories"]}
    assert set(memories) == set(stored) and len(memories) == 7
    assert memories[hangzhou]["retired"]["because"] and memories[hangzhou]["retired"]["at"]
    assert [h["event"] for h in memories[hangzhou]["history"]] == ["ADD", "DELETE"]
    assert [h["event"] for h in memories[chart]["history"]] == ["ADD", "UPDATE", "UPDATE"]
    assert memories[chart]["metadata"] == {"topic": "ui"}
    derived = {"index_version", "prev_id", "lifecycle", "text_lemmatized"}
    assert all(not m["metadata"].keys() & derived for m in export["memories"])
    histories_before = {i: await client.history(i) for i in memories}
    events_before = sum(len(rows) for rows in histories_before.values())
    assert export["counts"] == {"memories": 7, "history_events": events_before}

    await client.delete_all(user_id="alice")
    assert every(http, user_id="alice") == {}
    refused(http.post("/v1/exports/get/", json={"memory_export_id": made["id"]}), 404)

    answer = http.post("/v1/imports/", json=export).raise_for_status().json()
    assert answer == {"imported": 7, "skipped": [], "history_events": events_before}

    restored = every(http, user_id="alice")
    assert restored == stored  # ids, texts, hashes, timestamps, scope, metadata, retirement
    histories_after = {i: await client.history(i) for i in memories}
    assert histories_after == histories_before  # row ids and timestamps too
    assert await searches(client, http) == before_search
    again = await client.create_memory_export(schema=SCHEMA, user_id="alice")
    reexport = await client.get_memory_export(memory_export_id=again["id"])
    assert reexport["memories"] == export["memories"]

    twice = http.post("/v1/imports/", json=export).raise_for_status().json()
    assert twice == {"imported": 0, "skipped": list(memories), "history_events": 0}
    assert every(http, user_id="alice") == stored
    with capsys.disabled():
        print(
            f"\nround trip: {len(memories)} memories, history events before "
            f"{events_before}, after {sum(len(r) for r in histories_after.values())}, "
            f"{len(QUERIES) * 2} searches identical"
        )


async def test_import_is_validated_whole_before_writing(client, http):
    await add(client, "I like green tea.", user_id="frank")
    kept = await add(client, "I like jazz.", user_id="frank")
    made = await client.create_memory_export(schema=SCHEMA, user_id="frank")
    export = await client.get_memory_export(memory_export_id=made["id"])
    await client.delete_all(user_id="frank")

    def broken(i: int, **fields: Any) -> dict[str, Any]:
        doc = {**export, "memories": [dict(m) for m in export["memories"]]}
        doc["memories"][i].update(fields)
        return doc

    cases = [
        ({**export, "format": "mem0/2"}, "format"),
        ({**export, "scope": {}}, "scope"),
        ({**export, "scope": {"user_id": "*"}}, "scope.user_id"),
        ({**export, "memories": export["memories"] * 501}, "at most 1000"),
        (broken(1, id="not-a-uuid"), "memories.1.id"),
        (broken(1, id=export["memories"][0]["id"]), "memories[1].id"),
        (broken(1, memory="x" * 100_000), "memories[1].memory"),
        (broken(1, hash="0" * 32), "memories[1].hash"),
        (broken(1, user_id="mallory"), "memories[1]"),
        (broken(1, metadata={"lifecycle": "retired"}), "memories[1].metadata.lifecycle"),
        (broken(1, created_at="yesterday"), "memories[1].created_at"),
        (broken(1, surprise=1), "memories.1.surprise"),
        (broken(1, history=[{**export["memories"][0]["history"][0]}]), "memories[1].history[0]"),
    ]
    for doc, field in cases:
        refused(http.post("/v1/imports/", json=doc), 422, field)
    assert every(http, user_id="frank") == {}

    # a history row id that belongs to another memory is refused too
    other = await add(client, "I like opera.", user_id="grace")
    (row,) = await client.history(other)
    stolen = broken(1, history=[{**export["memories"][1]["history"][0], "id": row["id"]}])
    refused(http.post("/v1/imports/", json=stolen), 422, "memories[1].history[0].id")
    assert every(http, user_id="frank") == {}
    assert await client.history(other) == [row]

    answer = http.post("/v1/imports/", json=export).raise_for_status().json()
    assert answer["imported"] == 2 and kept in every(http, user_id="frank")


async def test_an_export_imports_into_another_embedder_and_index_settings(client, http, tmp_path):
    dog = await add(client, "My dog is called Biscuit.", user_id="ivy")
    await add(client, "I work as a nurse in Lisbon.", user_id="ivy")
    await client.update(dog, text="My dog is called Pepper.")
    made = await client.create_memory_export(schema=SCHEMA, user_id="ivy")
    export = await client.get_memory_export(memory_export_id=made["id"])

    cfg = embedded_config(
        tmp_path / "other",
        embedder=ServiceEmbedder(provider="use"),
        retrieval=RetrievalSettings(context=False, hybrid=False),
    )
    with ServiceThread(cfg) as other:
        headers = {"Authorization": f"Token {other.api_key}"}
        with httpx.Client(base_url=other.url, headers=headers, timeout=60) as there:
            answer = there.post("/v1/imports/", json=export).raise_for_status().json()
            assert answer["imported"] == 2 and answer["history_events"] == 3
            imported = every(there, user_id="ivy")
            assert {i: m["memory"] for i, m in imported.items()} == texts(http, user_id="ivy")
            stamps = {m["metadata"]["index_version"] for m in imported.values()}
            # this service's settings (no context), not the exporting one's
            assert stamps == {"multilingual/plain/centred"}
            assert {
                m["metadata"]["index_version"] for m in every(http, user_id="ivy").values()
            } == {"multilingual/context/centred"}
            body = {"query": "what is my dog's name?", "user_id": "ivy", "top_k": 1}
            hits = there.post("/v3/memories/search/", json=body).raise_for_status().json()
            assert [h["id"] for h in hits["results"]] == [dog]
            rows = there.get(f"/v1/memories/{dog}/history/").raise_for_status().json()
            assert rows == (await client.history(dog))


# --- hostile input --------------------------------------------------------------------------

BAD_IDS = st.one_of(
    st.sampled_from(["*", "", " alice", "al ice", "a\tb", "a\x00b", "a\u200bb", "x" * 257]),
    st.text(min_size=1, max_size=8).map(lambda s: f"{s}*{s} "),
    st.text(st.characters(categories=("Cc",)), min_size=1, max_size=4),
    st.text(min_size=257, max_size=300),
)
WRONG_TYPES = st.one_of(
    st.integers(), st.booleans(), st.lists(st.integers(), min_size=1, max_size=2)
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(bad_id=BAD_IDS, wrong=WRONG_TYPES, route=st.integers(0, 10))
def test_hostile_input_is_refused_naming_the_field(http, bad_id, wrong, route):
    knit = {"messages": [{"role": "user", "content": "I knit."}], "user_id": "hal"}
    memory_id = (
        http.post("/v3/memories/add/", json=knit).raise_for_status().json()["results"][0]["id"]
    )
    before = texts(http, user_id="hal")
    mine = {"id": str(uuid.uuid4()), "memory": "I sew.", "user_id": "hal"}
    doc = {"format": "memorystore.export/1", "scope": {"user_id": "hal"}, "memories": [mine]}
    requests = [
        ("PUT", "/v1/batch/", {"memories": [{"memory_id": bad_id, "text": "x"}]}, "memory_id"),
        ("DELETE", "/v1/batch/", {"memories": [{"memory_id": bad_id}]}, "memory_id"),
        ("PUT", "/v1/batch/", {"memories": [{"memory_id": memory_id, "text": wrong}]}, "text"),
        ("DELETE", "/v1/batch/", {"memories": wrong}, "memories"),
        ("POST", "/v1/exports/", {"schema": SCHEMA, "user_id": bad_id}, "user_id"),
        ("POST", "/v1/exports/get/", {"filters": {"user_id": bad_id}}, "user_id"),
        ("POST", "/v1/exports/", {"schema": wrong, "user_id": "hal"}, "schema"),
        ("POST", "/v1/imports/", {**doc, "scope": {"user_id": bad_id}}, "scope.user_id"),
        ("POST", "/v1/imports/", {**doc, "memories": wrong}, "memories"),
        ("POST", "/v1/imports/", {**doc, "memories": [{**mine, "user_id": bad_id}]}, "user_id"),
        ("POST", "/v1/imports/", {**doc, "memories": [{**mine, "memory": wrong}]}, "memory"),
    ]
    method, path, payload, field = requests[route]
    response = http.request(method, path, json=payload)
    assert 400 <= response.status_code < 500, response.text
    assert field in response.json()["detail"], response.text
    assert texts(http, user_id="hal") == before
    assert http.post("/v1/exports/get/", json={"user_id": "hal"}).status_code == 404
