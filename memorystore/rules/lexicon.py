"""The rules' word lists, read once from the data files in `lexicons/`.

Why data files: a list of places or job titles is data that grows by a line, not code; kept
beside the rules it would be most of their modules. A file holds one entry a line in the
order written (a regex alternation tries them in that order), `#` starts a comment. A
*tagged* file says after each entry (two or more spaces apart) which readers use it, so one
list serves readers that differ by a few entries, and the difference is written down.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

__all__ = ["alternation", "entries", "table", "tagged", "word_set", "words"]

FOLDER = Path(__file__).with_name("lexicons")
_COLUMNS = re.compile(r"\s{2,}")


def words(text: str, sep: str | None = None) -> frozenset[str]:
    """A short word list written in code as one string, split on whitespace or `sep`."""
    return frozenset(w.strip() for w in text.split(sep) if w.strip())


@functools.cache
def _lines(name: str) -> tuple[str, ...]:
    text = (FOLDER / name).read_text(encoding="utf-8")
    stripped = (line.strip() for line in text.splitlines())
    return tuple(line for line in stripped if line and not line.startswith("#"))


@functools.cache
def entries(name: str) -> tuple[str, ...]:
    """The entries of `lexicons/<name>.txt`, in order, each once."""
    return tuple(dict.fromkeys(_lines(f"{name}.txt")))


def word_set(name: str) -> frozenset[str]:
    return frozenset(entries(name))


def alternation(name: str) -> str:
    """The entries as a regular-expression alternation of literal strings, in file order."""
    return "|".join(re.escape(e) for e in entries(name))


@functools.cache
def tagged(name: str, reader: str) -> tuple[str, ...]:
    """The entries of the tagged file `lexicons/<name>.txt` that `reader` uses, in order."""
    out: dict[str, None] = {}
    for line in _lines(f"{name}.txt"):
        entry, *readers = _COLUMNS.split(line, maxsplit=1)
        if readers and reader in readers[0].split():
            out[entry] = None
    return tuple(out)


@functools.cache
def table(name: str) -> Mapping[str, str]:
    """The map in `lexicons/<name>.json` (read-only: it is shared)."""
    loaded: dict[str, str] = json.loads((FOLDER / f"{name}.json").read_text(encoding="utf-8"))
    return MappingProxyType(loaded)
