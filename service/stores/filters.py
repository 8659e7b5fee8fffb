"""mem0's filter language as every store reads it, with the service's identity rules.

Why one module: the three stores must select exactly the same memories. The embedded store
hands `engine_filter`'s qdrant-edge Filter to the engine, the PostgreSQL store compiles that
same Filter to SQL (pgvector/sql_filters.py), and the Qdrant server store applies the
identity rules below on top of mem0's own translation. So what is refused, how AND/OR/NOT and
their `$` aliases combine, the `*` wildcard, and the identity rules are written once.

On top of mem0's semantics (mirrors mem0's `Qdrant._create_filter`): identity keys
(`scope.IDENTITY_KEYS`) are one literal id each and top-level only, and a filter that names
an agent or run but no user also requires the user to be empty (`scope.confined_to_no_user`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import qdrant_edge as qe

from memorystore.scope import IDENTITY_KEYS, OWNER_KEY, confined_to_no_user
from memorystore.service.stores.protocol import Filters

__all__ = [
    "LOGICAL_ALIASES",
    "SUPPORTED_OPERATORS",
    "FilterExcess",
    "engine_filter",
    "filter_excess",
    "literal_id",
    "refuse_nested_identity",
]

SUPPORTED_OPERATORS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "icontains")
# mem0 passes both OR/NOT and their $-renamed copies; the first spelling wins
LOGICAL_ALIASES = {"$or": "OR", "$not": "NOT", "$and": "AND"}

_RANGE_OPERATORS = frozenset({"gt", "gte", "lt", "lte"})
# Same pattern as mem0's Qdrant store: a range whose bounds all look like ISO 8601 is a
# datetime range, anything else a numeric one.
_ISO_DATETIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}"
    r"([T ]\d{2}:\d{2}(:\d{2})?"
    r"(\.\d+)?"
    r"(Z|[+-]\d{2}:?\d{2})?"
    r")?$"
)


_GROUPS = frozenset({"AND", "OR", "NOT", *LOGICAL_ALIASES})


class FilterExcess(NamedTuple):
    """Where a filter outgrows a bound: `kind` is "conditions" or "depth"."""

    path: str
    kind: str


def filter_excess(
    filters: Filters, max_conditions: int, max_depth: int, path: str = "filters"
) -> FilterExcess | None:
    """The first place `filters` holds more than `max_conditions` conditions or nests
    AND/OR/NOT deeper than `max_depth`, else None; read before anything is translated.

    A field condition counts one, and an operand list (`in`, `nin`, or a list as the value)
    one per value; an AND/OR/NOT item with no condition (`{}`) counts one. Depth is how
    many AND/OR/NOT groups enclose a condition (`{"OR": [...]}` is 1). The walk stops at
    the first excess, so an oversized filter costs no more than the limits allow."""
    count = 0
    too_many = FilterExcess(path, "conditions")

    def walk(node: Filters, at: str, depth: int) -> FilterExcess | None:
        nonlocal count
        for key, value in node.items():
            if key in _GROUPS and isinstance(value, list):
                where = f"{at}.{key}"
                if depth + 1 > max_depth:
                    return FilterExcess(where, "depth")
                for i, item in enumerate(value):
                    if isinstance(item, dict) and item:
                        found = walk(item, f"{where}[{i}]", depth + 1)
                        if found is not None:
                            return found
                    else:
                        count += 1
                    if count > max_conditions:
                        return too_many
            elif isinstance(value, dict):
                count += max(1, sum(_operands(v) for v in value.values()))
            else:
                count += _operands(value)
            if count > max_conditions:
                return too_many
        return None

    return walk(filters, path, 0) if filters else None


def _operands(value: Any) -> int:
    return max(1, len(value)) if isinstance(value, list) else 1


def literal_id(key: str, value: Any) -> str:
    """An identity filter's value, which must be one literal id; anything else is refused."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"Filter on '{key}' must be one literal id (a non-empty string)")
    return value


def refuse_nested_identity(filters: Filters) -> None:
    """Identity keys inside AND/OR/NOT could widen a scope (NOT above all): refuse them."""
    for key, value in filters.items():
        group = LOGICAL_ALIASES.get(key, key)
        if group not in ("AND", "OR", "NOT") or not isinstance(value, list):
            continue
        for sub in value:
            if isinstance(sub, dict):
                for name in sub:
                    if name in IDENTITY_KEYS:
                        raise ValueError(f"Filter on '{name}' is only accepted at the top level")
                refuse_nested_identity(sub)


def engine_filter(filters: Filters | None) -> qe.Filter | None:
    """mem0's filter dict as a qdrant-edge Filter; None when nothing constrains the result."""
    if not filters:
        return None
    refuse_nested_identity(filters)
    built = _translate(filters)
    if not confined_to_no_user(filters):
        return built
    empty = qe.IsEmptyCondition(OWNER_KEY)
    return qe.Filter(must=[empty] if built is None else [built, empty])


def _translate(filters: Filters) -> qe.Filter | None:
    if not filters:
        return None
    normalized: dict[str, Any] = {}
    for key, value in filters.items():
        normalized.setdefault(LOGICAL_ALIASES.get(key, key), value)

    must: list[Any] = []
    should: list[Any] = []
    must_not: list[Any] = []
    groups = {"AND": must, "OR": should, "NOT": must_not}
    for key, value in normalized.items():
        if key in groups:
            if not isinstance(value, list):
                raise ValueError(
                    f"{key} filter value must be a list of filter dicts, got {type(value).__name__}"
                )
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    raise ValueError(
                        f"{key} filter list item at index {i} must be a dict, "
                        f"got {type(item).__name__}: {item!r}"
                    )
            groups[key].extend(sub for sub in map(_translate, value) if sub is not None)
        else:
            condition = _field_condition(key, value)
            if condition is not None:
                must.append(condition)

    if not (must or should or must_not):
        return None
    return qe.Filter(must=must or None, should=should or None, must_not=must_not or None)


def _field_condition(key: str, value: Any) -> qe.FieldCondition | None:
    """One field's condition; None for the '*' wildcard, which mem0 treats as no constraint.

    The wildcard is kept for metadata fields (mem0's documented filter language); an identity
    key's value is always a literal, so '*' there matches only the id '*'.
    """
    if key in IDENTITY_KEYS:
        return _match(key, qe.MatchValue, literal_id(key, value))
    try:
        return _build_field_condition(key, value)
    except TypeError as exc:  # The engine's constructors reject ill-typed values this way.
        raise ValueError(f"Invalid filter value for field '{key}': {value!r}") from exc


def _build_field_condition(key: str, value: Any) -> qe.FieldCondition | None:
    if not isinstance(value, dict):
        if value == "*":
            return None
        if isinstance(value, list):
            return _match(key, qe.MatchAny, value)
        return _match(key, qe.MatchValue, value)

    ops = set(value)
    if ops & _RANGE_OPERATORS:
        if ops - _RANGE_OPERATORS:
            raise ValueError(
                f"Cannot mix range operators ({sorted(ops & _RANGE_OPERATORS)}) with non-range "
                f"operators ({sorted(ops - _RANGE_OPERATORS)}) for field '{key}'. "
                "Use AND to combine them as separate conditions."
            )
        return qe.FieldCondition(key=key, range=_range(key, {op: value[op] for op in ops}))
    if "eq" in value:
        return _match(key, qe.MatchValue, value["eq"])
    if "ne" in value:
        return _match(key, qe.MatchExcept, [value["ne"]])
    if "in" in value:
        return _match(key, qe.MatchAny, value["in"])
    if "nin" in value:
        return _match(key, qe.MatchExcept, value["nin"])
    if "contains" in value or "icontains" in value:
        # Without a full-text index the engine matches whole words, case-insensitively and in
        # any order (not substrings), which is also what Qdrant server does for mem0's
        # MatchText; so icontains and contains behave the same, as in mem0's Qdrant store.
        text = value["icontains" if "icontains" in value else "contains"]
        return qe.FieldCondition(key=key, match=qe.MatchText(text))
    raise ValueError(
        f"Unsupported filter operator(s) for field '{key}': {sorted(ops)}. "
        f"Supported operators: {list(SUPPORTED_OPERATORS)}"
    )


def _match(key: str, match_type: Callable[[Any], Any], operand: Any) -> qe.FieldCondition:
    """A match condition, refusing booleans rather than matching the wrong points.

    qdrant-edge 0.9.0 converts True/False in MatchValue/MatchAny/MatchExcept to the integers
    1/0, so such a filter never matches a stored boolean but does match stored integers.
    """
    operands = operand if isinstance(operand, list) else [operand]
    if any(isinstance(v, bool) for v in operands):
        raise ValueError(
            f"Boolean filter values are not supported for field '{key}': qdrant-edge matches "
            "True/False as the integers 1/0"
        )
    return qe.FieldCondition(key=key, match=match_type(operand))


def _range(key: str, bounds: dict[str, Any]) -> qe.RangeFloat | qe.RangeDateTime:
    if all(isinstance(v, str) and _ISO_DATETIME_RE.match(v) for v in bounds.values()):
        try:
            return qe.RangeDateTime(**bounds)
        except ValueError as exc:
            raise ValueError(
                f"Invalid datetime value in range filter for field '{key}': {exc}"
            ) from exc
    return qe.RangeFloat(**bounds)
