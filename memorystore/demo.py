"""The README's first command: memory carried from one session to the next, offline.

Session 1 tells the memory service three things about a user through the real
`mem0.AsyncMemoryClient`; session 2 starts from nothing, asks for a chart, and recalls
what it needs through the token-budgeted recall endpoint.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

SCRIPTS = {
    "en": {
        "session1": [
            "Please make my charts in dark mode by default.",
            "I always use matplotlib for plotting.",
            "I live in Hangzhou.",
        ],
        "session2": "Draw me a bar chart of our monthly sales.",
    },
    "zh": {
        "session1": [
            "我的图表默认请用深色模式。",
            "我画图一直用 matplotlib。",
            "我住在杭州。",
        ],
        "session2": "帮我画一张月度销售额的柱状图。",
    },
}


async def _play(url: str, api_key: str, language: str) -> None:
    import httpx
    from mem0 import AsyncMemoryClient

    script = SCRIPTS[language]
    user = "alice"
    client = await asyncio.to_thread(AsyncMemoryClient, api_key=api_key, host=url)
    print(f"\n== session 1 (user {user}) ==")
    for line in script["session1"]:
        print(f"user: {line}")
        result = await client.add([{"role": "user", "content": line}], user_id=user)
        for item in result["results"]:
            print(f"  context → memory [{item['event']}] {item['memory']}")
    await client.async_client.aclose()

    print(f"\n== session 2 (a new session, empty context, user {user}) ==")
    print(f"user: {script['session2']}")
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Token {api_key}"}
    ) as http:
        response = await http.post(
            "/v1/recall/", json={"query": script["session2"], "user_id": user}
        )
        response.raise_for_status()
        recall = response.json()
    print(f"  memory → context ({recall['tokens']} tokens, best first):")
    for memory in recall["memories"]:
        print(f"    [{memory['score']:.2f}] {memory['memory']}")


def run_demo(language: str = "en") -> int:
    from memorystore.service.runner import ServiceThread, embedded_config

    with tempfile.TemporaryDirectory(prefix="memorystore-demo-") as tmp:
        cfg = embedded_config(Path(tmp))
        print(
            "MemoryStore demo on the embedded default: in-process Qdrant engine, SQLite "
            f"history, offline '{cfg.embedder.provider}' embedder, no extraction model "
            "(text stored as written). Data in a temporary directory."
        )
        with ServiceThread(cfg) as svc:
            print(f"memory service listening on {svc.url}")
            asyncio.run(_play(svc.url, svc.api_key, language))
    print("\ndone: session 2 started empty and recalled session 1's preferences.")
    return 0
