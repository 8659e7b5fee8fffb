"""The pydantic models' JSON Schema as Kubernetes *structural* OpenAPI v3 schemas.

A structural schema is what the API server needs to prune, default and validate: a type on
every node, no `$ref` or unions. The conversion is strict on purpose: a model change that
Kubernetes cannot express (a union, an unknown keyword, a field without a description for
`kubectl explain`) fails the render here, naming its path, rather than at the API server.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

__all__ = ["Schema", "node_at", "ordered", "pydantic_schema", "structural_schema"]

Schema = dict[str, Any]


# Keywords a structural schema may carry that pydantic emits; anything else fails the render,
# so a model change that Kubernetes cannot express is caught here, not by the API server.
_KEPT = (
    "type",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "format",
    "required",
)
_DROPPED = ("title", "$defs", "examples")


class _WithFactoryDefaults(GenerateJsonSchema):
    """Also emit defaults made by `default_factory`, so the API server applies them too.

    A model default is dumped with `exclude_defaults`: `{"managed": {}}` rather than every
    nested value, because the server fills nested defaults in from their own schemas.
    """

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is None or schema.get("default_factory_takes_data"):
            return super().get_default_value(schema)
        value = cast(Callable[[], Any], factory)()  # takes no data: checked just above
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return value if value is not None else NoDefault


def pydantic_schema(model: type[BaseModel]) -> Schema:
    """The model's JSON Schema as pydantic makes it (validation mode, camelCase)."""
    return model.model_json_schema(
        by_alias=True, mode="validation", schema_generator=_WithFactoryDefaults
    )


def _resolve(node: Schema, defs: dict[str, Schema], path: str) -> Schema:
    """Inline `$ref` and Optional's `anyOf: [X, null]`; the referring node's keys win."""
    while True:
        if "$ref" in node:
            target = dict(defs[node["$ref"].rsplit("/", 1)[-1]])
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **rest}
        elif "anyOf" in node or "allOf" in node or "oneOf" in node:
            key = next(k for k in ("anyOf", "allOf", "oneOf") if k in node)
            variants = [v for v in node[key] if v != {"type": "null"}]
            if len(variants) != 1:
                raise ValueError(f"{path}: a union of {len(variants)} types has no structural form")
            rest = {k: v for k, v in node.items() if k != key}
            if rest.get("default", ...) is None:
                del rest["default"]  # Optional's None: absent, not null
            node = {**_resolve(variants[0], defs, path), **rest}
        else:
            return node


def _structural(node: Schema, defs: dict[str, Schema], path: str) -> Schema:
    """One pydantic JSON Schema node as a Kubernetes structural schema node."""
    node = _resolve(node, defs, path)
    out: Schema = {}
    if node.get("description"):
        out["description"] = node["description"]
    for key, value in node.items():
        if key in _DROPPED or key == "description":
            continue
        if key == "properties":
            props: Schema = {}
            for name, sub in value.items():
                sub_path = f"{path}.{name}"
                converted = _structural(sub, defs, sub_path)
                if not converted.get("description"):
                    raise ValueError(
                        f"{sub_path} has no description: give the pydantic field a "
                        "description (`kubectl explain` and the docs are generated from it)"
                    )
                props[name] = converted
            out["properties"] = props
        elif key == "additionalProperties":
            if value is False:
                continue  # pruning and strict field validation refuse unknown fields
            if "properties" in node:
                raise ValueError(f"{path}: properties and additionalProperties together")
            out["additionalProperties"] = _structural(value, defs, f"{path}.*")
        elif key == "items":
            out["items"] = _structural(value, defs, f"{path}[]")
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            # JSON Schema 2020-12 bound → OpenAPI v3.0 bound plus a flag.
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key in _KEPT:
            out[key] = copy.deepcopy(value)
        else:
            raise ValueError(f"{path}: JSON Schema keyword {key!r} has no structural form")
    if "type" not in out:
        raise ValueError(f"{path}: no type (a structural schema needs one on every node)")
    return out


_ORDER = (
    "description",
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
)


def structural_schema(model: type[BaseModel], path: str) -> Schema:
    """A model as a structural schema; `path` (e.g. `spec`) prefixes the paths in errors."""
    json_schema = pydantic_schema(model)
    return _structural(json_schema, json_schema.get("$defs", {}), path)


def ordered(node: Schema) -> Schema:
    """Keys in one fixed order, so the checked-in YAML reads the same way at every level."""
    out = {key: node[key] for key in _ORDER if key in node}
    out.update({key: value for key, value in node.items() if key not in out})
    if "properties" in out:
        out["properties"] = {name: ordered(sub) for name, sub in out["properties"].items()}
    for key in ("additionalProperties", "items"):
        if isinstance(out.get(key), dict):
            out[key] = ordered(out[key])
    return out


def node_at(schema: Schema, path: str) -> Schema:
    """The node at a dotted schema path (`*` is a map's value schema, `name[]` the item
    schema of the list `name`)."""
    node = schema
    for part in path.split(".")[1:]:
        if part == "*":
            node = node["additionalProperties"]
        else:
            try:
                node = node["properties"][part.removesuffix("[]")]
                if part.endswith("[]"):
                    node = node["items"]
            except KeyError:
                raise ValueError(f"{path}: no such field in the spec model") from None
    return node
