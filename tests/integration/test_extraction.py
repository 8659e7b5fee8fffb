"""Remote model providers through config, against scripted stand-ins; extraction off."""

from __future__ import annotations

from pathlib import Path

import httpx

from memorystore.config import SecretSource, ServiceEmbedder
from memorystore.service.lifecycle.judge import JUDGE_HEADER
from memorystore.service.ops.runner import ServiceThread, UvicornThread, embedded_config
from support.scripted_models import KEY_ENV, build_app, scripted_llm


def add(svc: ServiceThread, text: str, **extra) -> dict:
    response = httpx.post(
        f"{svc.url}/v3/memories/add/",
        json={"messages": [{"role": "user", "content": text}], "user_id": "xu", **extra},
        headers={"Authorization": f"Token {svc.api_key}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_extraction_on_stores_extracted_facts_once(tmp_path: Path, monkeypatch):
    calls: list[dict] = []
    monkeypatch.setenv(KEY_ENV, "sk-scripted")
    with scripted_llm(calls) as llm, ServiceThread(embedded_config(tmp_path, llm=llm)) as svc:
        first = add(svc, "I live in Hangzhou and I like dark mode charts")
        assert sorted(r["memory"] for r in first["results"]) == [
            "Is based in China",
            "Lives in Hangzhou",
            "Prefers dark mode for charts",
        ]
        # the same facts again: mem0's hash dedup (race-free here: writes per scope are serial)
        assert add(svc, "I live in Hangzhou")["results"] == []
        # nothing extractable: nothing stored
        assert add(svc, "what's the weather?")["results"] == []
        # raw_fallback false changes nothing when a model is there: its facts are kept
        kept = add(svc, "I moved to a flat near West Lake", raw_fallback=False)["results"]
        assert [(r["memory"], r["event"]) for r in kept] == [("Lives near West Lake", "ADD")]
        # infer=false bypasses the model
        raw = add(svc, "store me verbatim", infer=False)["results"]
        assert [r["memory"] for r in raw] == ["store me verbatim"]
        # extracted or raw, each memory records the index settings it was written with,
        # so a restart finds nothing to re-index
        listed = httpx.post(
            f"{svc.url}/v3/memories/",
            json={"filters": {"user_id": "xu"}},
            headers={"Authorization": f"Token {svc.api_key}"},
            timeout=60,
        ).json()["results"]
        versions = {m["memory"]: (m.get("metadata") or {}).get("index_version") for m in listed}
        assert len(versions) == 5
        assert set(versions.values()) == {"multilingual/context/centred"}, versions
    # four extractions, and one judgement of what the West Lake fact makes outdated (the
    # others found no new fact, or nothing stored before them to compare with)
    assert len(calls) == 5
    assert JUDGE_HEADER in calls[4]["body"]["messages"][0]["content"]
    assert calls[0]["body"]["model"] == "scripted-1"
    assert calls[0]["auth"] == "Bearer sk-scripted"


def test_extraction_off_without_a_model_stores_text_as_is(tmp_path: Path):
    with ServiceThread(embedded_config(tmp_path)) as svc:
        result = add(
            svc, "I live in Hangzhou and I like dark mode charts"
        )  # infer defaults to true
        assert [r["memory"] for r in result["results"]] == [
            "I live in Hangzhou and I like dark mode charts"
        ]
        assert result["results"][0]["event"] == "ADD"
        # raw_fallback false (project-scope write-back): without a model nothing is stored
        skipped = add(svc, "my password hint is the cat's name", raw_fallback=False)
        assert skipped == {"results": [], "skipped": "no extraction model is configured"}
        listed = httpx.post(
            f"{svc.url}/v3/memories/",
            json={"user_id": "xu"},
            headers={"Authorization": f"Token {svc.api_key}"},
        ).json()
        assert [m["memory"] for m in listed["results"]] == [
            "I live in Hangzhou and I like dark mode charts"
        ]


def test_openai_compatible_embedder_through_config(tmp_path: Path, monkeypatch):
    calls: list[dict] = []
    monkeypatch.setenv("EMBED_KEY", "sk-embed")
    with UvicornThread(build_app(calls)) as models:
        embedder = ServiceEmbedder(
            provider="openai",
            model="text-embedding-scripted",
            base_url=f"{models.url}/v1",
            dimensions=512,
            api_key=SecretSource(env="EMBED_KEY"),
        )
        with ServiceThread(embedded_config(tmp_path, embedder=embedder)) as svc:
            add(svc, "Charts should use dark mode.")
            add(svc, "Bananas are yellow.")
            hits = httpx.post(
                f"{svc.url}/v3/memories/search/",
                json={"query": "which chart theme?", "user_id": "xu"},
                headers={"Authorization": f"Token {svc.api_key}"},
            ).json()["results"]
            assert hits[0]["memory"] == "Charts should use dark mode."
    assert {c["path"] for c in calls} == {"/v1/embeddings"}
    assert {c["auth"] for c in calls} == {"Bearer sk-embed"}
    assert {c["body"]["model"] for c in calls} == {"text-embedding-scripted"}
    assert all(c["body"]["dimensions"] == 512 for c in calls)
