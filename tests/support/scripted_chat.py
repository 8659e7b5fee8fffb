"""STAND-IN: a scripted OpenAI-compatible chat model, for the provider we cannot reach here.

It answers /v1/chat/completions with canned extraction results chosen by keywords in the
prompt, so mem0's real OpenAI provider, prompt building and parsing all run for real.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import FastAPI, Request

# keyword in the conversation → facts the "model" extracts
SCRIPT: dict[str, list[str]] = {
    "dark mode": ["Prefers dark mode for charts"],
    "hangzhou": ["Lives in Hangzhou", "Is based in China"],
}


def build_app(calls: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await request.json()
        calls.append(body)
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

    return app
