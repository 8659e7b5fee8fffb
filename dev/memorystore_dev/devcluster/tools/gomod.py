"""The wrapper module that builds a pinned Go module outside its repository (pure).

Why a wrapper: `go build module@version` ignores the module's own replace directives, and
k8s.io/kubernetes requires its staging modules at v0.0.0 through folder replaces. A generated
module requires the pin, maps each such requirement to its published release, keeps upstream's
module-to-module replaces, and names the tools in `tool` directives for `go mod tidy`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence

from memorystore_dev.devcluster.tools.errors import BuildError
from memorystore_dev.devcluster.tools.groups import Group

__all__ = [
    "GoMod",
    "Replace",
    "parse_go_mod",
    "parse_semver",
    "render_go_mod",
    "staging_version",
    "unpublished_requirements",
    "wrapper_go_mod",
    "wrapper_replaces",
]

_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.+-]+)?$")


@dataclasses.dataclass(frozen=True)
class Replace:
    """One replace directive; a version-less `old_version` replaces every version."""

    old_path: str
    old_version: str | None
    new_path: str
    new_version: str | None  # None: `new_path` is a local folder

    @property
    def is_local(self) -> bool:
        """A replacement by a folder, which exists only in the upstream repository."""
        return self.new_version is None

    def render(self) -> str:
        """The directive as a line of a replace block."""
        old = f"{self.old_path} {self.old_version}" if self.old_version else self.old_path
        new = f"{self.new_path} {self.new_version}" if self.new_version else self.new_path
        return f"{old} => {new}"


@dataclasses.dataclass(frozen=True)
class GoMod:
    """The parts of a go.mod the wrapper module needs."""

    module: str
    go: str | None
    godebug: tuple[str, ...]
    requires: dict[str, str]
    replaces: tuple[Replace, ...]


def _directive_lines(text: str) -> Iterator[tuple[str, str]]:
    """(verb, rest) per directive, with `verb ( … )` blocks flattened and comments dropped."""
    block: str | None = None
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if block is not None:
            if line == ")":
                block = None
            else:
                yield block, line
            continue
        verb, _, rest = line.partition(" ")
        rest = rest.strip()
        if rest == "(":
            block = verb
        elif rest.startswith("(") and rest.endswith(")"):
            inner = rest[1:-1].strip()
            if inner:
                yield verb, inner
        else:
            yield verb, rest


def parse_go_mod(text: str) -> GoMod:
    """Parse module, go, godebug, require and replace directives of a go.mod file."""
    module, go = "", None
    godebug: list[str] = []
    requires: dict[str, str] = {}
    replaces: list[Replace] = []
    for verb, rest in _directive_lines(text):
        fields = rest.split()
        if verb == "module":
            module = fields[0].strip('"')
        elif verb == "go":
            go = fields[0]
        elif verb == "godebug":
            godebug.append(rest)
        elif verb == "require" and len(fields) >= 2:
            requires[fields[0]] = fields[1]
        elif verb == "replace":
            left, arrow, right = rest.partition("=>")
            if not arrow:
                raise ValueError(f"bad replace directive: {rest!r}")
            old, new = left.split(), right.split()
            replaces.append(
                Replace(
                    old_path=old[0],
                    old_version=old[1] if len(old) > 1 else None,
                    new_path=new[0],
                    new_version=new[1] if len(new) > 1 else None,
                )
            )
    if not module:
        raise ValueError("go.mod has no module directive")
    return GoMod(module, go, tuple(godebug), requires, tuple(replaces))


def parse_semver(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a `vX.Y.Z` module version; anything else is refused."""
    match = _SEMVER.match(version)
    if not match:
        raise ValueError(f"not a vX.Y.Z version: {version!r}")
    major, minor, patch = (int(x) for x in match.groups())
    return major, minor, patch


def staging_version(kubernetes_version: str) -> str:
    """k8s.io/kubernetes v1.Y.Z publishes its staging modules (k8s.io/api, …) as v0.Y.Z."""
    major, minor, patch = parse_semver(kubernetes_version)
    if major != 1:
        raise ValueError(f"unexpected Kubernetes major version: {kubernetes_version}")
    return f"v0.{minor}.{patch}"


def unpublished_requirements(mod: GoMod) -> list[str]:
    """Modules required at v0.0.0 and replaced by a local folder: they exist only in the repo.

    k8s.io/kubernetes does this for its staging modules; a wrapper module must map each to a
    published release, since a dependency's own replace directives are ignored.
    """
    local = {r.old_path for r in mod.replaces if r.is_local}
    return sorted(p for p, v in mod.requires.items() if v == "v0.0.0" and p in local)


def wrapper_replaces(group_name: str, version: str, mod: GoMod) -> list[Replace]:
    """Replaces the wrapper needs so the upstream module builds outside its repository."""
    unpublished = unpublished_requirements(mod)
    if unpublished and group_name != "kubernetes":
        raise BuildError(
            f"{mod.module}@{version} requires modules that exist only in its repository "
            f"(v0.0.0 + local replace), with no known release mapping: {', '.join(unpublished)}"
        )
    out = []
    if unpublished:
        release = staging_version(version)
        out = [Replace(p, "v0.0.0", p, release) for p in unpublished]
    # Upstream's module-to-module replaces shape its release build: keep them.
    out += [r for r in mod.replaces if not r.is_local]
    return out


def render_go_mod(
    module: str,
    go: str | None,
    requires: Mapping[str, str],
    replaces: Sequence[Replace],
    tools: Sequence[str],
    godebug: Sequence[str] = (),
) -> str:
    """A go.mod text; `tool` directives (Go ≥ 1.24) let `go mod tidy` resolve main packages."""
    lines = [f"module {module}", ""]
    if go:
        lines += [f"go {go}", ""]
    lines += [f"godebug {g}" for g in godebug] + ([""] if godebug else [])
    lines += ["require ("] + [f"\t{p} {v}" for p, v in requires.items()] + [")", ""]
    if replaces:
        lines += ["replace ("] + [f"\t{r.render()}" for r in replaces] + [")", ""]
    lines += ["tool ("] + [f"\t{t}" for t in tools] + [")"]
    return "\n".join(lines) + "\n"


def wrapper_go_mod(group: Group, upstream_go_mod: str, tools: Sequence[str]) -> str:
    """The generated module that requires `group.module` at its pin and names the tools."""
    mod = parse_go_mod(upstream_go_mod)
    if mod.module != group.module:
        raise BuildError(f"downloaded go.mod is for {mod.module}, expected {group.module}")
    return render_go_mod(
        module=group.wrapper,
        go=mod.go,
        requires={group.module: group.version},
        replaces=wrapper_replaces(group.name, group.version, mod),
        # A main of the wrapper's own needs no `tool` directive.
        tools=[group.packages[t] for t in tools if not group.packages[t].startswith(group.wrapper)],
        godebug=mod.godebug,
    )
