"""Who a memory belongs to: the one identity model of the service, the stores and the agents.

A memory is scoped by up to three opaque ids (`user_id`, `agent_id`, `run_id`) matched
literally everywhere. This module holds, once, what every component needs of them: the id
grammar (`id_problem`), the scope itself (`EntityIds`, with its stable `key()`), the rule that
an agent- or run-only scope never spans users (`confined_to_no_user`), how a request's scope is
read from its body and filters (`split_scope`), and how an agent's configured memory scope
(user / agent / project) maps to ids (`scope_ids`). No mem0 import: the agent side and the
service's light modules use it without loading mem0.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from memorystore.spec import Scope

__all__ = [
    "ENTITY_TYPES",
    "IDENTITY_KEYS",
    "ID_PATTERN",
    "MAX_ID_CHARS",
    "OWNER_KEY",
    "PROJECT_PREFIX",
    "EntityIds",
    "InvalidId",
    "ScopeError",
    "check_id",
    "confined_to_no_user",
    "id_problem",
    "scope_ids",
    "scope_key",
    "split_scope",
]

# The ids that scope a memory. They are matched literally (no '*' wildcard, no operators),
# only at the top level of a filter, and a filter naming an agent or run but no user matches
# only memories without a user_id (see confined_to_no_user).
IDENTITY_KEYS = ("user_id", "agent_id", "run_id")
OWNER_KEY = "user_id"
# the entity types of the mem0 Platform API (`/v2/entities/{type}/{name}/`) and their id keys
ENTITY_TYPES = {"user": "user_id", "agent": "agent_id", "run": "run_id"}
# Project memory belongs to no end user; its owner id is namespaced so no user can claim it.
PROJECT_PREFIX = "project:"
MAX_ID_CHARS = 256
# The grammar as a JSON-schema pattern, for the OpenAPI document and generators (not enforced:
# id_problem is, and also refuses format and surrogate characters, which no portable regex
# names): no whitespace or control character, and not `*` alone.
ID_PATTERN = r"^(?:[^*\s\x00-\x1f\x7f-\x9f]|[^\s\x00-\x1f\x7f-\x9f]{2,})$"
# characters no id may contain: invisible (control, format) or not storable (lone surrogates)
_REFUSED_CATEGORIES = {"Cc": "a control", "Cf": "a format", "Cs": "a surrogate"}


class InvalidId(ValueError):
    """An entity id outside the grammar; the message starts with the field's name."""


class ScopeError(ValueError):
    """A request whose scope cannot be read; the message starts with the field's path."""


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def id_problem(value: object) -> str | None:
    """Why `value` cannot be a user/agent/run id, or None when it can (the one id grammar).

    Ids are opaque and matched exactly everywhere. Refused: non-strings; empty or longer than
    MAX_ID_CHARS; whitespace anywhere (mem0 trims edges and refuses inner whitespace, so the
    id would be silently altered); control, format and surrogate characters (invisible, or
    not storable); and `*`, which mem0's filter language reads as "any value". Everything
    else, `$ne`, `{`, quotes, `%`, `project:x` or any script, is a literal.
    """
    if not isinstance(value, str):
        return f"must be a string, not {_json_type(value)}"
    if not value:
        return "must not be empty"
    if len(value) > MAX_ID_CHARS:
        return f"must be at most {MAX_ID_CHARS} characters, not {len(value)}"
    if value == "*":
        return "'*' is not an id: ids are literal, there is no wildcard"
    for i, char in enumerate(value):
        if char.isspace():
            return f"must not contain whitespace (U+{ord(char):04X} at index {i})"
        kind = _REFUSED_CATEGORIES.get(unicodedata.category(char))
        if kind:
            return f"must not contain {kind} character (U+{ord(char):04X} at index {i})"
    return None


def check_id(value: object, field: str) -> str:
    """`value` if it is a valid id, else InvalidId naming `field`."""
    problem = id_problem(value)
    if problem:
        raise InvalidId(f"{field}: {problem}")
    assert isinstance(value, str)
    return value


def scope_key(ids: Mapping[str, Any]) -> str:
    """A scope's ids as one stable text (sorted keys, any script as is): how the journal,
    the stored exports, the scope chain and the cross-replica locks name a scope, the same
    in every process."""
    return json.dumps(dict(ids), sort_keys=True, ensure_ascii=False)


def confined_to_no_user(filters: Mapping[str, Any]) -> bool:
    """Whether a filter names an agent or run but no user: it then matches only user-less memories.

    The service's rule that an agent- or run-only scope never spans users, kept in the stores
    so that every path obeys it, mem0's own included (its get_all, search, delete_all and
    extraction all reach the store with a plain dict, which cannot say "field is empty").
    """
    return OWNER_KEY not in filters and any(key in filters for key in IDENTITY_KEYS)


@dataclass(frozen=True)
class EntityIds:
    """The entity ids a request is confined to, matched literally; at least one is required.

    With a user_id: that user's memories, narrowed by agent_id/run_id if given (mem0's
    semantics). Without one: only memories that have no user_id, so an agent- or run-only
    scope never spans users (the stores apply the same rule to every filter dict, see
    `confined_to_no_user`). Invalid ids are refused here too, whoever checked.
    """

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        for key in IDENTITY_KEYS:
            value = getattr(self, key)
            if value is not None:
                check_id(value, key)

    def filters(self) -> dict[str, str]:
        return {key: getattr(self, key) for key in IDENTITY_KEYS if getattr(self, key) is not None}

    def key(self) -> str:
        return scope_key(self.filters())

    def __bool__(self) -> bool:
        return bool(self.filters())

    def contains(self, payload: Mapping[str, Any]) -> bool:
        """The in-memory twin of the stores' filter: this payload is in this scope."""
        ids = self.filters()
        if not ids or any(payload.get(k) != v for k, v in ids.items()):
            return False
        return OWNER_KEY in ids or payload.get(OWNER_KEY) in (None, [])


class Scoped(Protocol):
    """What `split_scope` reads of a request body: its top-level ids (v1 style)."""

    user_id: str | None
    agent_id: str | None
    run_id: str | None


# mem0's logical operators and their $-spellings; mem0's own search assumes their items are
# objects (it raised AttributeError, a 500, on `{"AND": [1]}`), so the shape is checked here
_LOGICAL_KEYS = ("AND", "OR", "NOT", "$and", "$or", "$not")
_IDENTITY_ELSEWHERE = (
    "user_id, agent_id and run_id are accepted only as plain strings at the top level of "
    "filters or as one-key items of a top-level AND list"
)


def _refuse_identity_keys(value: Any, path: str) -> None:
    """Identity keys nested anywhere (OR, NOT, operators, multi-key AND items) are refused."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in IDENTITY_KEYS:
                raise ScopeError(f"{path}.{key}: {_IDENTITY_ELSEWHERE}")
            _refuse_identity_keys(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_identity_keys(item, f"{path}[{i}]")


def split_scope(body: Scoped, filters: dict[str, Any] | None) -> tuple[EntityIds, dict[str, Any]]:
    """Entity ids may come top-level (v1) or inside `filters` (v3, also under AND).

    Returns the scope and the remaining (metadata) filters. Ids are literal and checked
    against the one grammar (`id_problem`); conflicting ids are an error, and so is a
    request with no entity id at all: nothing is ever read or written unscoped. Identity
    keys in any other shape are refused rather than passed on, since inside OR or NOT they
    would widen the scope.
    """
    found: dict[str, tuple[str, str]] = {}  # key -> (id, where it was given)

    def take(key: str, value: Any, where: str) -> None:
        problem = id_problem(value)
        if problem:
            raise ScopeError(f"{where}: {problem}")
        if key in found and found[key][0] != value:
            raise ScopeError(
                f"{where}: {key} is given twice with different values (also in {found[key][1]})"
            )
        found[key] = (value, where)

    for key in IDENTITY_KEYS:
        if getattr(body, key) is not None:
            take(key, getattr(body, key), key)
    rest: dict[str, Any] = {}
    for key, value in (filters or {}).items():
        if key in _LOGICAL_KEYS and (
            not isinstance(value, list) or not all(isinstance(item, dict) for item in value)
        ):
            raise ScopeError(f"filters.{key}: must be a list of objects (filter conditions)")
        if key in IDENTITY_KEYS:
            take(key, value, f"filters.{key}")
        elif key == "AND" and isinstance(value, list):
            kept = []
            for i, cond in enumerate(value):
                if isinstance(cond, dict) and len(cond) == 1 and next(iter(cond)) in IDENTITY_KEYS:
                    k, v = next(iter(cond.items()))
                    take(k, v, f"filters.AND[{i}].{k}")
                else:
                    _refuse_identity_keys(cond, f"filters.AND[{i}]")
                    kept.append(cond)
            if kept:
                rest["AND"] = kept
        else:
            _refuse_identity_keys(value, f"filters.{key}")
            rest[key] = value
    scope = EntityIds(**{key: value for key, (value, _) in found.items()})
    if not scope:
        raise ScopeError("a scope is required: give user_id, agent_id or run_id")
    return scope, rest


def scope_ids(
    scope: Scope | str, user_id: str, agent_id: str | None, project: str
) -> dict[str, str]:
    """An agent's memory scope as ids: user → {user_id}; agent → {user_id, agent_id};
    project → {user_id: project:<name>}."""
    scope = Scope(scope)
    if scope == Scope.PROJECT:
        if not project:
            raise ValueError("project scope needs a project name")
        return {"user_id": PROJECT_PREFIX + project}
    if not user_id or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")
    if user_id.startswith(PROJECT_PREFIX):
        raise ValueError(
            f"user_id may not start with {PROJECT_PREFIX!r} (reserved for project memory)"
        )
    if scope == Scope.AGENT:
        if not agent_id:
            raise ValueError("agent scope needs an agent_id")
        return {"user_id": user_id, "agent_id": agent_id}
    return {"user_id": user_id}
