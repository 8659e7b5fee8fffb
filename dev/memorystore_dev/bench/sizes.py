"""What the size benches (`bench backup`, `bench migrate`) share: one measurement per size in
a temporary directory of its own, then one table (or JSON)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

Row = dict[str, Any]


def run_sizes(
    bench: str,
    sizes: list[int],
    measure: Callable[[int, Path], Row],
    table: Callable[[list[Row]], str],
    as_json: bool = False,
) -> list[Row] | None:
    """The rows of `measure` at each size, printed; None (after saying why) for bad sizes."""
    if not sizes or any(s < 1 for s in sizes):
        print(f"memorystore bench {bench}: --sizes takes numbers of at least 1", file=sys.stderr)
        return None
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"bench-{bench}-") as tmp:
            os.environ.setdefault("MEM0_DIR", str(Path(tmp) / "mem0"))
            rows.append(measure(n, Path(tmp)))
            print(f"# {n:,} memories done (fill {rows[-1]['fill_s']:.0f} s)", flush=True)
    print(json.dumps(rows, indent=2) if as_json else table(rows))
    return rows


def parse_sizes(text: str) -> list[int]:
    """`--sizes 1000,10000`; empty when not numbers (run_sizes then says so)."""
    try:
        return [int(s) for s in text.split(",") if s]
    except ValueError:
        return []
