"""The documentation: the generated reference pages are current, every page is in the site's
navigation, and the README stays a front page whose links lead to files that exist.

`make docs` builds the site strictly (links, anchors, the navigation); these checks run
without MkDocs, so a stale page or a README link fails fast in the unit suite too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from markdown.extensions.toc import slugify

from memorystore_dev import docsgen
from support.paths import REPO

DOCS = REPO / "docs"
README = REPO / "README.md"
README_MAX_LINES = 250
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?)(?: +\{#([^}]+)\})? *$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def nav_pages(nav: Any) -> list[str]:
    """Every page a MkDocs `nav` names, depth first."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return []


def anchors(page: Path) -> set[str]:
    """The heading ids of a Markdown page, as MkDocs makes them (an explicit `{#id}` wins)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = set()
    for title, explicit in HEADING.findall(text):
        found.add(explicit or slugify(re.sub(r"[`*_]", "", title), "-"))
    return found


def first_block(text: str, language: str) -> str:
    blocks = re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert blocks, f"no {language} block"
    return blocks[0]


def section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_the_generated_pages_are_current():
    assert docsgen.ROOT == REPO, "memorystore-dev is installed from another checkout"
    stale = docsgen.stale(docsgen.outputs())
    assert not stale, (
        f"stale: {', '.join(str(p.relative_to(REPO)) for p in stale)}; "
        f"regenerate: {docsgen.REGENERATE_COMMAND}"
    )


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config.get("docs_dir", "docs") == "docs"
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), "a page is listed twice"
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - set(listed) == set(), "pages missing from mkdocs.yml's nav"
    assert set(listed) - pages == set(), "nav entries without a page"


def test_the_site_is_built_strictly_with_link_validation():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True
    assert config["validation"] == {
        "nav": {"omitted_files": "warn", "not_found": "warn", "absolute_links": "warn"},
        "links": {
            "not_found": "warn",
            "anchors": "warn",
            "absolute_links": "warn",
            "unrecognized_links": "warn",
        },
    }


def test_the_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to docs/"
    )


def test_the_readme_links_only_to_files_that_exist():
    text = FENCE.sub("", README.read_text(encoding="utf-8"))
    links = LINK.findall(text)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        if re.match(r"[a-z]+:", link):  # https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        path = (REPO / target).resolve() if target else README
        assert path.is_relative_to(REPO) and path.exists(), f"README links to {link}: no file"
        if anchor:
            assert path.suffix == ".md", f"README links to {link}: an anchor into a non-page"
            assert anchor in anchors(path), f"README links to {link}: no such heading"


def test_the_readme_quick_start_is_the_guide_the_walk_runs():
    """tests/e2e/test_walk_real_node.py runs docs/kubernetes.md's commands; the README shows
    the same ones, and the same factory lines as the agent side's page."""
    readme = README.read_text(encoding="utf-8")
    guide = (DOCS / "kubernetes.md").read_text(encoding="utf-8")
    assert first_block(section(readme, "## On Kubernetes"), "bash") == first_block(guide, "bash")
    agent_side = first_block((DOCS / "agent-side.md").read_text(encoding="utf-8"), "python")
    shown = first_block(section(readme, "## On Kubernetes"), "python")
    for line in shown.splitlines():
        assert line in agent_side.splitlines(), f"README's {line!r} is not in docs/agent-side.md"


def test_the_migration_page_keeps_its_heading():
    """The CRD's messages and `kubectl explain` send users to this page by its title."""
    page = DOCS / "operations" / "changing-tiers.md"
    assert page.read_text(encoding="utf-8").startswith("# Changing tiers or the embedding model\n")


# --- the generator renders what a document holds ------------------------------------------


def test_the_http_api_page_renders_routes_bodies_and_response_models():
    document = {
        "info": {"title": "Svc", "version": "1"},
        "paths": {
            "/v1/things/{id}/": {
                "post": {
                    "summary": "Make",
                    "description": "Makes a <thing> | another.",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/In"}}
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "Made",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Out"}}
                            },
                        },
                        "404": {"description": "None such"},
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "In": {
                    "type": "object",
                    "required": ["n"],
                    "properties": {
                        "n": {"type": "integer", "minimum": 1, "maximum": 9, "default": 2},
                        "tag": {
                            "anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}],
                            "description": "Which one.",
                        },
                    },
                },
                "Out": {
                    "type": "object",
                    "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/In"}}},
                },
            }
        },
    }
    page = docsgen.http_api_page(document)
    assert "### `POST /v1/things/{id}/` {#post-v1-things-id}" in page
    assert "**Make.** Makes a &lt;thing&gt; \\| another." in page
    assert "Request body (`application/json`, required): [`In`](#model-in)" in page
    assert "| `n` | integer | yes | `2` | ≥ 1. ≤ 9. |" in page
    assert "| `tag` | string or null | no | — | Which one. One of `a`, `b`. |" in page
    assert "| `200` | Made | [`Out`](#model-out) |" in page
    assert "| `404` | None such | — |" in page
    assert "### `Out` {#model-out}" in page
    assert "| `items` | list of [`In`](#model-in) |" in page
    assert page.startswith("<!-- GENERATED") and docsgen.REGENERATE_COMMAND in page


def test_table_text_keeps_code_and_escapes_the_rest():
    assert docsgen.text("a <b>|c `x|<y>` d\n  e") == "a &lt;b&gt;\\|c `x|<y>` d e"
    assert docsgen.code("") == '`""`' and docsgen.code({"a": 1}) == '`{"a": 1}`'
    # a page named in a CRD message links to it (from docs/reference/, where both pages are)
    assert docsgen.text("(see docs/operations/changing-tiers.md)") == (
        "(see [docs/operations/changing-tiers.md](../operations/changing-tiers.md))"
    )
    assert docsgen.CONFIGURATION_PAGE.parent == docsgen.HTTP_API_PAGE.parent == DOCS / "reference"
