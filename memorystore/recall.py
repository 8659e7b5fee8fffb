"""Packing recalled memories into a token budget: shared by the service and the middleware.

Token counts are an offline estimate (no tokenizer download): one token per CJK character
(`rules.scripts.TOKEN_PER_CHARACTER`: Han, kana, Hangul), and about one per four characters
of other words, rounded up, plus one per punctuation mark. It is meant to err high, so a
budget acts as an upper bound; it has not been compared with a real tokenizer here (none is
installable without a download).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memorystore.rules.dedup import same_fact
from memorystore.rules.scripts import TOKEN_PER_CHARACTER

_TOKEN = re.compile(rf"[{TOKEN_PER_CHARACTER}]|[^\s{TOKEN_PER_CHARACTER}\W]+|[^\s\w]", re.UNICODE)
ELLIPSIS = "…"


def estimate_tokens(text: str) -> int:
    total = 0
    for piece in _TOKEN.findall(text):
        total += math.ceil(len(piece) / 4) if len(piece) > 1 else 1
    return total


def clip(text: str, max_chars: int) -> str:
    """Cut text to max_chars, marking the cut."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1].rstrip() + ELLIPSIS


@dataclass
class Packed:
    context: str
    memories: list[Mapping[str, Any]] = field(default_factory=list)
    tokens: int = 0
    dropped: int = 0  # memories found that did not fit the budget
    repeats: int = 0  # memories left out because they say what a packed one says


def pack(
    memories: Sequence[Mapping[str, Any]],
    token_budget: int,
    max_memory_chars: int,
) -> Packed:
    """Best-first, whole memories only, each clipped to max_memory_chars, under the budget.

    A memory that says what a better-ranked packed one says (`dedup.same_fact`) is left
    out, so the budget buys distinct facts. The score floor is the search's job (it applies
    it to the dense similarity).
    """
    ranked = sorted(memories, key=lambda m: m.get("score") or 0.0, reverse=True)
    packed = Packed(context="")
    lines: list[str] = []
    for mem in ranked:
        text = str(mem.get("memory", ""))
        if any(same_fact(text, str(kept.get("memory", ""))) for kept in packed.memories):
            packed.repeats += 1
            continue
        line = "- " + clip(text, max_memory_chars)
        cost = estimate_tokens(line)
        if packed.tokens + cost > token_budget:
            packed.dropped += 1
            continue
        lines.append(line)
        packed.tokens += cost
        packed.memories.append(mem)
    packed.context = "\n".join(lines)
    return packed
