"""What every recall benchmark checks in its arguments before it starts a service."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TypeVar

from memorystore.spec import OFFLINE_EMBEDDER_DIMS
from memorystore_dev.bench.tiers import tier_problem

T = TypeVar("T")


def problems(
    names: Iterable[str],
    configs: Iterable[str],
    embedder: str,
    counts: dict[str, int | None],
    tiers: Iterable[str] = ("embedded",),
) -> list[str]:
    """One line per bad argument: unknown configurations or tiers, a remote embedder (the
    benches run offline), a count option (`--users`, `--conversations`) under 1."""
    known = list(configs)
    found = []
    unknown = [n for n in names if n not in known]
    if unknown:
        found.append(f"unknown config(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    if embedder not in OFFLINE_EMBEDDER_DIMS:
        found.append(
            f"embedder {embedder!r}: the bench runs offline, choose one of "
            f"{', '.join(OFFLINE_EMBEDDER_DIMS)}"
        )
    for option, value in counts.items():
        if value is not None and value < 1:
            found.append(f"--{option} must be at least 1")
    problem = tier_problem(list(tiers))
    if problem:
        found.append(problem)
    return found


def loaded(
    bench: str, problems: list[str], load: Callable[[], T], error: type[Exception]
) -> T | None:
    """The bench's data when its arguments are good and it loads (`error` is the loader's
    refusal); else None, after printing every problem, each naming the bench."""
    data = None
    if not problems:
        try:
            data = load()
        except error as exc:
            problems = [*problems, str(exc)]
    for problem in problems:
        print(f"memorystore bench {bench}: {problem}", file=sys.stderr)
    return None if problems else data
