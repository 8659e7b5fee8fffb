"""`memorystore bench service --replicas 1,2,3 --tier embedded,managed,postgres`: scale-out.

Per configuration (tier × replicas), in one run: a fresh store filled with N memories (50
users, written as the service writes them: payload, BM25 terms, history), then R real
`memorystore serve` processes on it, each under the same CPU limit (a cgroup quota, as a
pod's `resources.limits.cpu`), then
- **adds/s**: C concurrent clients, each its own user, sending conversation turns
  round-robin through the replicas (every acknowledged add is checked to be stored);
- **search p50 / p99**: one client, searches of the filled users round-robin through the
  replicas, end to end (HTTP, query embedding, retrieval).

Tiers: `embedded` (the engine in the service's process, SQLite state), `managed` (vectors on
a real Qdrant server, the vendored binary, state in PostgreSQL as several replicas of a
managed store need), `postgres` (state and vectors in PostgreSQL). Baselines measured in the
same run: one replica of the same tier (adds), and the embedded engine (search). The embedded
tier runs one replica only: its engine locks its files for one process. Vectors for the
fill: as in `bench backup` (500 texts embedded for real, reused with noise), because
embedding 10k texts one by one takes minutes and search cost does not depend on which texts
they are.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from memorystore_dev.bench.backup import QUERIES, fill
from memorystore_dev.qdrant import QdrantServer
from memorystore_dev.replicas import Replicas, Tier, cpu_limit_problem, write_config

GOAL_SCALE = 1.7  # 2 replicas' adds/s over one's, PostgreSQL tier
GOAL_SEARCH = 1.5  # PostgreSQL tier's search p50 over the embedded engine's


@dataclass
class Row:
    tier: str
    replicas: int
    adds: int
    acked: int
    stored: int
    adds_per_s: float
    search_p50_ms: float
    search_p99_ms: float


def _engine_config(config: Path, data_dir: Path) -> Any:
    """The replicas' config as the first replica reads it (for the fill); the environment
    it expands is set for the read only."""
    from unittest import mock

    from memorystore.config import ServiceConfig, load_model

    env = {
        "MEMORYSTORE_PORT": "0",
        "MEMORYSTORE_DATA_DIR": str(data_dir),
        "MEMORYSTORE_API_KEY": "x",
    }
    with mock.patch.dict(os.environ, env):
        return load_model(ServiceConfig, config)


def _fill(config: Path, data_dir: Path, memories: int) -> None:
    from memorystore.service.engine.core import MemoryEngine
    from memorystore.service.services import STATE_MIGRATIONS

    engine = MemoryEngine(_engine_config(config, data_dir))
    try:
        engine.prepare(STATE_MIGRATIONS)
        fill(engine, memories)
    finally:
        engine.close()


async def _adds(urls: list[str], headers: dict[str, str], clients: int, total: int) -> tuple:
    acked: list[str] = []

    async def writer(client: httpx.AsyncClient, w: int) -> None:
        for i in range(total // clients):
            url = urls[(w + i) % len(urls)]
            body = {
                "messages": [{"role": "user", "content": f"turn {i} of writer {w}", "name": "w"}],
                "user_id": f"writer-{w}",
            }
            response = await client.post(f"{url}/v3/memories/add/", json=body)
            if response.status_code == 200:
                acked.append(response.json()["results"][0]["id"])

    async with httpx.AsyncClient(headers=headers, timeout=120) as client:
        start = time.perf_counter()
        await asyncio.gather(*(writer(client, w) for w in range(clients)))
        wall = time.perf_counter() - start
        stored = 0
        for w in range(clients):
            listed = await client.post(
                f"{urls[0]}/v3/memories/", json={"filters": {"user_id": f"writer-{w}"}}
            )
            stored += listed.json()["count"]
    return len(acked), stored, (total // clients) * clients / wall


async def _searches(urls: list[str], headers: dict[str, str], count: int) -> list[float]:
    samples = []
    async with httpx.AsyncClient(headers=headers, timeout=60) as client:
        for i in range(count):
            body = {"query": QUERIES[i % len(QUERIES)], "filters": {"user_id": f"user-{i % 50}"}}
            started = time.perf_counter()
            response = await client.post(f"{urls[i % len(urls)]}/v3/memories/search/", json=body)
            samples.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
    return samples


def _measure(
    root: Path,
    dsn: str | None,
    qdrant: QdrantServer | None,
    tier: Tier,
    replicas: int,
    memories: int,
    adds: int,
    searches: int,
    clients: int,
    cpus: float | None,
    embedder: str,
) -> Row:
    directory = root / f"{tier}-{replicas}"
    config = write_config(directory, dsn, tier, embedder, qdrant=qdrant)
    print(f"{tier} × {replicas}: filling {memories} memories …", file=sys.stderr)
    _fill(config, directory / "replica-0", memories)
    with Replicas(directory, dsn, replicas, tier, embedder, cpus, qdrant=qdrant) as running:
        urls = [s.url for s in running.services]
        asyncio.run(_searches(urls, running.headers, 10))  # warm every replica's model
        print(f"{tier} × {replicas}: {adds} adds from {clients} clients …", file=sys.stderr)
        acked, stored, per_s = asyncio.run(_adds(urls, running.headers, clients, adds))
        print(f"{tier} × {replicas}: {searches} searches …", file=sys.stderr)
        samples = asyncio.run(_searches(urls, running.headers, searches))
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return Row(tier, replicas, adds, acked, stored, per_s, q[49], q[98])


def table(rows: list[Row], memories: int, cpus: float | None, clients: int) -> str:
    limit = f"{cpus:g} CPU per replica (cgroup quota)" if cpus else "no CPU limit"
    lines = [
        f"memorystore bench service (scale-out) — {memories} memories of 50 users, {limit}, "
        f"{clients} writers, {os.cpu_count()} CPUs on the machine",
        "",
        "| tier | replicas | adds/s | vs 1 replica | acked / stored | search p50 ms | p99 ms | "
        "p50 vs embedded |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    one = {r.tier: r.adds_per_s for r in rows if r.replicas == 1}
    embedded = next((r.search_p50_ms for r in rows if r.tier == "embedded"), None)
    for r in rows:
        scale = f"{r.adds_per_s / one[r.tier]:.2f}×" if r.tier in one else "–"
        vs = f"{r.search_p50_ms / embedded:.2f}×" if embedded else "–"
        lines.append(
            f"| {r.tier} | {r.replicas} | {r.adds_per_s:.1f} | {scale} | {r.acked} / {r.stored} | "
            f"{r.search_p50_ms:.1f} | {r.search_p99_ms:.1f} | {vs} |"
        )
    two = next((r for r in rows if r.tier == "postgres" and r.replicas == 2), None)
    if two is not None and "postgres" in one:
        ratio = two.adds_per_s / one["postgres"]
        met = "met" if ratio >= GOAL_SCALE else "NOT met"
        lines.append(
            f"\ngoal: 2 replicas ≥ {GOAL_SCALE}× the adds/s of one (PostgreSQL): "
            f"{ratio:.2f}× — {met}"
        )
    pg1 = next((r for r in rows if r.tier == "postgres" and r.replicas == 1), None)
    if pg1 is not None and embedded:
        ratio = pg1.search_p50_ms / embedded
        met = "met" if ratio <= GOAL_SEARCH else "NOT met"
        lines.append(
            f"goal: PostgreSQL search p50 within {GOAL_SEARCH}× of the embedded engine "
            f"at {memories}: {ratio:.2f}× — {met}"
        )
    return "\n".join(lines)


def run_scaleout_bench(
    replicas: list[int],
    tiers: list[str],
    memories: int,
    adds: int,
    searches: int,
    clients: int,
    cpus: float | None,
    embedder: str,
    as_json: bool,
) -> int:
    from memorystore_dev.postgres import PostgresServer
    from memorystore_dev.qdrant import QdrantServer

    if cpus and cpu_limit_problem():
        print(f"no CPU limit: {cpu_limit_problem()}", file=sys.stderr)
        cpus = None
    rows: list[Row] = []
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memorystore-bench-")))
        needs_pg = "postgres" in tiers or "managed" in tiers
        server = stack.enter_context(PostgresServer()) if needs_pg else None
        # TLS and a key, as the operator runs a managed Qdrant by default
        qdrant = stack.enter_context(QdrantServer(tls=True)) if "managed" in tiers else None
        for tier in tiers:
            for n in replicas:
                if tier == "embedded" and n > 1:
                    continue  # one process owns the engine's files
                dsn = None
                if tier in ("postgres", "managed"):
                    assert server is not None
                    dsn = server.database(f"bench_{uuid.uuid4().hex[:10]}")
                rows.append(
                    _measure(
                        root,
                        dsn,
                        qdrant,
                        tier,
                        n,
                        memories,
                        adds,
                        searches,
                        clients,
                        cpus,  # type: ignore[arg-type]
                        embedder,
                    )
                )
    if as_json:
        print(json.dumps({"memories": memories, "cpus": cpus, "rows": [asdict(r) for r in rows]}))
    else:
        print(table(rows, memories, cpus, clients))
    lost = [r for r in rows if r.stored < r.acked]
    return 1 if lost else 0
