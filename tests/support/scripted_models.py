"""STAND-INS for the model providers we cannot reach here, speaking the OpenAI protocol.

- /v1/chat/completions: a scripted chat model. It answers with canned extraction results
  chosen by keywords in the conversation, so mem0's real OpenAI provider, prompt building
  and parsing run for real.
- /v1/embeddings: an offline embedding model (the real USE model behind the OpenAI
  embeddings protocol), so the service's OpenAI-compatible embedder path runs for real.

Every request is recorded in `calls` (path, Authorization header, body) for assertions.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import FastAPI, Request

from memorystore.service.embedders import USEEmbedding

# keyword in the new messages → facts the "model" extracts
SCRIPT: dict[str, list[str]] = {
    "dark mode": ["Prefers dark mode for charts"],
    "hangzhou": ["Lives in Hangzhou", "Is based in China"],
    "west lake": ["Lives near West Lake"],
}


def build_app(calls: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    async def record(request: Request) -> dict[str, Any]:
        body = await request.json()
        calls.append(
            {"path": request.url.path, "auth": request.headers.get("authorization"), "body": body}
        )
        return body

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await record(request)
        conversation = body["messages"][-1]["content"].lower()
        # only the new messages count, not mem0's instructions with their examples
        new = conversation.split("## new messages", 1)[-1].split("## observation date", 1)[0]
        facts = [fact for key, found in SCRIPT.items() if key in new for fact in found]
        content = json.dumps({"memory": [{"id": str(i), "text": f} for i, f in enumerate(facts)]})
        return {
            "id": "scripted",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

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
