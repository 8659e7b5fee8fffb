"""Scope → entity ids."""

from __future__ import annotations

import pytest

from memorystore.scope import scope_ids


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


def test_every_id_a_scope_maps_to_is_a_literal_the_service_accepts():
    from memorystore.scope import id_problem

    for scope in ("user", "agent", "project"):
        for key, value in scope_ids(scope, "alice", "planner", "acme").items():
            assert id_problem(value) is None, (scope, key, value)
    # and the service refuses what no client should send (it is never read as "every user")
    assert id_problem("*") is not None
    assert id_problem("project: acme") is not None
