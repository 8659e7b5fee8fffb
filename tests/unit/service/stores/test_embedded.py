"""EdgeVectorStore against the real embedded engine: real shards on disk, no mocks.

Only what the embedded store alone has: its shards on disk (paths, crash recovery). The
contract it shares with PgVectorStore runs on both in tests/integration/test_store_contract.py."""

import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

from memorystore.service.stores.embedded import EdgeVectorStore

DIMS = 4


def new_id() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def open_store(tmp_path):
    """Factory for stores on tmp_path; every store it made is closed at teardown."""
    stores = []

    def factory(**kwargs) -> EdgeVectorStore:
        options = {
            "collection_name": "memories",
            "embedding_model_dims": DIMS,
            "path": str(tmp_path),
        }
        store = EdgeVectorStore(**(options | kwargs))
        stores.append(store)
        return store

    yield factory
    for store in stores:
        store.close()


def test_unclosed_process_crash_loses_no_acknowledged_write(tmp_path):
    """SIGKILL right after the writes return, with no flush or close: the WAL replays them."""
    ids = [new_id() for _ in range(50)]
    script = textwrap.dedent(
        f"""
        import os, signal
        from memorystore.service.stores.embedded import EdgeVectorStore
        store = EdgeVectorStore("memories", {DIMS}, {str(tmp_path)!r})
        ids = {ids!r}
        for i in ids:
            store.insert([[1.0, 0, 0, 0]], [{{"data": "x"}}], [i])
        store.update(ids[0], payload={{"data": "patched"}})
        store.delete(ids[1])
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = os.environ | {"PYTHONSAFEPATH": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, timeout=120
    )
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()

    store = EdgeVectorStore("memories", DIMS, str(tmp_path))
    try:
        assert store.count() == 49
        assert store.get(ids[0]).payload == {"data": "patched"}
        assert store.get(ids[1]) is None
    finally:
        store.close()


def test_reopen_with_other_dimension_names_the_shard_path(open_store, tmp_path):
    open_store().close()

    with pytest.raises(ValueError, match=r"^Shard .*memories stores 4-dimensional") as err:
        open_store(embedding_model_dims=8)
    assert str(tmp_path / "memories") in str(err.value)


def test_col_info_names_the_path_and_list_cols_exactly_the_shards_there(open_store, tmp_path):
    store = open_store()
    open_store(collection_name="other").insert([[1.0, 0, 0, 0]], [{}], [new_id()])

    assert store.col_info()["path"] == str(tmp_path / "memories")
    assert store.list_cols() == ["memories", "other"]

    store.delete_col()
    assert store.list_cols() == ["other"]


# --- purge: deleted points leave no bytes in the shard's files --------------------------------


def _files_holding(root, word: str) -> list[str]:
    needle = word.encode()
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


def test_a_deleted_payload_stays_on_disk_until_purge_and_not_after(open_store, tmp_path):
    """Why purge exists (measured on the engine): a delete alone leaves the payload in the
    segment and the WAL; the rewrite leaves it nowhere, and every live point as it was."""
    store = open_store(keyword_search=True)
    kept = {new_id(): f"kept note {i}" for i in range(30)}
    for point_id, text in kept.items():
        store.insert([[1.0, 0.5, 0, 0]], [{"data": text, "user_id": "alice"}], [point_id])
    secret = new_id()
    store.insert([[0, 1.0, 0, 0]], [{"data": "zqxvoblorgh lives here", "user_id": "bob"}], [secret])
    store.delete(secret)
    store._open().flush()  # what a close would write
    assert _files_holding(tmp_path, "zqxvoblorgh"), "the engine changed: revisit purge()"

    assert store.purge() == len(kept)

    assert _files_holding(tmp_path, "zqxvoblorgh") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]
    assert store.count() == len(kept) and store.get(secret) is None
    assert {i: store.get(i).payload["data"] for i in kept} == kept
    hits = store.keyword_search("kept note", top_k=100)
    assert {h.id for h in hits} == set(kept)  # the BM25 vectors came along
    assert store.count({"user_id": "alice"}) == len(kept)  # and the keyword indexes
    store.insert([[1.0, 0, 0, 0]], [{"data": "after"}], [new_id()])
    assert store.count() == len(kept) + 1


def test_reads_during_a_purge_never_meet_a_closed_shard(open_store):
    import threading

    store = open_store()
    for i in range(200):
        store.insert([[1.0, float(i), 0, 0]], [{"data": f"n{i}"}], [new_id()])
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                assert store.count() == 200
                assert len(store.search("", [1.0, 0, 0, 0], 5)) == 5
            except BaseException as exc:  # collected for the assertion
                errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        for _ in range(3):
            store.purge()
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert errors == []


@pytest.mark.parametrize("copy_name", [".memories.purge", ".memories.index"])
@pytest.mark.parametrize("state", ["copy-unfinished", "between-renames", "old-not-deleted"])
def test_a_purge_killed_at_any_step_leaves_one_whole_shard(tmp_path, state, copy_name):
    """The three states a killed purge or index build can leave (module docstring), made
    by hand."""
    import shutil

    ids = [new_id() for _ in range(20)]
    store = EdgeVectorStore("memories", DIMS, str(tmp_path))
    for i in ids:
        store.insert([[1.0, 0, 0, 0]], [{"data": "x"}], [i])
    store.close()
    live, copy, old = (
        tmp_path / "memories",
        tmp_path / copy_name,
        tmp_path / ".memories.old",
    )
    shutil.copytree(live, copy)  # a finished copy (same points)
    if state == "copy-unfinished":
        shutil.rmtree(copy / "segments")
    elif state == "between-renames":
        live.rename(old)
    else:  # the copy took its place, the old shard was not deleted yet
        live.rename(old)
        copy.rename(live)

    store = EdgeVectorStore("memories", DIMS, str(tmp_path))
    try:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["memories"]
        assert store.count() == len(ids) and all(store.get(i) is not None for i in ids)
    finally:
        store.close()


def test_a_process_killed_during_a_purge_keeps_every_live_point(tmp_path):
    """SIGKILL at several moments of a real purge: each next open finds every live point,
    none of the deleted ones, and no leftover directory; at least one kill landed while the
    copy was being made (it left `.memories.purge` behind)."""
    left_behind = []
    for delay_ms in (0, 10, 30, 60, 100, 150, 250, 400):
        root = tmp_path / f"after-{delay_ms}ms"
        kept = [new_id() for _ in range(300)]
        gone = [new_id() for _ in range(30)]
        script = textwrap.dedent(
            f"""
            import os, signal, threading, time
            from memorystore.service.stores.embedded import EdgeVectorStore
            store = EdgeVectorStore("memories", {DIMS}, {str(root)!r})
            for i in {kept + gone!r}:
                store.insert([[1.0, 0.2, 0, 0]], [{{"data": "y" * 200}}], [i])
            for i in {gone!r}:
                store.delete(i)
            threading.Thread(target=store.purge, daemon=True).start()
            time.sleep({delay_ms / 1000})
            os.kill(os.getpid(), signal.SIGKILL)
            """
        )
        env = os.environ | {"PYTHONSAFEPATH": "1"}
        result = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, timeout=120
        )
        assert result.returncode == -signal.SIGKILL, result.stderr.decode()
        left_behind += [p.name for p in root.iterdir() if p.name != "memories"]

        store = EdgeVectorStore("memories", DIMS, str(root))
        try:
            assert sorted(p.name for p in root.iterdir()) == ["memories"], delay_ms
            assert store.count() == len(kept), delay_ms
            assert all(store.get(i) is not None for i in kept)
            assert all(store.get(i) is None for i in gone)
        finally:
            store.close()
    assert ".memories.purge" in left_behind, "no kill landed during a purge: adjust the delays"
