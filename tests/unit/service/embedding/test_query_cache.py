"""The query cache is a bounded LRU that callers cannot corrupt."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorystore.service.embedding.query_cache import QueryCache


def test_least_recently_used_goes_first():
    cache = QueryCache(2)
    cache.put("a", np.ones(3))
    cache.put("b", np.zeros(3))
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("c", np.ones(3))
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert len(cache) == 2


def test_a_stored_vector_is_a_read_only_copy():
    cache = QueryCache(1)
    vector = np.ones(3, dtype=np.float32)
    cache.put("q", vector)
    vector[0] = 5.0
    stored = cache.get("q")
    assert stored is not None and stored[0] == 1.0
    with pytest.raises(ValueError):
        stored[0] = 2.0


def test_a_size_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        QueryCache(0)


@given(st.integers(1, 8), st.lists(st.tuples(st.booleans(), st.integers(0, 12)), max_size=80))
def test_it_never_holds_more_than_its_size_and_returns_what_was_put(size, operations):
    cache = QueryCache(size)
    model: dict[int, float] = {}
    for put, key in operations:
        if put:
            cache.put(key, np.full(2, key, dtype=np.float32))
            model[key] = key
        else:
            got = cache.get(key)
            assert got is None or (key in model and got[0] == model[key])
        assert len(cache) <= size


def test_threads_share_it_safely():
    cache = QueryCache(64)

    def work(offset: int) -> None:
        for i in range(2000):
            key = (offset + i) % 100
            if cache.get(key) is None:
                cache.put(key, np.full(2, key, dtype=np.float32))

    threads = [threading.Thread(target=work, args=(n * 7,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 64
    assert cache.hits + cache.misses == 8000
