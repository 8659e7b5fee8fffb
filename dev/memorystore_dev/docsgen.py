"""The documentation site's generated reference pages, each from its one source of truth.

- `docs/reference/configuration.md`: the MemoryStore and MemoryStoreBackup resources, field by
  field, from the spec model (`memorystore.spec`) as the generated CRD carries it
  (`memorystore.operator.crd`): the same descriptions, types, defaults, allowed values and
  ranges `kubectl explain` shows, and the API server's rules with their messages.
- `docs/reference/http-api.md`: the memory service's HTTP API, route by route, from its
  OpenAPI document (`create_app` on the embedded default with `apiDocs` on, `app.openapi()`):
  parameters, request body fields, responses and their models.

The pages are checked in, like the CRD; a unit test (tests/unit/project/test_docs.py) and
`make docs` fail when one is stale.

    PYTHONSAFEPATH=1 .venv/bin/python -m memorystore_dev.docsgen --write
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONFIGURATION_PAGE = DOCS / "reference" / "configuration.md"
HTTP_API_PAGE = DOCS / "reference" / "http-api.md"
REGENERATE_COMMAND = "PYTHONSAFEPATH=1 .venv/bin/python -m memorystore_dev.docsgen --write"

Schema = dict[str, Any]

_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_DOCS_PAGE = re.compile(r"\bdocs/((?:[\w-]+/)*[\w-]+\.md)\b")


def _header(source: str) -> str:
    return (
        f"<!-- GENERATED from {source} by dev/memorystore_dev/docsgen.py; do not edit.\n"
        f"     Regenerate: {REGENERATE_COMMAND} -->\n"
    )


def text(value: str) -> str:
    """Prose for a Markdown table cell or paragraph: one line, and outside code spans no
    character Markdown would take for a cell border or an HTML tag."""
    out, at = [], 0
    for match in _CODE.finditer(value):
        out.append(_escape(value[at : match.start()]))
        out.append(match.group(0).replace("\n", " "))
        at = match.end()
    out.append(_escape(value[at:]))
    return " ".join("".join(out).split())


def _escape(plain: str) -> str:
    escaped = plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # A page of this site named in prose (a CRD message's "see docs/…md") becomes a link,
    # relative to docs/reference/, which the strict build checks.
    return _DOCS_PAGE.sub(r"[docs/\1](../\1)", escaped.replace("|", "\\|"))


def code(value: object) -> str:
    """A value as a code span (JSON for anything but a string), safe in a table cell."""
    shown = value if isinstance(value, str) and value else json.dumps(value, ensure_ascii=False)
    ticks = "``" if "`" in shown else "`"
    pad = " " if ticks == "``" else ""
    return f"{ticks}{pad}{shown}{pad}{ticks}"


def anchor(*parts: str) -> str:
    """An explicit heading id (attr_list), stable whatever the heading's words."""
    joined = "-".join(parts).replace("[]", "-items").replace("*", "-values")
    return re.sub(r"[^a-z0-9]+", "-", joined.lower()).strip("-")


def _constraints(node: Schema) -> list[str]:
    """A JSON Schema node's allowed values and ranges, in words."""
    said: list[str] = []
    if "enum" in node:
        said.append("one of " + ", ".join(code(v) for v in node["enum"]))
    if "const" in node:
        said.append("always " + code(node["const"]))
    low, high = node.get("minimum"), node.get("maximum")
    if isinstance(node.get("exclusiveMinimum"), int | float) and not isinstance(
        node.get("exclusiveMinimum"), bool
    ):
        said.append(f"> {node['exclusiveMinimum']:g}")
    elif low is not None:
        said.append(f"{'>' if node.get('exclusiveMinimum') is True else '≥'} {low:g}")
    if isinstance(node.get("exclusiveMaximum"), int | float) and not isinstance(
        node.get("exclusiveMaximum"), bool
    ):
        said.append(f"< {node['exclusiveMaximum']:g}")
    elif high is not None:
        said.append(f"{'<' if node.get('exclusiveMaximum') is True else '≤'} {high:g}")
    for key, unit in (("Length", "character"), ("Items", "item"), ("Properties", "key")):
        least, most = node.get(f"min{key}"), node.get(f"max{key}")
        if least is not None and most is not None:
            said.append(f"{least}–{most} {unit}s" if least != most else f"exactly {least} {unit}s")
        elif least is not None:
            said.append(f"at least {least} {unit}" + ("s" if least != 1 else ""))
        elif most is not None:
            said.append(f"at most {most} {unit}" + ("s" if most != 1 else ""))
    if "format" in node:
        said.append(f"format {code(node['format'])}")
    if "pattern" in node:
        said.append(f"matches {code(node['pattern'])}")
    return said


def _cell(description: str | None, extra: list[str]) -> str:
    parts = [text(description)] if description else []
    parts += [f"{c[0].upper()}{c[1:]}." for c in extra]
    return " ".join(parts) or "—"


def _page(lines: list[str]) -> str:
    """The page's text: one blank line between blocks, one newline at the end."""
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).rstrip("\n") + "\n"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


# --- the MemoryStore and MemoryStoreBackup resources ---------------------------------------


def _crd_type(node: Schema, path: str) -> str:
    kind = node.get("type", "any")
    if kind == "object" and node.get("properties"):
        return f"[object](#{anchor(path)})"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of string to {_crd_type(node['additionalProperties'], f'{path}.*')}"
    if kind == "array" and isinstance(node.get("items"), dict):
        return f"list of {_crd_type(node['items'], f'{path}[]')}"
    return str(kind)


def _crd_objects(node: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    """Every object node with fields under `node` (itself first), with its path."""
    if node.get("type") == "object" and node.get("properties"):
        yield path, node
        for name, sub in node["properties"].items():
            yield from _crd_objects(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _crd_objects(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _crd_objects(node["additionalProperties"], f"{path}.*")


def _crd_section(path: str, node: Schema) -> list[str]:
    lines = [f"### `{path}` {{#{anchor(path)}}}", ""]
    if node.get("description"):
        lines += [text(node["description"]), ""]
    required = set(node.get("required", []))
    rows = []
    for name, sub in node["properties"].items():
        said = _constraints(sub)
        for key, unit in (("additionalProperties", "each value"), ("items", "each item")):
            inner = sub.get(key)
            if isinstance(inner, dict) and not inner.get("properties") and _constraints(inner):
                said.append(f"{unit}: " + ", ".join(_constraints(inner)))
        if name in required:
            said.append("required")
        default = code(sub["default"]) if "default" in sub else "—"
        rows.append(
            [
                code(name),
                _crd_type(sub, f"{path}.{name}"),
                default,
                _cell(sub.get("description"), said),
            ]
        )
    lines += _table(["field", "type", "default", "description"], rows)
    rules = [("", rule) for rule in node.get("x-kubernetes-validations", [])]
    for name, sub in node["properties"].items():
        if not sub.get("properties"):  # a scalar's rules are said with its object
            rules += [(name, rule) for rule in sub.get("x-kubernetes-validations", [])]
    if rules:
        lines += ["", "Checked by the API server:", ""]
        for name, rule in rules:
            where = f"{code(name)}: " if name else ""
            lines.append(f"- {where}{text(rule['message'])}")
    return [*lines, ""]


def _resource(crd: Schema) -> list[str]:
    """One CustomResourceDefinition as a section: its names, columns and every field."""
    names, group = crd["spec"]["names"], crd["spec"]["group"]
    version = next(v for v in crd["spec"]["versions"] if v["storage"])
    deprecated = [v["name"] for v in crd["spec"]["versions"] if v.get("deprecated")]
    kind, schema = names["kind"], version["schema"]["openAPIV3Schema"]
    also = (
        " Also served, deprecated, with the same schema: "
        + ", ".join(code(f"{group}/{name}") for name in deprecated)
        + " ([API versions](../operations/upgrades.md#api-versions))."
        if deprecated
        else ""
    )
    lines = [
        f"## {kind} {{#{anchor(kind)}}}",
        "",
        f"`apiVersion: {group}/{version['name']}`, `kind: {kind}` (short name "
        + ", ".join(code(s) for s in names.get("shortNames", []))
        + f"). {text(schema['description'])}{also}",
        "",
        "`kubectl get` shows:",
        "",
        *_table(
            ["column", "from"],
            [
                [text(c["name"]), code(c["jsonPath"])]
                for c in version.get("additionalPrinterColumns", [])
            ],
        ),
        "",
    ]
    for part in ("spec", "status"):
        for path, node in _crd_objects(schema["properties"][part], part):
            lines += _crd_section(path if kind == "MemoryStore" else f"{kind}.{path}", node)
    return lines


def configuration_page() -> str:
    """docs/reference/configuration.md: both resources, every field, as the CRDs carry them."""
    from memorystore.operator import crd

    lines = [
        _header("the spec model, memorystore.spec (through the CRDs: memorystore.operator.crd)"),
        "# Configuration reference",
        "",
        "Every field of the two custom resources the operator serves, generated from the spec "
        "model that also generates the CRDs: the descriptions are the ones "
        "`kubectl explain memorystore.spec` (and `kubectl explain msbackup.spec`) shows, the "
        "defaults are the ones the API server fills in, and the rules are the ones it checks "
        "when an object is applied. Guides: [Kubernetes](../kubernetes.md), "
        "[backups](../operations/backups.md), [changing tiers]"
        "(../operations/changing-tiers.md). The memory service's own file is described in "
        "[service configuration](service-config.md).",
        "",
    ]
    lines += _resource(crd.render_crd())
    lines += _resource(crd.render_backup_crd())
    return _page(lines)


# --- the memory service's HTTP API ---------------------------------------------------------

_METHODS = ("get", "put", "post", "patch", "delete", "head", "options")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _model_link(name: str) -> str:
    return f"[`{name}`](#{anchor('model', name)})"


def _api_variants(node: Schema) -> tuple[list[Schema], bool]:
    """A node's alternatives without `null`, and whether `null` is one of them."""
    for key in ("anyOf", "oneOf"):
        if key in node:
            variants = [v for v in node[key] if v.get("type") != "null"]
            return variants, len(variants) < len(node[key])
    return [node], False


def _api_type(node: Schema) -> str:
    if "$ref" in node:
        return _model_link(_ref_name(node["$ref"]))
    if "allOf" in node and len(node["allOf"]) == 1:
        return _api_type(node["allOf"][0])
    variants, nullable = _api_variants(node)
    if variants != [node]:
        shown = " or ".join(_api_type(v) for v in variants) or "any"
        return f"{shown} or null" if nullable else shown
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        return (
            f"list of {_api_type(node['items'])}" if isinstance(node.get("items"), dict) else "list"
        )
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        inner = node["additionalProperties"]
        return f"map of string to {_api_type(inner)}" if inner else "object"
    if "const" in node and kind is None:
        return code(node["const"])
    return str(kind or "any")


def _api_said(node: Schema) -> list[str]:
    """Constraints of a node and of its non-null alternative, and an inline object's keys."""
    said = _constraints(node)
    variants, _ = _api_variants(node)
    if variants != [node] and len(variants) == 1 and "$ref" not in variants[0]:
        said += _constraints(variants[0])
    if "properties" in node:
        said.append("keys " + ", ".join(code(k) for k in node["properties"]))
    return said


def _description(node: Schema) -> str | None:
    if node.get("description"):
        return str(node["description"])
    variants, _ = _api_variants(node)
    if len(variants) == 1 and variants[0] is not node:
        return _description(variants[0])
    return None


def _fields(model: Schema) -> list[str]:
    required = set(model.get("required", []))
    rows = []
    for name, node in model.get("properties", {}).items():
        default = code(node["default"]) if "default" in node else "—"
        rows.append(
            [
                code(name),
                _api_type(node),
                "yes" if name in required else "no",
                default,
                _cell(_description(node), _api_said(node)),
            ]
        )
    if not rows:
        return [_model_shape(model), ""]
    lines = _table(["field", "type", "required", "default", "description"], rows)
    extra = model.get("additionalProperties")
    if extra is True or isinstance(extra, dict):
        lines.append("")
        lines.append("Other keys are accepted too.")
    return [*lines, ""]


def _model_shape(model: Schema) -> str:
    return f"A JSON {_api_type(model)}."


def _body(content: dict[str, Any]) -> tuple[str, Schema | None]:
    """The media type and schema of a request or response body (JSON first)."""
    media = "application/json" if "application/json" in content else next(iter(content))
    return media, content[media].get("schema")


def _route(path: str, method: str, op: Schema, schemas: dict[str, Schema]) -> list[str]:
    title = f"{method.upper()} {path}"
    lines = [f"### `{title}` {{#{anchor(method, path)}}}", ""]
    if op.get("summary"):
        lines += [
            f"**{text(op['summary'])}.**"
            + (" " + text(op["description"]) if op.get("description") else ""),
            "",
        ]
    elif op.get("description"):
        lines += [text(op["description"]), ""]
    if op.get("deprecated"):
        lines += ["Deprecated.", ""]
    params = op.get("parameters", [])
    if params:
        rows = [
            [
                code(p["name"]),
                p["in"],
                _api_type(p.get("schema", {})),
                "yes" if p.get("required") else "no",
                _cell(
                    p.get("description") or _description(p.get("schema", {})),
                    _api_said(p.get("schema", {})),
                ),
            ]
            for p in params
        ]
        lines += ["Parameters:", ""]
        lines += _table(["name", "in", "type", "required", "description"], rows)
        lines.append("")
    body = op.get("requestBody")
    if body:
        media, schema = _body(body.get("content", {}))
        need = "required" if body.get("required") else "optional"
        if schema and "$ref" in schema:
            name = _ref_name(schema["$ref"])
            lines += [f"Request body ({code(media)}, {need}): {_model_link(name)}", ""]
            lines += _fields(schemas[name])
        else:
            lines += [f"Request body ({code(media)}, {need}): {_api_type(schema or {})}", ""]
            if schema and "properties" in schema:
                lines += _fields(schema)
    rows = []
    for status, response in sorted(op.get("responses", {}).items()):
        content = response.get("content")
        if content:
            media, schema = _body(content)
            shown = _api_type(schema or {})
            if media != "application/json":
                shown = f"{shown} ({code(media)})"
        else:
            shown = "—"
        rows.append([code(status), _cell(response.get("description"), []), shown])
    lines += ["Responses:", ""]
    lines += _table(["status", "meaning", "body"], rows)
    return [*lines, ""]


def http_api_page(document: Schema) -> str:
    """docs/reference/http-api.md from an OpenAPI document."""
    info = document.get("info", {})
    schemas: dict[str, Schema] = document.get("components", {}).get("schemas", {})
    # One section per tag (routers tag their routes), in the document's order; untagged last.
    groups: dict[str, list[tuple[str, str, Schema]]] = {}
    for path, item in document.get("paths", {}).items():
        for method, op in item.items():
            if method in _METHODS:
                (tag, *_) = op.get("tags") or [""]
                groups.setdefault(tag, []).append((path, method, op))
    ordered = sorted(groups.items(), key=lambda group: group[0] == "")
    lines = [
        _header("the memory service's OpenAPI document (memorystore.service.app.create_app)"),
        "# HTTP API reference",
        "",
        f"Every route of the memory service ({text(info.get('title', ''))}, version "
        f"{code(info.get('version', ''))}) as its OpenAPI document describes it: the document "
        "`create_app` builds on the embedded default with `apiDocs: true`, which a running "
        "service also serves at `/openapi.json`, `/docs` and `/redoc` when `apiDocs` is on. "
        "What the calls mean, and the scope, id and error rules they share: "
        "[the memory service](../memory-service.md).",
        "",
        "## Routes",
        "",
        *_table(
            ["method", "path", "summary"],
            [
                [
                    code(method.upper()),
                    f"[{code(path)}](#{anchor(method, path)})",
                    text(op.get("summary", "")) or "—",
                ]
                for _, routes in ordered
                for path, method, op in routes
            ],
        ),
        "",
    ]
    for tag, routes in ordered:
        title = tag[:1].upper() + tag[1:] if tag else "Other calls" if len(groups) > 1 else "Calls"
        lines += [f"## {text(title)}", ""]
        for path, method, op in routes:
            lines += _route(path, method, op, schemas)
    if schemas:
        lines += ["## Models", ""]
        for name, model in sorted(schemas.items()):
            lines += [f"### `{name}` {{#{anchor('model', name)}}}", ""]
            if model.get("description"):
                lines += [text(model["description"]), ""]
            lines += _fields(model)
    return _page(lines)


def openapi_document() -> Schema:
    """The service's OpenAPI document: `create_app` on the embedded default, API docs on, in
    a throwaway data directory (nothing is served or started)."""
    from memorystore.service.app import create_app
    from memorystore.service.ops.runner import embedded_config

    with tempfile.TemporaryDirectory(prefix="memorystore-docsgen-") as data:
        app = create_app(embedded_config(Path(data), api_docs=True))
        return app.openapi()


# --- the command ---------------------------------------------------------------------------


def outputs() -> dict[Path, str]:
    """Every generated page and its fresh text."""
    return {
        CONFIGURATION_PAGE: configuration_page(),
        HTTP_API_PAGE: http_api_page(openapi_document()),
    }


def stale(files: dict[Path, str]) -> list[Path]:
    """The pages whose checked-in text differs from `files`."""
    return [
        path
        for path, fresh in files.items()
        if not path.exists() or path.read_text(encoding="utf-8") != fresh
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the pages, write them (`--write`), or exit 1 naming the stale ones (`--check`)."""
    parser = argparse.ArgumentParser(prog="python -m memorystore_dev.docsgen", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write the generated pages")
    group.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = parser.parse_args(argv)
    files = outputs()
    if args.write:
        for path, page in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    elif args.check:
        old = stale(files)
        for path in old:
            print(
                f"{path.relative_to(ROOT)} is stale; regenerate: {REGENERATE_COMMAND}",
                file=sys.stderr,
            )
        return 1 if old else 0
    else:
        sys.stdout.write("\n".join(files.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
