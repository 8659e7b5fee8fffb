"""Re-indexing in place after the index settings change (`retrieval/reindex.py`), on the real
engine and mem0: interrupted halfway and resumed, nothing lost; during writes; at start-up."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from memorystore.config import ServiceConfig
from memorystore.scope import EntityIds
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.service.retrieval import reindex
from memorystore.service.retrieval.reindex import INDEX_KEY, Reindexer
from memorystore.spec import LexicalTokenizer, RetrievalSettings

WORD = RetrievalSettings(tokenizer=LexicalTokenizer.WORD, context=False, language_centering=False)
CITIES = ["杭州", "上海", "成都", "北京", "深圳", "南京", "西安", "厦门", "苏州", "武汉"]


def config(data: Path, settings: RetrievalSettings) -> ServiceConfig:
    return embedded_config(data, retrieval=settings)


def write(cfg: ServiceConfig, n: int) -> None:
    """n memories over three users: Chinese facts, English facts and conversation turns."""

    async def go() -> None:
        engine = MemoryEngine(cfg)
        try:
            for i in range(n):
                user = EntityIds(user_id=f"u{i % 3}")
                text = f"第{i}条：我住在{CITIES[i % len(CITIES)]}" if i % 2 else f"note {i}: tea"
                message: dict[str, Any] = {"role": "user", "content": text}
                if i % 5 == 0:
                    message["name"] = "Ann"  # a conversation turn: chained for context
                await engine.add([message], user, {"date": "2026-11-30"}, infer=False)
        finally:
            engine.close()

    asyncio.run(go())


def keyword_hits(engine: MemoryEngine, query: str, user: str) -> int:
    found = engine.store.keyword_search(query=query, top_k=1000, filters={"user_id": user})
    return len(found or [])


class Stop(Exception):
    """Raised from the progress callback: the process dies between two pages."""


def test_interrupted_halfway_then_resumed_loses_nothing(tmp_path: Path, monkeypatch):
    data = tmp_path / "data"
    write(config(data, WORD), 120)
    new = config(data, RetrievalSettings())  # multilingual + context: every memory is stale
    monkeypatch.setattr(reindex, "PAGE", 40)

    engine = MemoryEngine(new)
    try:
        before = engine.count()
        assert keyword_hits(engine, "上海", "u1") == 0, "the word tokenizer keeps 我住在上海 whole"
        runner = Reindexer(engine)
        assert runner.pending() == before == 120

        def die_after_first_page(progress: reindex.Progress) -> None:
            raise Stop

        with pytest.raises(Stop):
            asyncio.run(runner.run(die_after_first_page))
        assert runner.progress is not None and runner.progress.done == 40
        assert runner.pending() == 80, "exactly the unprocessed memories are left"
        assert engine.count() == before
    finally:
        engine.close()

    engine = MemoryEngine(new)  # a new process: the state is in the store itself
    try:
        runner = Reindexer(engine)
        assert runner.pending() == 80
        progress = asyncio.run(runner.run())
        assert (progress.done, progress.failed, progress.finished) == (80, 0, True)
        assert runner.pending() == 0
        assert engine.count() == before, "count before = after"
        # embedded raw without context before (plain/raw), so every dense vector is redone
        assert progress.re_embedded == 80
        assert keyword_hits(engine, "上海", "u1") > 0, "Chinese terms are indexed now"
        rows, _ = engine.store.list(filters={"user_id": "u0"}, top_k=1000)
        assert {r.payload[INDEX_KEY] for r in rows} == {"multilingual/context/centred"}
        assert sorted(r.payload["data"] for r in rows) == sorted(
            (f"第{i}条：我住在{CITIES[i % len(CITIES)]}" if i % 2 else f"note {i}: tea")
            for i in range(0, 120, 3)
        ), "every text is kept as written"
    finally:
        engine.close()


def test_memories_without_a_version_keep_their_vector(tmp_path: Path):
    """Written before versions existed: new keyword terms, the dense vector kept."""
    data = tmp_path / "data"
    cfg = config(data, WORD)
    write(cfg, 6)

    engine = MemoryEngine(cfg)
    try:
        rows, _ = engine.store.list(top_k=100)
        for row in rows:  # as an older release left them
            payload = {k: v for k, v in row.payload.items() if k != INDEX_KEY}
            engine.store.reindex(str(row.id), payload)
            engine.store.update(str(row.id), payload=payload)
    finally:
        engine.close()
    engine = MemoryEngine(config(data, RetrievalSettings(context=False, language_centering=False)))
    try:
        progress = asyncio.run(Reindexer(engine).run())
        assert (progress.done, progress.re_embedded) == (6, 0)
        assert keyword_hits(engine, "上海", "u1") > 0
    finally:
        engine.close()


def test_an_update_during_the_reindex_is_never_overwritten(tmp_path: Path):
    data = tmp_path / "data"
    write(config(data, WORD), 60)
    engine = MemoryEngine(config(data, RetrievalSettings()))
    try:
        rows, _ = engine.store.list(filters={"user_id": "u2"}, top_k=100)
        targets = [str(r.id) for r in rows[:10]]

        async def updates() -> None:
            for i, memory_id in enumerate(targets):
                await engine.update(memory_id, EntityIds(user_id="u2"), f"更新后的第{i}条", None)
                await asyncio.sleep(0)

        async def both() -> reindex.Progress:
            progress, _ = await asyncio.gather(Reindexer(engine).run(), updates())
            return progress

        progress = asyncio.run(both())
        assert progress.failed == 0
        for i, memory_id in enumerate(targets):
            assert engine.store.get(memory_id).payload["data"] == f"更新后的第{i}条"
        assert engine.count() == 60
    finally:
        engine.close()


def test_the_service_reindexes_at_start_up_and_serves_meanwhile(tmp_path: Path):
    data = tmp_path / "data"
    write(config(data, WORD), 30)
    with ServiceThread(config(data, RetrievalSettings())) as svc:
        headers = {"Authorization": f"Token {svc.api_key}"}
        with httpx.Client(base_url=svc.url, headers=headers, timeout=30) as http:
            body = {"query": "上海", "filters": {"user_id": "u1"}, "top_k": 3, "threshold": 0}
            assert http.post("/v3/memories/search/", json=body).status_code == 200
            for _ in range(300):
                ready = http.get("/readyz").json()
                if ready.get("reindex", {}).get("finished"):
                    break
                asyncio.run(asyncio.sleep(0.1))
            assert ready["status"] == "ok"
            assert ready["reindex"] == {
                "total": 30,
                "pending": 30,
                "done": 30,
                "re_embedded": 30,
                "failed": 0,
                "finished": True,
            }
            hits = http.post("/v3/memories/search/", json=body).json()["results"]
            assert "上海" in hits[0]["memory"]
            assert INDEX_KEY not in (hits[0].get("metadata") or {})
            # the dashboard's reindex progress (docs/operations/monitoring.md)
            exported = http.get("/metrics").text.splitlines()
            assert "memorystore_reindex_memories_done 30.0" in exported
            assert "memorystore_reindex_memories_pending 30.0" in exported
            # asked again (kubectl memorystore reindex): nothing is behind any more
            again = http.post("/v1/reindex/")
            assert again.status_code == 200 and again.json()["pending"] == 0


def test_the_reindex_command(tmp_path: Path):
    data = tmp_path / "data"
    write(config(data, WORD), 12)
    cfg = config(data, RetrievalSettings())
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True, exclude_none=True)))
    env = {**os.environ, "MEM0_TELEMETRY": "False"}
    cmd = [sys.executable, "-m", "memorystore", "reindex", "--config", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "12 of 12 memories to bring to multilingual/context/centred" in done.stderr
    assert "re-index done: 12/12 memories (100 %)" in done.stderr
    assert "memories before 12, after 12" in done.stdout
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0 and "0 of 12 memories" in again.stderr
    path.write_text(path.read_text() + "retrieval:\n  tokenizer: klingon\n")
    bad = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2
    assert "memorystore reindex: invalid config" in bad.stderr and "tokenizer" in bad.stderr


def test_a_page_is_embedded_in_batches_ahead_and_each_vector_is_its_own_text(
    tmp_path: Path, monkeypatch
):
    """Texts are embedded EMBED_BATCH per call outside the locks; every stored vector is the
    one its text gets alone, also for a memory whose vector made ahead no longer fits."""
    import numpy as np

    data = tmp_path / "data"
    write(config(data, WORD), 90)
    engine = MemoryEngine(config(data, RetrievalSettings()))
    try:
        runner = Reindexer(engine)
        batches: list[int] = []
        real = engine.passage_vectors

        async def counted(texts: list[str]) -> list[list[float]]:
            batches.append(len(texts))
            return await real(texts)

        monkeypatch.setattr(engine, "passage_vectors", counted)
        first = str(engine.store.list(filters={"user_id": "u0"}, top_k=1)[0][0].id)
        real_ahead = runner._embed_ahead

        async def one_stale(ids: list[str]) -> dict[str, list[float]]:
            ahead = await real_ahead(ids)
            text = runner._texts(dict(engine.store.get(first).payload)).dense
            ahead.pop(text, None)  # as if the memory changed after its vector was made
            return ahead

        monkeypatch.setattr(runner, "_embed_ahead", one_stale)
        progress = asyncio.run(runner.run())
        assert (progress.done, progress.re_embedded, progress.failed) == (90, 90, 0)
        assert max(batches) == reindex.EMBED_BATCH and batches.count(1) == 1, batches
        monkeypatch.setattr(engine, "passage_vectors", real)
        vectors = {i: v for i, v, _ in engine.store.points()}
        for memory_id, vector in vectors.items():
            payload = dict(engine.store.get(memory_id).payload)
            alone = asyncio.run(engine.passage_vectors([runner._texts(payload).dense]))[0]
            assert np.allclose(vector, alone, atol=1e-5), memory_id
    finally:
        engine.close()
