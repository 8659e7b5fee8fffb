"""`memorystore bench service`: the service's cost over calling mem0 directly, measured.

Per size N, for one user: N adds then S searches, first through the HTTP service (a real
`memorystore serve` process on loopback) and then directly on mem0's AsyncMemory with the
same config, in one run; then adds from C concurrent HTTP clients, checked for loss.
The service process's memory is read from /proc at each step (VmRSS: resident now; VmHWM:
its peak so far): idle once ready, after the adds, after the searches. Those figures are
what the operator's default requests and limits for the memory service are derived from
(docs/kubernetes.md, "Sizing").
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import yaml

from memorystore.service.ops.runner import wait_until_ready

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


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)} "
        f"(note {i})"
        for i in range(n)
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


async def _timed(calls: list) -> tuple[list[float], float]:
    samples = []
    start = time.perf_counter()
    for call in calls:
        t = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t)
    return samples, time.perf_counter() - start


def _config(data_dir: Path, embedder: str, port: int, threads: int) -> dict:
    return {
        "tenant": "bench",
        "listen": {"host": "127.0.0.1", "port": port},
        "dataDir": str(data_dir),
        "apiKey": {"file": str(data_dir / "api-key"), "generate": True},
        "vectorStore": {"embedded": {}},
        "embedder": {"provider": embedder, "threads": threads},
        # mem0's own dense search and plain inserts, as on the direct side: this bench
        # measures what the service layer costs; `bench locomo` and `bench agent` measure
        # the retrieval defaults
        "retrieval": {
            "hybrid": False,
            "neighbourWeight": 0,
            "speakerWeight": 0,
            "timeWeight": 0,
            "context": False,
        },
    }


class _ServiceProcess:
    """The service as users run it: `memorystore serve`, its own process."""

    def __init__(self, data_dir: Path, embedder: str, threads: int) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        data_dir.mkdir(parents=True)
        cfg = data_dir / "service.yaml"
        cfg.write_text(yaml.safe_dump(_config(data_dir, embedder, self.port, threads)))
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memorystore",
                "--log-level",
                "WARNING",
                "serve",
                "--config",
                str(cfg),
            ],
        )
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until_ready(self.url, self.proc)
        self.key = (data_dir / "api-key").read_text().strip()

    def memory(self, step: str) -> Memory:
        """The process's memory now, also printed to stderr (a long run shows it at once)."""
        memory = Memory.of(self.proc.pid)
        print(
            f"  service memory, {step}: VmRSS {memory.rss_mib:.0f} MiB, "
            f"VmHWM {memory.hwm_mib:.0f} MiB",
            file=sys.stderr,
        )
        return memory

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


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


async def _http_phase(svc: _ServiceProcess, adds: list[str], queries: list[str]) -> dict:
    headers = {"Authorization": f"Token {svc.key}"}
    memory = {"idle": svc.memory("idle")}
    async with httpx.AsyncClient(base_url=svc.url, headers=headers, timeout=60) as client:

        def add(text: str):
            body = {
                "messages": [{"role": "user", "content": text}],
                "user_id": "bench",
                "infer": False,
            }
            return lambda: client.post("/v3/memories/add/", json=body)

        def search(q: str):
            body = {"query": q, "filters": {"user_id": "bench"}, "top_k": 10}
            return lambda: client.post("/v3/memories/search/", json=body)

        add_s, add_wall = await _timed([add(t) for t in adds])
        memory["added"] = svc.memory(f"after {len(adds)} adds")
        search_s, search_wall = await _timed([search(q) for q in queries])
        memory["searched"] = svc.memory(f"after {len(queries)} searches")
    return {
        "add": Stats.of(add_s, add_wall),
        "search": Stats.of(search_s, search_wall),
        "memory": memory,
    }


async def _direct_phase(
    data_dir: Path, embedder: str, threads: int, adds: list[str], queries: list[str]
) -> dict:
    from mem0 import AsyncMemory

    from memorystore.config import ServiceConfig
    from memorystore.service.engine.mem0_config import mem0_config

    cfg = ServiceConfig.model_validate(_config(data_dir, embedder, 0, threads))
    memory = AsyncMemory(mem0_config(cfg))
    try:
        add_s, add_wall = await _timed(
            [lambda t=t: memory.add(t, user_id="bench", infer=False) for t in adds]
        )
        search_s, search_wall = await _timed(
            [lambda q=q: memory.search(q, filters={"user_id": "bench"}, top_k=10) for q in queries]
        )
    finally:
        memory.vector_store.close()
        memory.db.close()
    return {"add": Stats.of(add_s, add_wall), "search": Stats.of(search_s, search_wall)}


async def _concurrent_adds(url: str, key: str, clients: int, per_client: int) -> dict:
    headers = {"Authorization": f"Token {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:

        async def writer(w: int) -> int:
            ok = 0
            for i in range(per_client):
                body = {
                    "messages": [{"role": "user", "content": f"writer {w} wrote fact {i}"}],
                    "user_id": "concurrent",
                    "infer": False,
                }
                ok += (await client.post("/v3/memories/add/", json=body)).status_code == 200
            return ok

        start = time.perf_counter()
        ok = sum(await asyncio.gather(*(writer(w) for w in range(clients))))
        wall = time.perf_counter() - start
        listed = await client.post("/v3/memories/", json={"filters": {"user_id": "concurrent"}})
        stored = listed.json()["count"]
    sent = clients * per_client
    return {"clients": clients, "sent": sent, "ok": ok, "stored": stored, "adds_per_s": sent / wall}


def _as_json(value: Stats | dict[str, Memory]) -> dict:
    if isinstance(value, Stats):
        return asdict(value)
    return {step: asdict(m) for step, m in value.items()}


def _table(results: list[dict], concurrent: dict, embedder: str, threads: int) -> str:
    lines = [
        f"memorystore bench service — embedder {embedder} ({threads} thread(s) per call), "
        f"one user, embedded Qdrant engine, {os.cpu_count()} CPUs",
        "",
        "| size | op | path | p50 ms | p95 ms | p99 ms | ops/s |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for r in results:
        for op in ("add", "search"):
            for path in ("http", "direct"):
                s = r[path][op]
                lines.append(
                    f"| {r['size']} | {op} | {path} | {s.p50_ms:.2f} | {s.p95_ms:.2f} | "
                    f"{s.p99_ms:.2f} | {s.per_s:.0f} |"
                )
            ratio = r["http"][op].p50_ms / r["direct"][op].p50_ms
            lines.append(f"| {r['size']} | {op} | **http/direct p50** | {ratio:.2f}× | | | |")
    lines += [
        "",
        "memory of the service process (MiB; VmRSS now, VmHWM its peak so far):",
        "",
        "| size | idle RSS | after adds RSS | after searches RSS | peak (VmHWM) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        m = r["http"]["memory"]
        lines.append(
            f"| {r['size']} | {m['idle'].rss_mib:.0f} | {m['added'].rss_mib:.0f} | "
            f"{m['searched'].rss_mib:.0f} | {m['searched'].hwm_mib:.0f} |"
        )
    c = concurrent
    lines += [
        "",
        f"concurrent adds over HTTP: {c['clients']} clients, {c['sent']} sent, {c['ok']} "
        f"acknowledged, {c['stored']} stored, {c['adds_per_s']:.0f} adds/s",
    ]
    return "\n".join(lines)


def run_service_bench(
    sizes: list[int], searches: int, clients: int, embedder: str, threads: int, as_json: bool
) -> int:
    results = []
    with tempfile.TemporaryDirectory(prefix="memorystore-bench-") as tmp:
        root = Path(tmp)
        queries = [t.split(" (note")[0] for t in texts(searches, seed=7)]
        for size in sizes:
            adds = texts(size, seed=size)
            print(f"size {size}: HTTP service …", file=sys.stderr)
            svc = _ServiceProcess(root / f"http-{size}", embedder, threads)
            try:
                http = asyncio.run(_http_phase(svc, adds, queries))
            finally:
                svc.stop()
            print(f"size {size}: direct mem0 …", file=sys.stderr)
            direct = asyncio.run(
                _direct_phase(root / f"direct-{size}", embedder, threads, adds, queries)
            )
            results.append({"size": size, "http": http, "direct": direct})
        print(f"concurrent adds ({clients} clients) …", file=sys.stderr)
        svc = _ServiceProcess(root / "concurrent", embedder, threads)
        try:
            concurrent = asyncio.run(_concurrent_adds(svc.url, svc.key, clients, 100))
        finally:
            svc.stop()
    if as_json:
        payload = {
            "embedder": embedder,
            "threads": threads,
            "sizes": [
                {
                    "size": r["size"],
                    **{p: {op: _as_json(s) for op, s in r[p].items()} for p in ("http", "direct")},
                }
                for r in results
            ],
            "concurrent": concurrent,
        }
        print(json.dumps(payload, indent=2))
    else:
        print(_table(results, concurrent, embedder, threads))
    return 0 if concurrent["stored"] == concurrent["sent"] else 1
