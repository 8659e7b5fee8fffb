"""`memorystore bench rules`: what the offline text rules cost on every write, per language.

Why a benchmark and not a unit test: the rules run on every write (de-duplication against
the candidates, supersession against about ten older memories), so their cost matters, but a
wall-clock bound inside a unit test fails on a slow or busy machine (it did, at 407 µs per
pair against a 300 µs bound) and proves nothing on a fast one. Here the figures are printed.

Texts: the user turns and labelled facts of the consistency benchmark's data set
(`consistency_data.json`), English and Chinese users apart. Each figure is the best of
`rounds` rounds (against load), per call:

- `dedup pair`: `dedup.duplicate(new, old)` on two texts of the same user; *uncached* the
  two texts are new (each analysed for the first time, as a write's new text is), *cached*
  the same pairs again (the per-text analysis is cached, as an older memory's is);
- `retired_by, 10 candidates`: `supersede.retired_by(new, ten older memories)`; *cached* the
  older memories were analysed before (they were, when written) and only the new text is
  new, *uncached* all eleven texts are new.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memorystore.rules.dedup import duplicate
from memorystore.rules.supersede import frames, retired_by

DATA = Path(__file__).with_name("consistency_data.json")
LANGUAGES = ("en", "zh")
CANDIDATES = 10
FIELDS = ("measure", "language", "cached_us", "uncached_us", "calls")


def texts(language: str, data: Path = DATA) -> list[str]:
    """The data set's user turns and fact texts of one language's users, in order."""
    users = json.loads(data.read_text(encoding="utf-8"))["users"]
    out: list[str] = []
    for user in users:
        if user["language"] != language:
            continue
        for session in user["sessions"]:
            for turn in session["turns"]:
                out.append(turn["user"])
                out.extend(fact["text"] for fact in turn["facts"])
    return out


def _best(rounds: int, calls: int, run: Callable[[int], None]) -> float:
    """The fastest round's time per call, in microseconds."""
    best = float("inf")
    for r in range(rounds):
        start = time.perf_counter()
        run(r)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def _dedup_row(language: str, pool: list[str], calls: int, rounds: int) -> dict[str, Any]:
    def pairs(r: int) -> list[tuple[str, str]]:
        # the same tag on both texts: same numbers, so the guards let every rule run
        return [
            (f"{pool[i % len(pool)]} {r}.{i}", f"{pool[(i + 1) % len(pool)]} {r}.{i}")
            for i in range(calls)
        ]

    fresh = [pairs(r) for r in range(rounds)]
    seen = pairs(rounds)
    for new, old in seen:
        duplicate(new, old)

    def uncached(r: int) -> None:
        for new, old in fresh[r]:
            duplicate(new, old)

    def cached(r: int) -> None:
        for new, old in seen:
            duplicate(new, old)

    return {
        "measure": "dedup pair",
        "language": language,
        "cached_us": round(_best(rounds, calls, cached), 1),
        "uncached_us": round(_best(rounds, calls, uncached), 1),
        "calls": calls,
    }


def _retire_row(language: str, pool: list[str], calls: int, rounds: int) -> dict[str, Any]:
    older = [(str(i), pool[i % len(pool)]) for i in range(CANDIDATES)]
    for _, text in older:
        frames(text)  # written earlier: analysed then
    news = [pool[(CANDIDATES + i) % len(pool)] for i in range(calls)]

    def cached(r: int) -> None:
        for i, new in enumerate(news):
            retired_by(f"{new} {r}-{i}", older)  # only the new text is new

    def uncached(r: int) -> None:
        for i, new in enumerate(news):
            retired_by(f"{new} u{r}-{i}", [(k, f"{t} u{r}-{i}") for k, t in older])

    return {
        "measure": f"retired_by, {CANDIDATES} candidates",
        "language": language,
        "cached_us": round(_best(rounds, calls, cached), 1),
        "uncached_us": round(_best(rounds, calls, uncached), 1),
        "calls": calls,
    }


def measure(calls: int = 200, rounds: int = 5, data: Path = DATA) -> list[dict[str, Any]]:
    """One row per measure and language."""
    rows = []
    for language in LANGUAGES:
        pool = texts(language, data)
        rows.append(_dedup_row(language, pool, calls, rounds))
        rows.append(_retire_row(language, pool, calls, rounds))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = ("measure", "language", "cached µs", "uncached µs", "calls")
    body = [[str(row[f]) for f in FIELDS] for row in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    rows_text = [head, *body]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows_text
    )


def run_rules_bench(calls: int = 200, rounds: int = 5, as_json: bool = False) -> int:
    """Print the table (or JSON). 0 on success; 2 on bad input."""
    if calls < 1 or rounds < 1:
        print("memorystore bench rules: --calls and --rounds must be at least 1", file=sys.stderr)
        return 2
    rows = measure(calls, rounds)
    if as_json:
        print(json.dumps({"calls": calls, "rounds": rounds, "rows": rows}, indent=2))
    else:
        print(f"{calls} calls per figure, best of {rounds} rounds (data: {DATA.name})")
        print(table(rows))
    return 0
