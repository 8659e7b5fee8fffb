"""A process's memory while a test drives the service, against the service's default limit.

Why: the memory service's container has a default memory limit (the spec model's
`ServiceSpec().resources.limits["memory"]`, chosen from measurements) and is OOM-killed
above it, so the adversarial runs (the OpenAPI fuzz, the property tests) print the peak
resident set of the process that served them and assert it stays under that limit, read
from the one place it is defined.

Two ways to read a peak: `RssWatch` for this process (the services run in it, in uvicorn
threads, beside the test's own machinery, so the figure is an upper bound on the service's),
`peak_of(pid)` for a `memorystore serve` child (its VmHWM).
"""

from __future__ import annotations

import resource
from pathlib import Path

from lightkube.utils.quantity import parse_quantity

from memorystore.spec import ServiceSpec

__all__ = ["MIB", "RssWatch", "peak_of", "rss_of", "service_memory_limit"]

MIB = 1024 * 1024


def service_memory_limit() -> int:
    """The memory service's default memory limit in bytes (the spec model's default)."""
    quantity = ServiceSpec().resources.limits["memory"]
    return int(parse_quantity(quantity))


def _status(pid: int | str, field: str) -> int:
    """A VmRSS/VmHWM-style field of /proc/<pid>/status, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"/proc/{pid}/status has no {field}")


def rss_of(pid: int | str = "self") -> int:
    return _status(pid, "VmRSS")


def peak_of(pid: int | str = "self") -> int:
    """The process's peak resident set (VmHWM) since it started or since its peak was reset."""
    return _status(pid, "VmHWM")


class RssWatch:
    """This process's resident set from now on: the baseline now, the peak later.

    The peak is reset at the start when the kernel allows (`/proc/self/clear_refs` 5), so it
    is the peak of this run; otherwise it is the process's lifetime peak (`ru_maxrss`),
    still an upper bound. `reset` says which."""

    def __init__(self) -> None:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.reset = True
        except OSError:
            self.reset = False
        self.baseline = rss_of()

    def peak(self) -> int:
        lifetime = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        return peak_of() if self.reset else max(lifetime, peak_of())

    def check(self, label: str) -> str:
        """A line to print: the peak since the baseline, which must be under the memory
        service's default memory limit (an AssertionError carrying the line otherwise)."""
        peak = self.peak()
        limit = service_memory_limit()
        line = (
            f"{label}: peak RSS {peak / MIB:.0f} MiB (baseline {self.baseline / MIB:.0f} MiB, "
            f"growth {(peak - self.baseline) / MIB:+.0f} MiB; "
            f"{'peak of this run' if self.reset else 'lifetime peak of the process'}) "
            f"against the service's default memory limit {limit / MIB:.0f} MiB"
        )
        assert peak < limit, line
        return line
