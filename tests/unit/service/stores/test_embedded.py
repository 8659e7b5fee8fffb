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
