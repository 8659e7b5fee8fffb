"""Polling for eventually-consistent state (controllers, the API server's OpenAPI)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float = 60, every: float = 0.5) -> T:
    """Return the first truthy result of `check`; fail with the last value after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"condition not met in {timeout} s (last: {last!r})")
