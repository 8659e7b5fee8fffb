"""Offline hybrid retrieval: what to index for a memory, and how search results are fused.

Pure functions (no I/O), so every rule is unit-tested and measured by `memorystore bench
locomo`. Dense search alone misses exact names, places and dates; BM25 alone misses
paraphrases; conversations spread one topic over consecutive turns. So:

- indexing: a memory written as text is embedded together with the memory written just
  before it in the same scope (its conversational context), and keyword-indexed with its
  speaker and date;
- search: dense and BM25 candidates are min-max normalised and added (BM25 weighted), then
  each memory gains a share of its best neighbour's score (the memory written just before or
  after it). The threshold stays a floor on the dense similarity, as in mem0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memorystore.spec import RetrievalSettings

PREV_KEY = "prev_id"  # payload: the memory written just before this one in the same scope


@dataclass(frozen=True)
class IndexTexts:
    dense: str  # what is embedded
    lexical: str  # what BM25 indexes


def line(content: str, name: str | None) -> str:
    """A memory as said by someone: `name: content`."""
    return f"{name}: {content}" if name else content


def index_texts(
    content: str,
    name: str | None,
    date: str | None,
    previous: str | None,
    settings: RetrievalSettings,
) -> IndexTexts:
    if not settings.context:
        return IndexTexts(content, content)
    said = line(content, name)
    dense = f"{previous}\n{said}" if previous else said
    lexical = f"({date}) {said}" if date else said
    return IndexTexts(dense, lexical)


@dataclass(frozen=True)
class Hit:
    id: str
    score: float  # the fused relevance in [0, 1], for ordering
    cosine: float  # the dense similarity, what `threshold` is compared with
    payload: dict[str, Any]


def fuse(
    dense: list[tuple[str, float, dict[str, Any]]],
    lexical: list[tuple[str, float, dict[str, Any]]],
    lexical_cosines: Mapping[str, float],
    settings: RetrievalSettings,
    threshold: float,
    top_k: int,
) -> list[Hit]:
    """Rank the union of dense and keyword candidates (id, score, payload), best first.

    `lexical_cosines` gives the dense similarity of keyword-only candidates, so every
    candidate meets the same threshold. Ties break on id: the same query, the same order.
    """
    payloads: dict[str, dict[str, Any]] = {}
    cosines: dict[str, float] = {}
    for mem_id, score, payload in dense:
        payloads[mem_id], cosines[mem_id] = payload, score
    for mem_id, _, payload in lexical:
        payloads.setdefault(mem_id, payload)
        if mem_id not in cosines and mem_id in lexical_cosines:
            cosines[mem_id] = lexical_cosines[mem_id]
    # the dense candidates set the scale; a keyword-only hit ranks below them on this signal
    dense_norm = _scaler({mem_id: score for mem_id, score, _ in dense})
    lexical_norm = _scaler({mem_id: score for mem_id, score, _ in lexical})
    lexical_scores = {mem_id: score for mem_id, score, _ in lexical}
    weight = settings.lexical_weight if lexical else 0.0
    own = {
        i: dense_norm(cosines.get(i)) + weight * lexical_norm(lexical_scores.get(i))
        for i in payloads
        if cosines.get(i, -1.0) >= threshold
    }
    total = dict(own)
    if settings.neighbour_weight > 0:
        after: dict[str, list[str]] = {}
        for i in own:
            prev = payloads[i].get(PREV_KEY)
            if prev in own:
                after.setdefault(prev, []).append(i)
        for i in own:
            neighbours = [payloads[i].get(PREV_KEY), *after.get(i, [])]
            best = max((own[n] for n in neighbours if n in own), default=0.0)
            total[i] = own[i] + settings.neighbour_weight * best
    scale = (1.0 + weight) * (1.0 + settings.neighbour_weight)
    ranked = sorted(total, key=lambda i: (-total[i], i))[:top_k]
    return [Hit(i, total[i] / scale, cosines[i], payloads[i]) for i in ranked]


def _scaler(scores: Mapping[str, float]) -> Callable[[float | None], float]:
    """Min-max over these scores, clipped to [0, 1]; an absent score counts 0."""
    if not scores:
        return lambda _: 0.0
    low, high = min(scores.values()), max(scores.values())
    span = high - low

    def scale(score: float | None) -> float:
        if score is None:
            return 0.0
        if span <= 0:
            return 1.0 if score >= low else 0.0
        return min(max((score - low) / span, 0.0), 1.0)

    return scale
