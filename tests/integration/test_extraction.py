"""Extraction on (mem0's real OpenAI provider against a scripted chat model) and off."""

from __future__ import annotations

from pathlib import Path

import httpx

from memorystore.config import SecretSource, ServiceLLM
from memorystore.service.runner import ServiceThread, UvicornThread, embedded_config
from support.scripted_chat import build_app


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
    monkeypatch.setenv("SCRIPTED_KEY", "sk-scripted")
    with UvicornThread(build_app(calls)) as chat:
        llm = ServiceLLM(
            provider="openai",
            model="scripted-1",
            base_url=f"{chat.url}/v1",
            api_key=SecretSource(env="SCRIPTED_KEY"),
        )
        with ServiceThread(embedded_config(tmp_path, llm=llm)) as svc:
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
            # infer=false bypasses the model
            raw = add(svc, "store me verbatim", infer=False)["results"]
            assert [r["memory"] for r in raw] == ["store me verbatim"]
    assert len(calls) == 3
    assert calls[0]["model"] == "scripted-1"


def test_extraction_off_without_a_model_stores_text_as_is(tmp_path: Path):
    with ServiceThread(embedded_config(tmp_path)) as svc:
        result = add(
            svc, "I live in Hangzhou and I like dark mode charts"
        )  # infer defaults to true
        assert [r["memory"] for r in result["results"]] == [
            "I live in Hangzhou and I like dark mode charts"
        ]
        assert result["results"][0]["event"] == "ADD"
