"""A bounded, thread-safe LRU of query vectors: a question asked again is not embedded again.

Agents re-ask (the same recall query each turn of a topic, the same probe across users), and
embedding is most of a search's time. Vectors are stored as float32 arrays (1.5 KB each at
384 dimensions), so the default 1,024 entries hold about 1.6 MB.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

__all__ = ["QueryCache"]


class QueryCache:
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"query cache size must be at least 1, got {size}")
        self.size = size
        self._entries: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> np.ndarray | None:
        with self._lock:
            vector = self._entries.get(key)
            if vector is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return vector

    def put(self, key: Hashable, vector: np.ndarray) -> None:
        frozen = np.array(vector, dtype=np.float32)
        frozen.setflags(write=False)  # callers share it
        with self._lock:
            self._entries[key] = frozen
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
