"""docs/operations/changing-tiers.md ("Changing tiers or the embedding model"): its copy script,
run as printed between two real services (the embedded default, each with its own key), moves
every memory across.

Both stores' ids, metadata and texts must survive; enough users and memories to need more
than one page of entities and of one user's memories (the script pages by 100).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from mem0 import AsyncMemoryClient

from memorystore.service.ops.runner import ServiceThread, embedded_config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "changing-tiers.md"
HEADING = "# Changing tiers or the embedding model\n"


def page_script() -> str:
    """The page's one Python block (the CRD's migration messages point at this page)."""
    text = PAGE.read_text()
    assert text.startswith(HEADING), f"{PAGE} does not start with {HEADING.strip()!r}"
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return block


async def _add_all(client: AsyncMemoryClient, writes: list[dict[str, Any]]) -> None:
    for write in writes:
        await client.add(write["memory"], **write["ids"], metadata=write.get("metadata"))


def _everything(url: str, key: str) -> list[tuple[Any, ...]]:
    """(text, ids, metadata, text written before it) of every memory a store holds, read
    past mem0's client."""
    import httpx

    with httpx.Client(base_url=url, headers={"Authorization": f"Token {key}"}) as http:

        def paged(method: str, path: str, **kwargs: Any) -> list[dict[str, Any]]:
            items, page = [], 1
            while True:
                params = {"page": page, "page_size": 100}
                found = http.request(method, path, params=params, **kwargs).json()
                items += found["results"]
                if not found["next"]:
                    return items
                page += 1

        memories = [
            m
            for entity in paged("GET", "/v1/entities/")
            if entity["type"] == "user"
            for m in paged("POST", "/v3/memories/", json={"filters": {"user_id": entity["name"]}})
        ]
    text = {m["id"]: m["memory"] for m in memories}
    out = []
    for m in memories:
        ids = tuple(m.get(k) for k in ("user_id", "agent_id", "run_id"))
        metadata = dict(m.get("metadata") or {})
        # the memory written just before in its scope (neighbour scoring): same text, new ids
        before = text[metadata.pop("prev_id")] if "prev_id" in metadata else None
        out.append((m["memory"], ids, tuple(sorted(metadata.items())), before))
    return sorted(out, key=repr)


@pytest.mark.timeout(600)
def test_the_documented_script_copies_every_memory_to_a_new_store(tmp_path: Path):
    # one user with more than a page of memories, more than a page of users, an agent-scoped
    # memory with metadata, a run-scoped one, and project memory (user_id project:<name>)
    writes: list[dict[str, Any]] = [
        {"memory": f"alice fact {i}", "ids": {"user_id": "alice"}} for i in range(105)
    ]
    writes += [{"memory": f"likes colour {i}", "ids": {"user_id": f"u{i:03}"}} for i in range(100)]
    writes += [
        {
            "memory": "prefers matplotlib",
            "ids": {"user_id": "bob", "agent_id": "charts"},
            "metadata": {"topic": "charts", "date": "2025-03-01"},
        },
        {"memory": "asked about Hangzhou", "ids": {"user_id": "bob", "run_id": "s-1"}},
        {"memory": "the team ships on Fridays", "ids": {"user_id": "project:acme"}},
    ]
    with (
        ServiceThread(embedded_config(tmp_path / "old")) as old,
        ServiceThread(embedded_config(tmp_path / "new")) as new,
    ):

        async def fill() -> None:
            client = await asyncio.to_thread(AsyncMemoryClient, api_key=old.api_key, host=old.url)
            try:
                await _add_all(client, writes)
            finally:
                await client.async_client.aclose()

        asyncio.run(fill())
        before = _everything(old.url, old.api_key)
        assert len(before) == len(writes)

        # the script as printed, with the two stores' URLs and keys
        names = {"OLD_URL": old.url, "OLD_KEY": old.api_key}
        names |= {"NEW_URL": new.url, "NEW_KEY": new.api_key, "__name__": "copy"}
        exec(compile(page_script(), str(PAGE), "exec"), names)

        assert _everything(new.url, new.api_key) == before
        assert _everything(old.url, old.api_key) == before  # the old store is left as it was
