"""The per-request caps of `limits.*` that the routes share (`LimitChecks`): filters by
conditions and depth, metadata by size; each refusal a 422 naming the field and the limit,
each limit itself accepted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import HTTPException
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.config import Limits
from memorystore.scope import EntityIds
from memorystore.service.api.deps import LimitChecks
from memorystore.service.api.schemas import SearchRequest
from memorystore.service.engine.core import RESERVED_METADATA_KEYS

CHECKS = LimitChecks(Limits(max_filter_conditions=4, max_filter_depth=2, max_metadata_bytes=256))


def refusal(call: Any, *args: Any) -> str:
    with pytest.raises(HTTPException) as refused:
        call(*args)
    assert refused.value.status_code == 422
    return str(refused.value.detail)


@pytest.mark.parametrize(
    ("filters", "detail"),
    [
        ({"OR": [{"a": 1}] * 5}, "filters: more than limits.maxFilterConditions (4) conditions"),
        ({"a": {"in": [1, 2, 3, 4, 5]}}, "filters: more than limits.maxFilterConditions (4)"),
        ({"a": [1, 2, 3], "b": {"nin": [1, 2]}}, "filters: more than limits.maxFilterConditions"),
        ({"OR": [{}, {}, {}, {}, {}]}, "filters: more than limits.maxFilterConditions"),
        (
            {"AND": [{"OR": [{"NOT": [{"a": 1}]}]}]},
            "filters.AND[0].OR[0].NOT: AND/OR/NOT nested deeper than limits.maxFilterDepth (2)",
        ),
    ],
)
def test_filters_over_a_limit_are_refused_naming_it(filters, detail):
    assert refusal(CHECKS.filters, filters).startswith(detail)


def test_filters_at_the_limits_pass_and_the_scope_is_read_after_them():
    CHECKS.filters({"AND": [{"OR": [{"a": 1}, {"b": {"in": [1, 2]}}]}], "c": 3})
    CHECKS.filters(None)
    body = SearchRequest(query="q", user_id="alice")
    # the size is checked first: a huge filter is refused before its scope is looked at
    assert "maxFilterConditions" in refusal(CHECKS.scoped, body, {"OR": [{"a": 1}] * 9})
    assert CHECKS.scoped(body, {"AND": [{"agent_id": "x"}, {"a": 1}]}) == (
        EntityIds(user_id="alice", agent_id="x"),
        {"AND": [{"a": 1}]},
    )


def compact(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@given(
    metadata=st.dictionaries(
        # a reserved key (run_id, hash, …) is refused before the size: test_schemas has those
        st.text(max_size=8).filter(lambda key: key not in RESERVED_METADATA_KEYS),
        st.one_of(st.text(max_size=120), st.integers(), st.lists(st.text(max_size=30))),
        max_size=6,
    )
)
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_metadata_is_measured_as_stored_in_utf8_json(metadata):
    size = compact(metadata)
    if size <= 256:
        CHECKS.metadata(metadata)
        CHECKS.update(None, metadata, "memories[3]")
    else:
        assert refusal(CHECKS.metadata, metadata) == (
            f"metadata: {size} bytes as JSON, more than limits.maxMetadataBytes (256)"
        )
        detail = refusal(CHECKS.update, None, metadata, "memories[3]")
        assert detail.startswith(f"memories[3].metadata: {size} bytes")


def test_metadata_at_the_limit_in_any_script():
    for char, width in (("a", 1), ("é", 2), ("用", 3), ("🙂", 4)):
        fits = {"k": char * ((256 - len('{"k":""}')) // width)}
        assert compact(fits) <= 256
        CHECKS.metadata(fits)
        over = {"k": fits["k"] + char}
        if compact(over) > 256:
            assert "maxMetadataBytes (256)" in refusal(CHECKS.metadata, over)
