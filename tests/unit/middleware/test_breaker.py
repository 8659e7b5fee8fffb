"""The circuit breaker's state machine, on a fake clock (no sleeping)."""

from __future__ import annotations

from memorystore.middleware.breaker import CircuitBreaker, State


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_threshold_consecutive_failures_only():
    breaker = CircuitBreaker(3, 30, clock=Clock())
    breaker.failure()
    breaker.failure()
    breaker.success()  # a success in between resets the count
    breaker.failure()
    breaker.failure()
    assert breaker.state is State.CLOSED and breaker.allow()
    breaker.failure()
    assert breaker.state is State.OPEN and not breaker.allow()


def test_after_the_cooldown_exactly_one_probe_goes_out():
    clock = Clock()
    breaker = CircuitBreaker(1, 30, clock=clock)
    breaker.failure()
    clock.now += 29.9
    assert not breaker.would_allow() and not breaker.allow()
    clock.now += 0.1
    assert breaker.would_allow()
    assert breaker.allow(), "the first caller after the cool-down probes"
    assert breaker.state is State.HALF_OPEN
    assert not breaker.allow(), "others wait for the probe's verdict"


def test_probe_success_closes_and_probe_failure_reopens_for_a_full_cooldown():
    clock = Clock()
    breaker = CircuitBreaker(1, 30, clock=clock)
    breaker.failure()
    clock.now += 30
    assert breaker.allow()
    breaker.failure()
    assert breaker.state is State.OPEN
    clock.now += 29
    assert not breaker.allow()
    clock.now += 1
    assert breaker.allow()
    breaker.success()
    assert breaker.state is State.CLOSED and breaker.allow()


def test_a_probe_without_verdict_lets_the_next_caller_probe_at_once():
    clock = Clock()
    breaker = CircuitBreaker(1, 30, clock=clock)
    breaker.failure()
    clock.now += 30
    assert breaker.allow()
    breaker.release()  # e.g. the probing turn was cancelled
    assert breaker.allow()
