"""STAND-INS for the model providers we cannot reach here, speaking the OpenAI protocol.

- /v1/chat/completions: a scripted chat model. It answers with canned extraction results
  chosen by keywords in the conversation, so mem0's real OpenAI provider, prompt building
  and parsing run for real.
- /v1/embeddings: an offline embedding model (the real USE model behind the OpenAI
  embeddings protocol), so the service's OpenAI-compatible embedder path runs for real.

Every request is recorded in `calls` (path, Authorization header, body) for assertions.
Given `keys`, the stand-in is also as strict as a provider: a request whose bearer token is
not one of them is answered 401 in OpenAI's error shape (the set can change while it runs,
as a provider's accepted keys do when one is rotated).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from memorystore.config import SecretSource, ServiceLLM
from memorystore.service.embedding.offline import USEEmbedding
from memorystore.service.lifecycle.judge import JUDGE_HEADER, listed
from memorystore.service.ops.runner import UvicornThread
from memorystore_dev.bench.consistency import chat_completion

# keyword in the new messages → facts the "model" extracts
SCRIPT: dict[str, list[str]] = {
    "dark mode": ["Prefers dark mode for charts"],
    "hangzhou": ["Lives in Hangzhou", "Is based in China"],
    "west lake": ["Lives near West Lake"],
    "shanghai": ["Lives in Shanghai"],
    "light mode": ["Prefers light mode for charts"],
}
# the judge of outdated memories (service/lifecycle/judge.py): a new fact holding the key makes an
# existing memory holding one of the values outdated — what a competent model would answer
OUTDATES: dict[str, tuple[str, ...]] = {
    "shanghai": ("hangzhou", "west lake"),
    "light mode": ("dark mode",),
}


def judge_answer(listing: str) -> dict[str, Any]:
    """The stand-in's verdicts for one judge prompt (numbered NEW facts / EXISTING memories)."""
    new, old = ([text.lower() for text in part] for part in listed(listing))
    outdated = []
    for by, fact in enumerate(new, 1):
        for key, stale in OUTDATES.items():
            if key not in fact:
                continue
            for number, memory in enumerate(old, 1):
                if any(s in memory for s in stale) and key not in memory:
                    outdated.append({"existing": number, "by": by, "reason": f"now {key}"})
    # a new fact that says what an existing memory says, word for word but for case
    same = [
        {"new": by, "existing": number}
        for by, fact in enumerate(new, 1)
        for number, memory in enumerate(old, 1)
        if fact.rstrip(".") == memory.rstrip(".")
    ]
    return {"outdated": outdated, "same": same}


KEY_ENV = "SCRIPTED_KEY"  # the variable the service reads the stand-in's key from


@contextmanager
def scripted_llm(calls: list[dict[str, Any]]) -> Iterator[ServiceLLM]:
    """The stand-in serving on loopback, and the service's `llm` config pointing at it (its
    key from KEY_ENV, which the caller sets)."""
    with UvicornThread(build_app(calls)) as chat:
        yield ServiceLLM(
            provider="openai",
            model="scripted-1",
            base_url=f"{chat.url}/v1",
            api_key=SecretSource(env=KEY_ENV),
        )


class _WrongKey(Exception):
    """A request without one of the stand-in's `keys` (answered 401)."""


def build_app(calls: list[dict[str, Any]], keys: Collection[str] | None = None) -> FastAPI:
    app = FastAPI()

    async def record(request: Request) -> dict[str, Any]:
        body = await request.json()
        auth = request.headers.get("authorization")
        calls.append({"path": request.url.path, "auth": auth, "body": body})
        if keys is not None and auth not in {f"Bearer {key}" for key in keys}:
            raise _WrongKey
        return body

    @app.exception_handler(_WrongKey)
    async def wrong_key(request: Request, exc: _WrongKey) -> JSONResponse:
        error = {"message": "Incorrect API key provided", "code": "invalid_api_key"}
        return JSONResponse({"error": {**error, "type": "invalid_request_error"}}, 401)

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await record(request)
        if JUDGE_HEADER in str(body["messages"][0].get("content")):
            return chat_completion(body, json.dumps(judge_answer(body["messages"][-1]["content"])))
        conversation = body["messages"][-1]["content"].lower()
        # only the new messages count, not mem0's instructions with their examples
        new = conversation.split("## new messages", 1)[-1].split("## observation date", 1)[0]
        facts = [fact for key, found in SCRIPT.items() if key in new for fact in found]
        content = json.dumps({"memory": [{"id": str(i), "text": f} for i, f in enumerate(facts)]})
        return chat_completion(body, content)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> dict[str, Any]:
        body = await record(request)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = USEEmbedding().embed_batch(texts)
        return {
            "object": "list",
            "model": body["model"],
            "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    return app
