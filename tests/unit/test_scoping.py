"""Scope → entity ids."""

from __future__ import annotations

import pytest

from memorystore.scoping import scope_ids


def test_each_scope_maps_to_its_ids():
    assert scope_ids("user", "alice", "planner", "acme") == {"user_id": "alice"}
    assert scope_ids("agent", "alice", "planner", "acme") == {
        "user_id": "alice",
        "agent_id": "planner",
    }
    assert scope_ids("project", "alice", "planner", "acme") == {"user_id": "project:acme"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("user", "", None, "p"), "user_id must be a non-empty string"),
        (("user", "project:acme", None, "p"), "reserved for project memory"),
        (("agent", "alice", None, "p"), "agent scope needs an agent_id"),
        (("project", "alice", None, ""), "project scope needs a project name"),
        (("team", "alice", None, "p"), "'team' is not a valid Scope"),
    ],
)
def test_impossible_scopes_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        scope_ids(*args)
