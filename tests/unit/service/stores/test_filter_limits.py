"""How big a filter is (`filter_excess`): generated filters are measured against a model of
the documented rule, and every one is refused exactly one step below its size or depth."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.service.stores.filters import FilterExcess, filter_excess

GROUPS = ("AND", "OR", "NOT", "$and", "$or", "$not")
fields = st.sampled_from(["color", "n", "topic", "user_id", "when"])
scalars = st.one_of(st.integers(), st.text(max_size=5), st.just("*"))
operands = st.one_of(scalars, st.lists(scalars, max_size=6))
conditions = st.one_of(
    scalars,
    st.lists(scalars, max_size=6),
    st.dictionaries(st.sampled_from(["eq", "ne", "in", "nin", "gte", "lt"]), operands, max_size=3),
)
filters = st.recursive(
    st.dictionaries(fields, conditions, max_size=3),
    lambda inner: st.dictionaries(
        st.one_of(fields, st.sampled_from(GROUPS)),
        st.one_of(conditions, st.lists(inner, max_size=4)),
        max_size=3,
    ),
    max_leaves=25,
)


def size(node: dict[str, Any]) -> tuple[int, int]:
    """(conditions, depth) by the documented rule, without early exits."""
    count = depth = 0
    for key, value in node.items():
        if key in GROUPS and isinstance(value, list):
            depth = max(depth, 1)
            for item in value:
                if isinstance(item, dict) and item:
                    n, d = size(item)
                    count, depth = count + n, max(depth, d + 1)
                else:
                    count += 1
        elif isinstance(value, dict):
            # each operator one, or one per value of its list (an empty list still one)
            count += max(
                1, sum(max(1, len(v)) if isinstance(v, list) else 1 for v in value.values())
            )
        elif isinstance(value, list):
            count += max(1, len(value))
        else:
            count += 1
    return count, depth


@given(f=filters)
@settings(max_examples=400, deadline=None, derandomize=True, database=None)
def test_a_filter_passes_at_its_size_and_is_refused_one_below(f):
    count, depth = size(f)
    assert filter_excess(f, max(count, 1), depth or 1) is None
    if count > 1:
        assert filter_excess(f, count - 1, 99) == FilterExcess("filters", "conditions")
    if depth > 1:
        excess = filter_excess(f, 10_000, depth - 1)
        assert excess is not None and excess.kind == "depth"
        # the path names the group one level too deep, inside depth - 1 groups' items
        assert excess.path.count("[") == depth - 1
        assert excess.path.rsplit(".", 1)[1] in GROUPS


def test_hand_picked_sizes():
    assert filter_excess({}, 1, 1) is None
    assert filter_excess({"color": "red"}, 1, 1) is None
    assert filter_excess({"color": {"in": ["a", "b", "c"]}}, 2, 1) == ("filters", "conditions")
    assert filter_excess({"color": {"gte": 1, "lte": 3}}, 2, 1) is None
    assert filter_excess({"OR": [{}, {}, {}]}, 2, 5) == ("filters", "conditions")
    big_or = {"OR": [{"color": {"eq": f"v{i}"}} for i in range(40_000)]}
    assert filter_excess(big_or, 256, 5) == ("filters", "conditions")
    deep: dict[str, Any] = {"color": "x"}
    for _ in range(6):
        deep = {"AND": [deep]}
    assert filter_excess(deep, 100, 6) is None
    assert filter_excess(deep, 100, 5) == (
        "filters.AND[0].AND[0].AND[0].AND[0].AND[0].AND",
        "depth",
    )
    assert filter_excess({"$or": [{"$not": [{"a": 1}]}]}, 9, 1) == ("filters.$or[0].$not", "depth")
