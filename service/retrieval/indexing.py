"""Offline hybrid retrieval: what to index for a memory, and how search results are fused.

Pure functions (no I/O), so every rule is unit-tested and measured by `memorystore bench
locomo` and `memorystore bench multilingual`. Dense search alone misses exact names, places
and dates; BM25 alone misses paraphrases; conversations spread one topic over consecutive
turns. So:

- indexing: a conversation turn is embedded together with the turn written just before it in
  the same scope (its context), and keyword-indexed with its speaker and date;
- search: dense and BM25 candidates, each scored on both legs (the engine asks the store
  for the other leg's score of a candidate that only one leg returned), are min-max
  normalised and added (BM25 weighted), then
  each memory gains a share of its best neighbour's score (the memory written just before or
  after it), then the query's cues (`cues.py`: the speaker it names, the period it names,
  and whether a memory only asks a question) add theirs. The threshold stays a floor on the
  dense similarity, as in mem0.
- the keyword score counts only as far as the keyword evidence is strong: `keyword_gate` is
  the share of the query's terms (each weighted by its IDF among the candidates) that the
  best keyword hit contains, ramped from a floor (counts nothing) to full. A query whose only
  keyword matches are common words ("user", "用户") or a stray word ranks exactly as dense
  search does. The ramp depends on what the hits are: a fact stands alone, so a partial
  keyword overlap with it is weak evidence (FACT_GATE); a conversation turn is elliptical
  and the question's words are spread over it and its neighbours, so its keyword evidence
  counts earlier (TURN_GATE). Measured: without the gate, BM25 moved a stray match above
  dense search's right answer for a third of `bench multilingual`'s questions; the fact gate
  leaves dense search's ranking there (a floor of 40 % instead of 60 % still moved 3 of its
  274 questions, one of them down), the turn gate keeps LoCoMo's keyword gain.
"""

from __future__ import annotations

import math
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


def stored_index_texts(
    payload: Mapping[str, Any],
    settings: RetrievalSettings,
    previous_payload: Callable[[str], Mapping[str, Any] | None],
) -> IndexTexts:
    """`index_texts` for a memory as stored: its text, speaker and `date` metadata from its
    payload, and the line of the memory before it (`prev_id`), which `previous_payload`
    looks up (a re-index reads the store; an import its document first)."""
    previous = None
    prev_id = payload.get(PREV_KEY)
    if prev_id and settings.context:
        before = previous_payload(str(prev_id))
        if before is not None:
            previous = line(str(before.get("data", "")), before.get("actor_id"))
    date = payload.get("date")
    return index_texts(
        str(payload.get("data", "")),
        payload.get("actor_id"),
        str(date) if date else None,
        previous,
        settings,
    )


@dataclass(frozen=True)
class Hit:
    id: str
    score: float  # the fused relevance in [0, 1], for ordering
    cosine: float  # the dense similarity, what `threshold` is compared with
    payload: dict[str, Any]


FACT_GATE = (0.6, 0.9)  # (floor, full): shares of the query's terms a fact must hold
TURN_GATE = (0.2, 0.5)  # the same for conversation turns


def is_turn(payload: Mapping[str, Any]) -> bool:
    """A conversation turn: said by someone, or chained to the turn before it."""
    return bool(payload.get(PREV_KEY) or payload.get("actor_id"))


def keyword_gate(
    query_terms: frozenset[int],
    candidate_terms: Mapping[str, frozenset[int]],
    keyword_ids: list[str],
    ramp: tuple[float, float],
) -> float:
    """How far the keyword scores count, in [0, 1]: the IDF-weighted share of the query's
    terms contained in the best of `keyword_ids`, ramped from `ramp[0]` to `ramp[1]`.

    IDF is taken over the candidates (what this query's ranking chooses among), so a word
    most candidates contain weighs little; a query term no candidate contains weighs most.
    """
    if not query_terms or not keyword_ids:
        return 0.0
    n = len(candidate_terms)
    idf = {}
    for term in query_terms:
        df = sum(term in terms for terms in candidate_terms.values())
        idf[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    total = sum(idf.values())
    best = max(
        sum(idf[t] for t in query_terms & candidate_terms.get(i, frozenset())) / total
        for i in keyword_ids
    )
    floor, full = ramp
    return min(max((best - floor) / (full - floor), 0.0), 1.0)


def keyword_gates(
    query_terms: frozenset[int],
    candidate_terms: Mapping[str, frozenset[int]],
    keyword_hits: list[tuple[str, dict[str, Any]]],
) -> dict[str, float]:
    """Each keyword hit's gate: the gate of its kind (turns, facts) over the hits of that kind."""
    turns = [i for i, payload in keyword_hits if is_turn(payload)]
    facts = [i for i, payload in keyword_hits if not is_turn(payload)]
    gates = {}
    for ids, ramp in ((turns, TURN_GATE), (facts, FACT_GATE)):
        gate = keyword_gate(query_terms, candidate_terms, ids, ramp)
        gates.update(dict.fromkeys(ids, gate))
    return gates


def fuse(
    dense: list[tuple[str, float, dict[str, Any]]],
    lexical: list[tuple[str, float, dict[str, Any]]],
    lexical_cosines: Mapping[str, float],
    settings: RetrievalSettings,
    threshold: float,
    top_k: int,
    gates: Mapping[str, float] | None = None,
    bonuses: Mapping[str, float] | None = None,
) -> list[Hit]:
    """Rank the union of dense and keyword candidates (id, score, payload), best first.

    `lexical_cosines` gives the dense similarity of keyword-only candidates, so every
    candidate meets the same threshold; `gates` scales each keyword score (`keyword_gates`;
    None: in full); `bonuses` are the query cues' (`cues.cue_bonuses`), added last. Ties
    break on id: the same query, the same order.
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
    full_weight = settings.lexical_weight if lexical else 0.0

    def weight(mem_id: str) -> float:
        return full_weight * (1.0 if gates is None else gates.get(mem_id, 0.0))

    own = {
        i: dense_norm(cosines.get(i)) + weight(i) * lexical_norm(lexical_scores.get(i))
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
    scale = (1.0 + full_weight) * (1.0 + settings.neighbour_weight)
    if bonuses:  # a cue's weight is a share of the relevance in [0, 1]: of `scale` here
        total = {i: score + scale * bonuses.get(i, 0.0) for i, score in total.items()}
    scale *= 1.0 + settings.speaker_weight + settings.time_weight + settings.question_weight
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
