"""Where a request's scope comes from: top-level ids or filters, never neither."""

from __future__ import annotations

import pytest

from memorystore.service.engine import Scope
from memorystore.service.schemas import ScopeError, SearchRequest, split_scope


def req(**kw) -> SearchRequest:
    return SearchRequest(query="q", **kw)


def test_scope_from_filters_and_top_level():
    scope, rest = split_scope(req(user_id="u"), {"agent_id": "a", "topic": "x"})
    assert scope == Scope(user_id="u", agent_id="a")
    assert rest == {"topic": "x"}


def test_scope_from_and_list_keeps_other_conditions():
    filters = {"AND": [{"user_id": "u"}, {"run_id": "r"}, {"category": {"eq": "food"}}]}
    scope, rest = split_scope(req(), filters)
    assert scope == Scope(user_id="u", run_id="r")
    assert rest == {"AND": [{"category": {"eq": "food"}}]}


@pytest.mark.parametrize(
    ("body", "filters", "message"),
    [
        ({}, None, "a scope is required"),
        ({}, {"topic": "x"}, "a scope is required"),
        ({"user_id": "u"}, {"user_id": "v"}, "user_id is given twice"),
        ({}, {"user_id": ""}, "filters.user_id must be a non-empty string"),
        ({}, {"user_id": 5}, "filters.user_id must be a non-empty string"),
    ],
)
def test_bad_scopes_are_refused_with_the_reason(body, filters, message):
    with pytest.raises(ScopeError, match=message):
        split_scope(req(**body), filters)
