"""Prometheus text (a /metrics page) summed by sample name, for the benchmarks and tests that
read the operator's or the API server's counters (prometheus_client's own parser)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families


def sample_sum(
    text: str, name: str, where: Callable[[dict[str, str]], bool] = lambda labels: True
) -> float:
    """The sum of the samples called `name` (e.g. `x_total`) whose labels pass `where`."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and where(sample.labels)
    )
