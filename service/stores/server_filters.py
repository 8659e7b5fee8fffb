"""The engine's filter (stores/filters.py) as a Qdrant server's: qdrant-client's models.

Why translate the engine's Filter rather than let mem0's Qdrant store build its own: the three
stores must select exactly the same memories and refuse the same filters with the same
messages (a boolean value, a mistyped operand, a malformed JSON path all name the field), and
`filters.engine_filter` is where that is decided. The Qdrant server runs the engine's own
condition checker (qdrant-edge is Qdrant's segment code), so the same Filter selects the same
points, given the same payload indexes (`QdrantServerStore` creates them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import qdrant_edge as qe
from qdrant_client import models

from memorystore.service.stores.filters import engine_filter
from memorystore.service.stores.protocol import Filters

__all__ = ["server_condition", "server_filter"]


def server_filter(filters: Filters | None) -> models.Filter | None:
    """mem0's filter dict as qdrant-client's Filter; None when nothing constrains."""
    built = engine_filter(filters)
    return None if built is None else _filter(built)


def _filter(built: qe.Filter) -> models.Filter:
    def each(conditions: Any) -> list[models.Condition] | None:
        return None if conditions is None else [server_condition(c) for c in conditions]

    return models.Filter(
        must=each(built.must), should=each(built.should), must_not=each(built.must_not)
    )


def server_condition(condition: Any) -> models.Condition:
    """One engine condition as the server's."""
    if isinstance(condition, qe.Filter):
        return _filter(condition)
    if isinstance(condition, qe.IsEmptyCondition):
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=condition.key))
    if isinstance(condition, qe.HasIdCondition):
        return models.HasIdCondition(has_id=[str(i) for i in condition.point_ids])
    if not isinstance(condition, qe.FieldCondition):
        raise TypeError(f"unsupported filter condition: {condition!r}")
    match, bounds, key = condition.match, condition.range, condition.key
    if isinstance(match, qe.MatchValue):
        return models.FieldCondition(key=key, match=models.MatchValue(value=match.value))
    if isinstance(match, qe.MatchAny):
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(match.value)))
    if isinstance(match, qe.MatchExcept):
        excluded = list(match.value)
        return models.FieldCondition(key=key, match=models.MatchExcept(**{"except": excluded}))
    if isinstance(match, qe.MatchText):
        return models.FieldCondition(key=key, match=models.MatchText(text=match.text))
    if isinstance(bounds, qe.RangeFloat):
        return models.FieldCondition(
            key=key, range=models.Range(gt=bounds.gt, gte=bounds.gte, lt=bounds.lt, lte=bounds.lte)
        )
    if isinstance(bounds, qe.RangeDateTime):
        return models.FieldCondition(
            key=key,
            range=models.DatetimeRange(
                gt=_when(bounds.gt),
                gte=_when(bounds.gte),
                lt=_when(bounds.lt),
                lte=_when(bounds.lte),
            ),
        )
    raise TypeError(f"unsupported field condition on {key!r}")


def _when(bound: str | None) -> datetime | None:
    """The engine's normalised bound ("2024-01-15 10:00:00 UTC", microseconds when any)."""
    return None if bound is None else datetime.fromisoformat(bound.replace(" UTC", "+00:00"))
