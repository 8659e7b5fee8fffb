"""Agent-side metrics, in the process's default Prometheus registry (the agent app exposes it).

A fail-open memory is invisible by design, so its failures must show up here instead.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CALLS = Counter(
    "memorystore_agent_calls_total",
    "Calls from agent middleware to the memory service, by operation and outcome "
    "(ok, rejected, error, timeout, skipped: breaker open).",
    ["op", "outcome"],
)
LATENCY = Histogram(
    "memorystore_agent_call_seconds",
    "Duration of calls to the memory service that went out.",
    ["op"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
FAIL_OPEN = Counter(
    "memorystore_agent_fail_open_total",
    "Turns or tool calls that went on without memory because the service failed.",
    ["op"],
)
BREAKER_OPEN = Gauge(
    "memorystore_agent_breaker_open",
    "1 while the circuit breaker skips calls to the memory service.",
)
