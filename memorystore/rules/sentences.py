"""Where a sentence ends, for every text rule: one splitter, in the two readings the rules use.

A memory text ("I use node.js. I live in Hangzhou…") ends a sentence at 。！？!?;； a line
break or "…", and at a "." only before a space or the end, so "node.js" and "3.11" stay
whole. Session statements (`rules/statements.py`) cut a chat message at every "." and not at
"…", the spaces after an end going with it: that is how the consistency benchmark's figures
were measured, and reading "node.js" whole there too is a change of what sessions keep.
"""

from __future__ import annotations

import re

__all__ = ["sentences", "split"]

_MEMORY = re.compile(r"(?<=[。！？!?;；\n])|(?<=\.)(?=\s|$)|(?<=…)")
_EVERY_DOT = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")


def split(text: str, *, every_dot: bool = False) -> list[str]:
    """The pieces of `text` between sentence ends, as cut (spaces kept, empty pieces too)."""
    return (_EVERY_DOT if every_dot else _MEMORY).split(text)


def sentences(text: str) -> list[str]:
    """The sentences of a memory text, stripped, none empty."""
    return [s.strip() for s in split(text) if s.strip()]
