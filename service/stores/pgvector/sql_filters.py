"""mem0 filters as SQL over the PostgreSQL store's tables: the embedded engine's checks.

Why compile from the engine's Filter (`stores.filters.engine_filter`) rather than from mem0's
dict: validation, errors and the identity rules are then the embedded store's by
construction, and each condition below is only the engine's check written in SQL, every value
and key a bound parameter. Where the engine is odd, this is too (see `FilterSql`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import qdrant_edge as qe
from psycopg import sql

from memorystore.service.stores.embedded import KEYWORD_INDEX_FIELDS
from memorystore.service.stores.filters import engine_filter
from memorystore.service.stores.pgvector.encoding import point_uuid, shown_micros, word_ids
from memorystore.service.stores.protocol import Filters

__all__ = ["FilterSql", "JsonPath", "parse_path"]

_INT4_MAX = 2**31 - 1

JsonPath = list[str | int | None]  # a JSON path: key, array index, or None for "every element"


def parse_path(key: str) -> JsonPath:
    """A JSON path as the engine normalises it: 'a.b', 'a[]', 'a[0].b', '"a.b"' (quoted
    key). The engine has already refused malformed paths."""
    steps: JsonPath = []
    i = 0
    while i < len(key):
        char = key[i]
        if char == ".":
            i += 1
        elif char == '"':
            end = key.index('"', i + 1)
            steps.append(key[i + 1 : end])
            i = end + 1
        elif char == "[":
            end = key.index("]", i)
            inner = key[i + 1 : end]
            steps.append(int(inner) if inner else None)
            i = end + 1
        else:
            end = i
            while end < len(key) and key[end] not in '.["':
                end += 1
            steps.append(key[i:end])
            i = end
    return steps


Test = Callable[[sql.Composable], sql.Composable]


class FilterSql:
    """A WHERE clause over table alias `alias` equal to the engine's filter, with named
    parameters (`params`); values and keys are always bound, never spliced.

    The translation starts from filters.engine_filter's engine filter, so what is
    refused, how AND/OR/NOT and their $-aliases combine, the '*' wildcard, identity keys and
    the confinement are the embedded store's. Each condition is the engine's check
    (qdrant-edge 0.9.0, Qdrant's condition checker), including its odd corners:

    - a path's value that is an array matches when any element matches; arrays inside it are
      not flattened further; 'a.b' does not step into an array (only 'a[].b' does);
    - integers match integers only: 1.0 is not 1, and strings never match numbers;
    - ne/nin (MatchExcept) match a point having at least one value outside the list (so
      ["a", "b"] is "≠ a"); a missing field, null or [] never matches. On a field the engine
      keyword-indexes (KEYWORD_INDEX_FIELDS) string exclusion reads the index, which holds
      only strings: there, only string values count (5 is not "≠ a" on `hash`, it is on any
      other field);
    - an empty `nin` list is a string list: on a keyword-indexed field it matches the points
      with a string value;
    - contains/icontains match whole words of a string value, lowercased, in any order, with
      the engine's tokenizer (every non-alphanumeric character separates; no stemming);
      a text without words matches nothing;
    - numeric ranges compare doubles (2**53 + 1 is not above 2**53); a range with only None
      bounds matches every number; datetime ranges compare strings the engine parses as
      datetimes (microseconds, UTC; naive means UTC);
    - the confinement's "no user" is a missing user_id, null or [] (not "" and not [null]).
    """

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.params: dict[str, Any] = {}

    def where(self, filters: Filters | None) -> sql.Composable:
        """The clause for a mem0 filter dict (TRUE when nothing constrains)."""
        built = engine_filter(filters)
        return sql.SQL("TRUE") if built is None else self.filter(built)

    def filter(self, built: qe.Filter) -> sql.Composable:
        parts = [self.condition(c) for c in built.must or []]
        if built.should is not None:
            options = [self.condition(c) for c in built.should]
            parts.append(sql.SQL("({})").format(sql.SQL(" OR ").join(options or [_FALSE])))
        parts += [sql.SQL("NOT {}").format(self.condition(c)) for c in built.must_not or []]
        return sql.SQL("({})").format(sql.SQL(" AND ").join(parts)) if parts else sql.SQL("TRUE")

    def condition(self, condition: Any) -> sql.Composable:
        if isinstance(condition, qe.Filter):
            return self.filter(condition)
        if isinstance(condition, qe.FieldCondition):
            return self.field(condition)
        if isinstance(condition, qe.IsEmptyCondition):
            return self.is_empty(parse_path(condition.key))
        if isinstance(condition, qe.HasIdCondition):
            ids = sorted(point_uuid(str(i)) for i in condition.point_ids)
            return sql.SQL("({}.id = ANY({}))").format(
                sql.Identifier(self.alias), self.param(ids, "uuid[]")
            )
        raise TypeError(f"unsupported filter condition: {condition!r}")

    def field(self, condition: qe.FieldCondition) -> sql.Composable:
        path = parse_path(condition.key)
        match, bounds = condition.match, condition.range
        if isinstance(match, qe.MatchValue):
            return self.match_value(path, match.value)
        if isinstance(match, qe.MatchAny):
            return self.match_any(path, list(match.value))
        if isinstance(match, qe.MatchExcept):
            return self.match_except(path, list(match.value), condition.key)
        if isinstance(match, qe.MatchText):
            words = word_ids(match.text)
            if not words:
                return _FALSE
            held = self.param(words, "text[]")
            return self.any_value(
                "words",
                path,
                lambda e: sql.SQL(
                    "(jsonb_typeof({e}) = 'string' AND string_to_array({e} #>> '{{}}', ' ') @> {w})"
                ).format(e=e, w=held),
            )
        if isinstance(bounds, qe.RangeFloat):
            return self.any_value("payload", path, self._range(bounds, "float8", float))
        if isinstance(bounds, qe.RangeDateTime):
            return self.any_value("times", path, self._range(bounds, "bigint", shown_micros))
        raise TypeError(f"unsupported field condition on {condition.key!r}")

    def match_value(self, path: JsonPath, value: Any) -> sql.Composable:
        if isinstance(value, bool):  # filters.py refuses these before the engine sees them
            raise ValueError(f"Boolean filter values are not supported: {value!r}")
        if isinstance(value, str) and "\x00" in value:  # cannot be stored: matches nothing
            return _FALSE
        if len(path) != 1 or not isinstance(path[0], str):
            return self.any_value("payload", path, self._value_test(value))
        # a top-level key: in a form the GIN index answers (scopes above all), exact for
        # strings; 5.0 contains 5 in jsonb, so an integer is also checked as one
        key = path[0]
        indexed = sql.SQL("({p} @> {a} OR {p} @> {b})").format(
            p=self._column("payload"),
            a=self.param(json.dumps({key: value}), "jsonb"),
            b=self.param(json.dumps({key: [value]}), "jsonb"),
        )
        if isinstance(value, str):
            return indexed
        exact = self.any_value("payload", path, self._value_test(value))
        return sql.SQL("({} AND {})").format(indexed, exact)

    def match_any(self, path: JsonPath, values: list[Any]) -> sql.Composable:
        if any(isinstance(v, bool) for v in values):
            raise ValueError(f"Boolean filter values are not supported: {values!r}")
        strings = [v for v in values if isinstance(v, str) and "\x00" not in v]
        if not strings and not any(isinstance(v, int) for v in values):
            return _FALSE
        if all(isinstance(v, str) for v in values):
            held = self.param(strings, "text[]")
            return self.any_value(
                "payload",
                path,
                lambda e: sql.SQL(
                    "(jsonb_typeof({e}) = 'string' AND ({e} #>> '{{}}') = ANY({s}))"
                ).format(e=e, s=held),
            )
        return self.any_value("payload", path, self._integer_in([int(v) for v in values]))

    def match_except(self, path: JsonPath, values: list[Any], key: str) -> sql.Composable:
        if any(isinstance(v, bool) for v in values):
            raise ValueError(f"Boolean filter values are not supported: {values!r}")
        if all(isinstance(v, str) for v in values):  # also the empty list, as the engine
            held = self.param([v for v in values if "\x00" not in v], "text[]")
            if key in KEYWORD_INDEX_FIELDS:  # read from the keyword index: strings only
                test = "(jsonb_typeof({e}) = 'string' AND NOT ({e} #>> '{{}}') = ANY({s}))"
            else:
                test = (
                    "(CASE jsonb_typeof({e}) WHEN 'null' THEN FALSE WHEN 'string' "
                    "THEN NOT ({e} #>> '{{}}') = ANY({s}) ELSE TRUE END)"
                )
            return self.any_value("payload", path, lambda e: sql.SQL(test).format(e=e, s=held))
        held = self.param([str(int(v)) for v in values], "text[]")
        return self.any_value(
            "payload",
            path,
            lambda e: sql.SQL(
                "(CASE jsonb_typeof({e}) WHEN 'null' THEN FALSE WHEN 'number' THEN NOT "
                "(strpos({e}::text, '.') = 0 AND {e}::text = ANY({s})) ELSE TRUE END)"
            ).format(e=e, s=held),
        )

    def is_empty(self, path: JsonPath) -> sql.Composable:
        """The engine's IsEmpty: no value at the path but null or []."""
        sources, value = self._walk("payload", path)
        empty = sql.SQL("(COALESCE({v}, 'null'::jsonb) IN ('null'::jsonb, '[]'::jsonb))").format(
            v=value
        )
        if not sources:
            return empty
        return sql.SQL("(NOT EXISTS (SELECT 1 FROM {} WHERE NOT {}))").format(
            sql.SQL(", ").join(sources), empty
        )

    def any_value(self, column: str, path: JsonPath, test: Test) -> sql.Composable:
        """Whether any value at `path` of `column` passes `test`: an array's elements are
        each a value (one level, as the engine flattens), a missing path has none."""
        sources, value = self._walk(column, path)
        element = sql.SQL("_e.v")
        if not sources:
            return sql.SQL(
                "(CASE WHEN {v} IS NULL THEN FALSE WHEN jsonb_typeof({v}) = 'array' THEN "
                "EXISTS (SELECT 1 FROM jsonb_array_elements({v}) AS _e(v) WHERE {t}) "
                "ELSE COALESCE({s}, FALSE) END)"
            ).format(v=value, t=test(element), s=test(value))
        flattened = sql.SQL(
            "jsonb_array_elements(CASE WHEN jsonb_typeof({v}) = 'array' THEN {v} "
            "ELSE jsonb_build_array({v}) END) AS _e(v)"
        ).format(v=value)
        return sql.SQL("(EXISTS (SELECT 1 FROM {} WHERE COALESCE({}, FALSE)))").format(
            sql.SQL(", ").join([*sources, flattened]), test(element)
        )

    def param(self, value: Any, cast: str) -> sql.Composable:
        """A bound parameter cast to `cast` (a type name written in this module)."""
        name = f"f{len(self.params)}"
        self.params[name] = value
        return sql.SQL("{}::" + cast).format(sql.Placeholder(name))

    def _column(self, column: str) -> sql.Composable:
        return sql.Identifier(self.alias, column)

    def _walk(self, column: str, path: JsonPath) -> tuple[list[sql.Composable], sql.Composable]:
        """FROM items for the path's `[]` steps and the expression of the value reached.
        A key steps into an object only, an index into an array only (jsonb's -> does
        exactly that), `[]` into each element of an array."""
        sources: list[sql.Composable] = []
        value: sql.Composable = self._column(column)
        for step in path:
            if step is None:
                alias = sql.Identifier(f"_w{len(sources)}")
                sources.append(
                    sql.SQL(
                        "jsonb_array_elements(CASE WHEN jsonb_typeof({v}) = 'array' THEN {v} "
                        "ELSE '[]'::jsonb END) AS {a}(v)"
                    ).format(v=value, a=alias)
                )
                value = sql.SQL("{}.v").format(alias)
            elif isinstance(step, int):
                if step > _INT4_MAX:  # no array is that long
                    value = sql.SQL("NULL::jsonb")
                else:
                    value = sql.SQL("({} -> {})").format(value, self.param(step, "int"))
            else:
                value = sql.SQL("({} -> {})").format(value, self.param(step, "text"))
        return sources, value

    def _value_test(self, value: str | int) -> Test:
        return self._string_equals(value) if isinstance(value, str) else self._integer_in([value])

    def _string_equals(self, value: str) -> Test:
        held = self.param(json.dumps(value), "jsonb")
        return lambda e: sql.SQL("({} = {})").format(e, held)

    def _integer_in(self, values: list[int]) -> Test:
        """An integer (no decimal point: payload_json writes every float with one) among
        `values`."""
        held = self.param([str(v) for v in values], "text[]")
        return lambda e: sql.SQL(
            "(jsonb_typeof({e}) = 'number' AND strpos({e}::text, '.') = 0 AND {e}::text = ANY({s}))"
        ).format(e=e, s=held)

    def _range(self, bounds: Any, cast: str, convert: Callable[[Any], Any]) -> Test:
        checks: list[tuple[str, sql.Composable]] = []
        for name, operator in (("gt", ">"), ("gte", ">="), ("lt", "<"), ("lte", "<=")):
            bound = getattr(bounds, name)
            if bound is not None:
                checks.append((operator, self.param(convert(bound), cast)))

        def test(e: sql.Composable) -> sql.Composable:
            # CASE, not AND: SQL may evaluate a conjunction in any order, and the cast of
            # a non-number fails
            compared = [
                sql.SQL("({})::" + cast + " " + op + " {}").format(e, bound) for op, bound in checks
            ]
            return sql.SQL("(CASE WHEN jsonb_typeof({}) = 'number' THEN {} ELSE FALSE END)").format(
                e, sql.SQL(" AND ").join(compared) if compared else sql.SQL("TRUE")
            )

        return test


_FALSE = sql.SQL("FALSE")
