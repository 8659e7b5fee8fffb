"""The embedded engine's HNSW graph, built in a child process on a copy and swapped in
(`EdgeVectorStore.build_index`, `stores/graph_builds.py`): real shards, a real child."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from memorystore.service.stores import embedded
from memorystore.service.stores.embedded import EdgeVectorStore, IndexBuildFailed
from memorystore.service.stores.graph_builds import (
    CHECK_EVERY_S,
    RETRY_MAX_S,
    GraphBuilds,
    build_if_due,
    keep_indexed,
)

DIMS = 384  # the engine indexes segments of 10,000 KB and more: ~6,700 of these vectors
POINTS = 8000


def _id(n: int) -> str:
    return str(uuid.UUID(int=n + 1))


def _vectors(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, DIMS)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    """A closed shard of POINTS points (dense and BM25), copied by each test."""
    root = tmp_path_factory.mktemp("filled")
    store = EdgeVectorStore("memories", DIMS, str(root), keyword_search=True)
    vectors = _vectors(POINTS, 0)
    for start in range(0, POINTS, 1000):
        batch = range(start, start + 1000)
        store.insert(
            [vectors[i].tolist() for i in batch],
            [{"data": f"note {i % 97} about topic{i % 13}", "user_id": "u"} for i in batch],
            [_id(i) for i in batch],
        )
    store.close()
    return root


@pytest.fixture
def store(filled, tmp_path):
    shutil.copytree(filled, tmp_path, dirs_exist_ok=True)
    opened = EdgeVectorStore("memories", DIMS, str(tmp_path), keyword_search=True, index_after=5000)
    yield opened
    opened.close()


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper may be slow)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _nearest(store: EdgeVectorStore, vector: np.ndarray) -> str:
    return store.search("", vector.tolist(), top_k=1, filters={"user_id": "u"})[0].id


def test_a_build_graphs_the_points_and_keeps_every_write_made_meanwhile(store, tmp_path):
    vectors = _vectors(POINTS, 0)
    assert store.unindexed() == POINTS and store.index_due()
    result: dict[str, object] = {}
    builder = threading.Thread(target=lambda: result.update(built=store.build_index()))
    builder.start()
    # writes while the child builds: new points, a payload patch, a vector change, deletes
    fresh = _vectors(50, 1)
    written = 0
    while builder.is_alive() or written < 50:
        if written < 50:
            store.insert(
                [fresh[written].tolist()],
                [{"data": "fresh", "user_id": "u"}],
                [_id(POINTS + written)],
            )
            written += 1
        time.sleep(0.01)
    store.update(_id(0), payload={"data": "patched after", "user_id": "u"})
    builder.join()
    assert result["built"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]  # no copy left behind

    assert store.unindexed() <= 50 + 1  # at most what came after the copy
    assert store.count() == POINTS + 50
    for n in range(50):
        assert store.get(_id(POINTS + n)) is not None
    # a stored vector finds itself through the graph; the meanwhile writes too
    for n in (1, 999, 4321, POINTS - 1):
        assert _nearest(store, vectors[n]) == _id(n)
    assert _nearest(store, fresh[7]) == _id(POINTS + 7)
    assert store.get(_id(0)).payload["data"] == "patched after"
    assert not store.index_due()


def test_writes_during_the_copy_are_replayed_in_order(store):
    """Writes racing the build's start: deletes and re-inserts of one id, in order."""
    vectors = _vectors(POINTS, 0)
    done = threading.Event()

    def churn() -> None:
        n = 0
        while not done.is_set():
            store.delete(_id(10))
            store.insert([vectors[10].tolist()], [{"data": f"v{n}", "user_id": "u"}], [_id(10)])
            n += 1
        store.update(_id(10), payload={"data": "last", "user_id": "u"})

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        assert store.build_index() is True
    finally:
        done.set()
        writer.join()
    assert store.get(_id(10)).payload["data"] == "last"
    assert store.count() == POINTS


def test_the_service_threads_keep_running_while_the_graph_is_built(store):
    """The engine's optimize() holds the GIL for its whole run; in the child it cannot."""
    ticks: list[float] = []
    builder = threading.Thread(target=store.build_index)
    start = time.monotonic()
    builder.start()
    while builder.is_alive():
        ticks.append(time.monotonic())
        time.sleep(0.02)
    took = time.monotonic() - start
    gaps = np.diff([start, *ticks, time.monotonic()])
    assert took > 0.5, "the build was too quick to show anything: raise POINTS"
    assert gaps.max() < took / 2, (gaps.max(), took)


def test_a_purge_cancels_a_build_in_flight_and_leaves_no_copy(store, tmp_path):
    """A purge replaces the shard: the build's copy (which holds what the purge erases) is
    killed and deleted before the purge returns."""
    result: dict[str, object] = {}
    builder = threading.Thread(target=lambda: result.update(built=store.build_index()))
    builder.start()
    while not (tmp_path / ".memories.index").exists() or store._indexer is None:
        time.sleep(0.005)
    store.delete(_id(3))
    assert store.purge() == POINTS - 1
    assert not (tmp_path / ".memories.index").exists()
    builder.join()
    assert result["built"] is False
    assert store.get(_id(3)) is None and store.count() == POINTS - 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]


def test_a_close_during_a_build_kills_the_child(store, tmp_path):
    builder = threading.Thread(target=store.build_index)
    builder.start()
    while store._indexer is None:
        time.sleep(0.005)
    child = store._indexer
    store.close()
    builder.join()
    assert child.poll() is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]


def test_a_failed_child_names_itself_and_leaves_the_shard_as_it_was(store, tmp_path, monkeypatch):
    monkeypatch.setattr(embedded, "_INDEXER", "memorystore.service.stores.no_such_indexer")
    with pytest.raises(IndexBuildFailed, match=r"exited with 1.*no_such_indexer"):
        store.build_index()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]
    assert store.count() == POINTS and store.unindexed() == POINTS
    assert store._indexer is None and store._journal is None


def test_a_copy_that_cannot_be_opened_is_dropped_and_the_shard_kept(store, tmp_path, monkeypatch):
    """After the child: loading the built copy or replaying onto it fails (a full disk)."""
    built = []

    def config_once_built():  # asked for when the built copy is opened, after the child
        built.append(True)
        raise OSError("No space left on device")

    monkeypatch.setattr(store, "_config", config_once_built)
    with pytest.raises(OSError, match="No space left"):
        store.build_index()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]
    assert built and store.count() == POINTS
    assert store._indexer is None and store._journal is None


def test_index_after_zero_never_builds(filled, tmp_path):
    shutil.copytree(filled, tmp_path, dirs_exist_ok=True)
    store = EdgeVectorStore("memories", DIMS, str(tmp_path), index_after=0)
    try:
        assert store.unindexed() == POINTS and not store.index_due()
    finally:
        store.close()


def test_the_indexer_refuses_to_outlive_a_parent_it_does_not_have(tmp_path):
    """The child checks its parent is the service that started it (PR_SET_PDEATHSIG set)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", embedded._INDEXER, str(tmp_path), "1"], capture_output=True
    )
    assert result.returncode == 1
    usage = subprocess.run([sys.executable, "-m", embedded._INDEXER], capture_output=True)
    assert usage.returncode == 2 and b"usage" in usage.stderr


def test_the_loop_builds_a_due_store_and_counts_it(store):
    registry = CollectorRegistry()
    builds = GraphBuilds(registry, lambda: [store])
    assert registry.get_sample_value("memorystore_vector_unindexed_points") == POINTS

    async def run() -> None:
        loop = asyncio.create_task(keep_indexed(lambda: [store], builds, every_s=0.01))
        while (
            registry.get_sample_value("memorystore_vector_index_builds_total", {"outcome": "built"})
            is None
        ):
            await asyncio.sleep(0.05)
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop

    asyncio.run(asyncio.wait_for(run(), 120))
    assert (
        registry.get_sample_value("memorystore_vector_index_builds_total", {"outcome": "built"})
        == 1
    )
    assert registry.get_sample_value("memorystore_vector_index_build_seconds_total") > 0
    assert not store.index_due()
    assert registry.get_sample_value("memorystore_vector_unindexed_points") == 0


def test_a_failed_build_is_counted_and_the_look_goes_on(store, monkeypatch):
    monkeypatch.setattr(embedded, "_INDEXER", "memorystore.service.stores.no_such_indexer")
    registry = CollectorRegistry()
    builds = GraphBuilds(registry, lambda: [store])
    assert asyncio.run(build_if_due(store, builds)) is False
    assert (
        registry.get_sample_value("memorystore_vector_index_builds_total", {"outcome": "failed"})
        == 1
    )
    assert store.index_due() and not builds.may_build(store)  # not at the next look
    assert asyncio.run(build_if_due(store, builds)) is False
    assert _failed(registry) == 1
    waits = [builds.failed(store) for _ in range(12)]  # doubling, then capped
    assert waits[:3] == [CHECK_EVERY_S * 4, CHECK_EVERY_S * 8, CHECK_EVERY_S * 16]
    assert waits[-1] == RETRY_MAX_S
    monkeypatch.setattr(embedded, "_INDEXER", "memorystore.service.stores.edge_indexer")
    builds._retry_at.clear()  # the wait is over
    assert asyncio.run(build_if_due(store, builds)) is True
    assert builds.may_build(store) and not builds._failures


def _failed(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("memorystore_vector_index_builds_total", {"outcome": "failed"})


def test_a_service_killed_mid_build_takes_its_child_along_and_reopens_whole(filled, tmp_path):
    """SIGKILL of the service while its child builds: the child dies with it (no writer
    left in a directory the next start deletes), and the next open finds one whole shard."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    shutil.copytree(filled, tmp_path, dirs_exist_ok=True)
    script = textwrap.dedent(
        f"""
        import os, signal, threading, time
        from memorystore.service.stores.embedded import EdgeVectorStore
        store = EdgeVectorStore("memories", {DIMS}, {str(tmp_path)!r})
        threading.Thread(target=store.build_index, daemon=True).start()
        while store._indexer is None:
            time.sleep(0.005)
        print(store._indexer.pid, flush=True)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = os.environ | {"PYTHONSAFEPATH": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, timeout=120
    )
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()
    child = int(result.stdout.split()[0])
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _running(child), "the indexer outlived the service"
    assert (tmp_path / ".memories.index").exists()  # the kill landed mid-build

    store = EdgeVectorStore("memories", DIMS, str(tmp_path))
    try:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]
        assert store.count() == POINTS and store.unindexed() == POINTS
    finally:
        store.close()
