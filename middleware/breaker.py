"""A circuit breaker: stop calling a failing memory service for a cool-down, then probe it.

Without one, every agent turn waits out the full timeout while the service is down. The
breaker is per process (one per shared client) and clock-injectable so tests need no sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum


class State(StrEnum):
    CLOSED = "closed"  # calls go through
    OPEN = "open"  # calls are skipped until the cool-down ends
    HALF_OPEN = "half_open"  # one probe call is in flight; its outcome decides


class CircuitBreaker:
    def __init__(
        self,
        failure_threshold: int,
        cooldown_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_threshold = failure_threshold
        self.cooldown_seconds = cooldown_seconds
        self._clock = clock
        self._state = State.CLOSED
        self._failures = 0
        self._opened_at = 0.0

    @property
    def state(self) -> State:
        return self._state

    def allow(self) -> bool:
        """May a call go out now? After the cool-down exactly one caller gets to probe."""
        if self._state is State.CLOSED:
            return True
        if self._state is State.OPEN and self._clock() - self._opened_at >= self.cooldown_seconds:
            self._state = State.HALF_OPEN
            return True
        return False

    def would_allow(self) -> bool:
        """Like `allow`, without claiming the probe (for deciding whether to build middleware)."""
        if self._state is State.CLOSED:
            return True
        return self._state is State.OPEN and (
            self._clock() - self._opened_at >= self.cooldown_seconds
        )

    def success(self) -> None:
        self._state = State.CLOSED
        self._failures = 0

    def failure(self) -> None:
        self._failures += 1
        if self._state is State.HALF_OPEN or self._failures >= self.failure_threshold:
            self._state = State.OPEN
            self._opened_at = self._clock()

    def release(self) -> None:
        """A probe ended without a verdict (e.g. cancelled): let the next caller probe."""
        if self._state is State.HALF_OPEN:
            self._state = State.OPEN
            self._opened_at = self._clock() - self.cooldown_seconds
