"""Build the pinned control-plane tool binaries from Go modules, once, into a per-user cache.

Why: this machine reaches package registries only (no release download sites), so the
harness's kube-apiserver, etcd, kwok, … are compiled from the Go module proxy with the
machine's Go. A build takes many minutes, so each binary is cached under
`${XDG_CACHE_HOME:-~/.cache}/memorystore/k8s-tools/<tool>-<version>/<tool>` and built only when
missing. Binaries are built and checked in a temp folder beside the cache and moved into place
with one rename, so a killed build can never be mistaken for a finished one.

    python -m memorystore_dev.devcluster.build [--tools kubectl,etcd] [--print-versions]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from memorystore_dev.devcluster import versions

Log = Callable[[str], None]

# The machine's Go; MEMORYSTORE_GO overrides it. GOTOOLCHAIN=local keeps it from fetching another.
DEFAULT_GO = "/usr/local/go/bin/go"
# Seconds between "still building" lines while `go build` is quiet.
HEARTBEAT_SECONDS = 30.0
# Upper bound for one go command (the cold Kubernetes build on 2 cores is the long one).
GO_BUILD_TIMEOUT = 3 * 3600
VERSION_CHECK_TIMEOUT = 120
_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.+-]+)?$")


class BuildError(RuntimeError):
    """A tool could not be resolved, built or run; the message says which tool and why."""


@dataclasses.dataclass(frozen=True)
class Group:
    """Binaries from one Go module, built by one `go build` so shared packages compile once."""

    name: str
    module: str
    version: str
    packages: Mapping[str, str]  # tool -> main package import path
    version_args: Mapping[str, tuple[str, ...]]  # tool -> arguments that print its version
    expect: str  # text every version output must contain
    tags: tuple[str, ...] = ()
    # A `package main` of our own, written into the wrapper module (its packages then name
    # the wrapper module itself), and the word that tells its build apart in the cache.
    main_go: str | None = None
    variant: str = ""

    @property
    def wrapper(self) -> str:
        """Import path of the generated wrapper module."""
        return f"memorystore.local/k8s-tools/{self.name}"

    @property
    def key(self) -> str:
        """The cache key's version part: the pin, plus the variant of a build of our own."""
        return f"{self.version}-{self.variant}" if self.variant else self.version


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What `build_tools` did for one tool, for the CLI's timing table."""

    tool: str
    version: str
    path: Path
    status: str  # "cached" or "built"
    seconds: float
    size: int


def _k8s_cmd(tool: str) -> str:
    """Import path of a k8s.io/kubernetes command."""
    return f"k8s.io/kubernetes/cmd/{tool}"


# The CoreDNS plugins the real node's Corefile uses, in plugin.cfg's order (which is the order
# they run in). The upstream main links all ~60 plugins and their cloud SDKs (1403 packages,
# the longest build of the harness); this one links these six (797 packages).
COREDNS_PLUGINS = ("bind", "ready", "health", "errors", "cache", "kubernetes")


def coredns_main(plugins: Sequence[str]) -> str:
    """A CoreDNS `package main` with only `plugins` compiled in (CoreDNS's documented way to
    choose plugins at build time: import them and set dnsserver.Directives)."""
    imports = "".join(f'\t_ "github.com/coredns/coredns/plugin/{p}"\n' for p in plugins)
    names = ", ".join(f'"{p}"' for p in plugins)
    return (
        "package main\n\nimport (\n"
        '\t"github.com/coredns/coredns/core/dnsserver"\n'
        '\t"github.com/coredns/coredns/coremain"\n'
        f"{imports})\n\n"
        f"func init() {{ dnsserver.Directives = []string{{{names}}} }}\n\n"
        "func main() { coremain.Run() }\n"
    )


GROUPS: tuple[Group, ...] = (
    Group(
        name="kubernetes",
        module="k8s.io/kubernetes",
        version=versions.KUBERNETES,
        packages={
            t: _k8s_cmd(t)
            for t in (
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubectl",
                "kubelet",
                "kube-proxy",
            )
        },
        version_args={
            "kube-apiserver": ("--version",),
            "kube-controller-manager": ("--version",),
            "kube-scheduler": ("--version",),
            "kubectl": ("version", "--client"),
            "kubelet": ("--version",),
            "kube-proxy": ("--version",),
        },
        expect=versions.KUBERNETES,
        # The tags hack/lib/golang.sh uses for release builds.
        tags=("selinux", "notest", "grpcnotrace"),
    ),
    Group(
        name="etcd",
        module="go.etcd.io/etcd/server/v3",
        version=versions.ETCD,
        packages={"etcd": "go.etcd.io/etcd/server/v3"},
        version_args={"etcd": ("--version",)},
        expect=f"etcd Version: {versions.ETCD.removeprefix('v')}",
    ),
    Group(
        name="kwok",
        module="sigs.k8s.io/kwok",
        version=versions.KWOK,
        packages={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
        version_args={"kwok": ("--version",)},
        expect=versions.KWOK.removeprefix("v"),
    ),
    Group(
        name="helm",
        module="helm.sh/helm/v3",
        version=versions.HELM,
        packages={"helm": "helm.sh/helm/v3/cmd/helm"},
        version_args={"helm": ("version", "--short")},
        expect=versions.HELM,
    ),
    Group(
        # The real node's cluster DNS (node/), with only the plugins its Corefile uses.
        name="coredns",
        module="github.com/coredns/coredns",
        version=versions.COREDNS,
        packages={"coredns": "memorystore.local/k8s-tools/coredns"},
        version_args={"coredns": ("-version",)},
        expect=f"CoreDNS-{versions.COREDNS.removeprefix('v')}",
        main_go=coredns_main(COREDNS_PLUGINS),
        variant="plugins-" + "-".join(COREDNS_PLUGINS),
    ),
    Group(
        # The real test node's NetworkPolicy enforcer (netpol.py). It has no version flag (nor
        # a stamped version); `--help` proves the binary runs.
        name="kube-network-policies",
        module="sigs.k8s.io/kube-network-policies",
        version=versions.KUBE_NETWORK_POLICIES,
        packages={"kube-network-policies": "sigs.k8s.io/kube-network-policies/cmd"},
        version_args={"kube-network-policies": ("--help",)},
        expect="Usage: kube-network-policies",
    ),
)
TOOLS: tuple[str, ...] = tuple(t for g in GROUPS for t in g.packages)


def group_of(tool: str) -> Group:
    """The group that builds `tool`; a clear error names the tools there are."""
    for group in GROUPS:
        if tool in group.packages:
            return group
    raise ValueError(f"unknown tool {tool!r}; known tools: {', '.join(TOOLS)}")


# --- cache layout -------------------------------------------------------------------------


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/memorystore/k8s-tools` (a relative XDG path is ignored)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        base = Path(xdg)
    else:
        base = (Path(env["HOME"]) if env.get("HOME") else Path.home()) / ".cache"
    return base / "memorystore" / "k8s-tools"


def tool_dir(tool: str, version: str, root: Path) -> Path:
    """The finished folder of one tool at one version; it exists only once complete."""
    return root / f"{tool}-{version}"


def tool_path(tool: str, version: str, root: Path) -> Path:
    """The cached binary of one tool at one version."""
    return tool_dir(tool, version, root) / tool


def is_cached(path: Path) -> bool:
    """A cached binary is a non-empty executable file in its finished folder."""
    return path.is_file() and path.stat().st_size > 0 and os.access(path, os.X_OK)


def install_atomically(binary: Path, tool: str, final_dir: Path) -> Path:
    """Move a checked binary into `final_dir` with one rename, so readers never see half a tool.

    The binary is first put alone in a staging folder beside `final_dir` (same file system),
    then that folder is renamed to `final_dir`. An existing incomplete `final_dir` is removed.
    """
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".stage-{final_dir.name}-", dir=final_dir.parent))
    try:
        staged = stage / tool
        shutil.move(str(binary), staged)
        staged.chmod(0o755)
        stage.chmod(0o755)  # mkdtemp makes 0700
        if final_dir.exists():
            shutil.rmtree(final_dir)
        os.rename(stage, final_dir)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return final_dir / tool


# --- go.mod generation (pure) -------------------------------------------------------------


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


# --- ldflags (pure) -----------------------------------------------------------------------


def kubernetes_ldflags(version: str, build_date: str) -> list[str]:
    """The -X flags of hack/lib/version.sh, so `kubectl version` and /version report the pin."""
    major, minor, _ = parse_semver(version)
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for key, value in (
            ("gitVersion", version),
            ("gitMajor", str(major)),
            ("gitMinor", str(minor)),
            ("gitCommit", ""),  # the module proxy does not say which commit; leave it blank
            ("gitTreeState", "archive"),  # what version.sh says for a source archive
            ("buildDate", build_date),
        ):
            flags.append(f"-X {pkg}.{key}={value}")
    return flags


def helm_ldflags(module: str, version: str, client_go_version: str) -> list[str]:
    """Helm's Makefile flags: its version, and the Kubernetes minor of the client-go it uses."""
    cg_major, cg_minor, _ = parse_semver(client_go_version)
    flags = ["-s", "-w", f"-X {module}/internal/version.version={version}"]
    for pkg in ("pkg/lint/rules", "pkg/chartutil"):
        flags.append(f"-X {module}/{pkg}.k8sVersionMajor={cg_major + 1}")
        flags.append(f"-X {module}/{pkg}.k8sVersionMinor={cg_minor}")
    return flags


def build_date(info_time: str | None) -> str:
    """The module's publication time in version.sh's format (reproducible, unlike `now`)."""
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", info_time or "")
    return f"{match.group(1)}Z" if match else "1970-01-01T00:00:00Z"


# --- running go ---------------------------------------------------------------------------


def find_go(env: Mapping[str, str] | None = None) -> str:
    """MEMORYSTORE_GO, else the machine's /usr/local/go, else `go` on PATH."""
    env = os.environ if env is None else env
    for candidate in (env.get("MEMORYSTORE_GO"), DEFAULT_GO, shutil.which("go")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise BuildError("no Go toolchain: install Go or set MEMORYSTORE_GO to the go binary")


def go_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for every go command: local toolchain, static binaries, go.mod may update."""
    env = dict(os.environ if base is None else base)
    env["GOTOOLCHAIN"] = "local"  # never download another Go
    env["CGO_ENABLED"] = "0"  # static, like the upstream release builds
    env["GOWORK"] = "off"  # an outer go.work must not pull the wrapper in
    flags = env.get("GOFLAGS", "").split()
    if not any(f.startswith("-mod=") for f in flags):
        flags.append("-mod=mod")
    env["GOFLAGS"] = " ".join(flags)
    return env


def _run(cmd: Sequence[str], cwd: Path | None, what: str, timeout: float = 600) -> str:
    """Run a short go command; its stderr is the error message when it fails."""
    proc = subprocess.run(
        list(cmd),
        cwd=cwd,
        env=go_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise BuildError(f"{what} failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
    return proc.stdout


def _run_streaming(cmd: Sequence[str], cwd: Path, what: str, total: int, log: Log) -> None:
    """Run `go build -v`, printing a progress line every HEARTBEAT_SECONDS; kill it if aborted."""
    start = time.monotonic()
    tail: collections.deque[str] = collections.deque(maxlen=60)
    count = [0]

    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=go_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so an abort can end the compilers too
    )

    def pump() -> None:
        """Count compiled packages (go build -v prints one per line) and keep the tail."""
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip())
            count[0] += 1

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        while True:
            try:
                proc.wait(timeout=HEARTBEAT_SECONDS)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - start
                if elapsed > GO_BUILD_TIMEOUT:
                    raise BuildError(f"{what} took over {GO_BUILD_TIMEOUT} s") from None
                log(
                    f"  … {what}: {count[0]} of ≤{total} packages compiled, "
                    f"{elapsed:.0f} s so far (last: {tail[-1] if tail else '-'})"
                )
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        reader.join(timeout=5)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Serialize builders of one group and version (a second test run waits, not rebuilds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_runs(tool: str, path: Path, group: Group) -> str:
    """Run the binary's version command; fail clearly unless it prints the pinned version."""
    cmd = [str(path), *group.version_args[tool]]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=VERSION_CHECK_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"{tool} {group.version} was built but does not run: {exc}") from exc
    out = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or group.expect not in out:
        raise BuildError(
            f"{tool} {group.version} was built but `{' '.join(cmd)}` exited {proc.returncode} "
            f"without {group.expect!r} in its output:\n{out}"
        )
    return next((line for line in out.splitlines() if group.expect in line), out)


def _ldflags(group: Group, go: str, workdir: Path, info_time: str | None) -> list[str]:
    """The -ldflags of one group (version stamping, stripped symbols)."""
    if group.name == "kubernetes":
        return kubernetes_ldflags(group.version, build_date(info_time))
    if group.name == "helm":
        client_go = _run(
            [go, "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go"],
            workdir,
            "finding helm's client-go version",
        ).strip()
        return helm_ldflags(group.module, group.version, client_go)
    return ["-s", "-w"]


def _build_group(group: Group, tools: Sequence[str], root: Path, log: Log) -> dict[str, Path]:
    """Build the missing `tools` of one group in a temp module and install them atomically."""
    go = find_go()
    step = time.monotonic()

    def done(what: str) -> None:
        """Log one finished step with its duration."""
        nonlocal step
        now = time.monotonic()
        log(f"  {what} ({now - step:.1f} s)")
        step = now

    gover = _run([go, "version"], None, "go version").strip()
    raw = subprocess.run(
        [go, "mod", "download", "-json", f"{group.module}@{group.version}"],
        env=go_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        info = json.loads(raw.stdout)
    except json.JSONDecodeError:
        info = {"Error": raw.stderr.strip() or raw.stdout.strip()}
    if raw.returncode != 0 or info.get("Error"):
        raise BuildError(
            f"{group.module}@{group.version} could not be downloaded from the Go module proxy: "
            f"{info.get('Error') or raw.stderr.strip()}"
        )
    info_time = json.loads(Path(info["Info"]).read_text()).get("Time")
    done(f"downloaded {group.module}@{group.version} with {gover}")

    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f".work-{group.name}-{group.version}-", dir=root))
    try:
        go_mod = wrapper_go_mod(group, Path(info["GoMod"]).read_text(), tools)
        (workdir / "go.mod").write_text(go_mod)
        if group.main_go:
            (workdir / "main.go").write_text(group.main_go)
        _run([go, "mod", "tidy"], workdir, f"go mod tidy for {group.name}")
        done("generated the wrapper module and ran go mod tidy")

        packages = [group.packages[t] for t in tools]
        tags = ["-tags", ",".join(group.tags)] if group.tags else []
        deps = _run([go, "list", *tags, "-deps", *packages], workdir, "go list -deps")
        total = len(deps.split())
        ldflags = _ldflags(group, go, workdir, info_time)
        out = workdir / "bin"
        out.mkdir()
        # One package: name the file (etcd's package path ends in /v3); several: a folder.
        target = str(out / tools[0]) if len(tools) == 1 else f"{out}/"
        cmd = [go, "build", "-v", "-p", "2", "-trimpath", *tags]
        cmd += ["-ldflags", " ".join(ldflags), "-o", target, *packages]
        _run_streaming(cmd, workdir, f"go build of {', '.join(tools)}", total, log)
        done(f"go build of {', '.join(tools)} {group.version} ({total} packages)")

        paths = {}
        for tool in tools:
            built = out / tool
            if not is_cached(built):
                raise BuildError(f"go build finished but produced no {built}")
            line = check_runs(tool, built, group)
            size = built.stat().st_size
            paths[tool] = install_atomically(built, tool, tool_dir(tool, group.key, root))
            log(f"  {tool} {group.version}: runs ({line.strip()}), {size / 1e6:.1f} MB")
        return paths
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def remove_leftovers(group: Group, root: Path) -> list[Path]:
    """Delete temp folders of a killed build of this group (call only while holding its lock)."""
    patterns = [f".work-{group.name}-{group.version}-*"]
    patterns += [f".stage-{tool_dir(t, group.key, root).name}-*" for t in group.packages]
    leftovers = [p for pattern in patterns for p in root.glob(pattern) if p.is_dir()]
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
    return leftovers


def build_tools(
    tools: Sequence[str] | None = None, log: Log = print, root: Path | None = None
) -> list[ToolResult]:
    """Ensure each requested tool is cached, building what is missing; one result per tool."""
    wanted = list(dict.fromkeys(TOOLS if tools is None else tools))
    for tool in wanted:
        group_of(tool)  # refuse unknown names before any work
    root = cache_root() if root is None else root
    start = time.monotonic()

    def say(message: str) -> None:
        """Prefix each line with the seconds since the start."""
        log(f"[{time.monotonic() - start:7.1f}s] {message}")

    results: list[ToolResult] = []
    for group in GROUPS:
        mine = [t for t in wanted if t in group.packages]
        if not mine:
            continue
        t0 = time.monotonic()
        missing = [t for t in mine if not is_cached(tool_path(t, group.key, root))]
        built: dict[str, Path] = {}
        if missing:
            with file_lock(root / f".lock-{group.name}-{group.version}"):
                # Another process may have finished the build while this one waited.
                missing = [t for t in missing if not is_cached(tool_path(t, group.key, root))]
                if missing:
                    for path in remove_leftovers(group, root):
                        say(f"removed {path.name}, left by an interrupted build")
                    say(
                        f"building {', '.join(missing)} {group.version} … "
                        "(this takes minutes the first time)"
                    )
                    built = _build_group(group, missing, root, say)
        seconds = time.monotonic() - t0
        for tool in mine:
            path = tool_path(tool, group.key, root)
            size = path.stat().st_size
            status = "built" if tool in built else "cached"
            say(f"{tool} {group.version}: {status}, {size / 1e6:.1f} MB, {path}")
            results.append(ToolResult(tool, group.version, path, status, seconds, size))
    return results


# kwok's "fast" simulation (kwok v0.8 has no built-in stages): nodes become Ready and keep
# a lease, pods become Ready, complete and are deleted — the stages kwokctl uses by default.
KWOK_STAGE_DIRS = ("node/fast", "node/heartbeat-with-lease", "pod/fast")


def kwok_stages(root: Path | None = None) -> Path:
    """The Stage config of the pinned kwok, taken from its own Go module and cached."""
    root = cache_root() if root is None else root
    target = root / f"kwok-stages-{versions.KWOK}.yaml"
    if target.is_file() and target.stat().st_size > 0:
        return target
    info = json.loads(
        _run(
            [find_go(), "mod", "download", "-json", f"sigs.k8s.io/kwok@{versions.KWOK}"],
            None,
            "downloading the kwok module",
        )
    )
    stage_root = Path(info["Dir"]) / "kustomize" / "stage"
    docs = [
        path.read_text()
        for rel in KWOK_STAGE_DIRS
        for path in sorted((stage_root / rel).glob("*.yaml"))
        if path.name != "kustomization.yaml"
    ]
    if not docs:
        raise BuildError(f"no kwok stages under {stage_root}")
    root.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text("\n---\n".join(doc.strip() for doc in docs) + "\n")
    os.replace(partial, target)
    return target


def ensure_tools(tools: list[str] | None = None, log: Log = print) -> dict[str, Path]:
    """Paths of the requested tools (all when None), building the missing ones first."""
    return {r.tool: r.path for r in build_tools(tools, log=log)}


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: build (or find cached) tools and print the time each took."""
    parser = argparse.ArgumentParser(
        prog="python -m memorystore_dev.devcluster.build",
        description="Build the pinned Kubernetes tool binaries into "
        "${XDG_CACHE_HOME:-~/.cache}/memorystore/k8s-tools.",
    )
    parser.add_argument("--tools", help=f"comma-separated subset of: {','.join(TOOLS)}")
    parser.add_argument(
        "--print-versions", action="store_true", help="print the pins and exit without building"
    )
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None

    if args.print_versions:
        for tool in tools or TOOLS:
            group = group_of(tool)
            print(f"{tool:<24} {group.version:<9} {group.module}")
        return 0

    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C: the go build is ended and temp
    # folders are removed instead of being left half-written.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    start = time.monotonic()
    try:
        results = build_tools(tools)
    except (BuildError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    total = time.monotonic() - start
    print(f"\n{'tool':<24} {'version':<9} {'status':<7} {'seconds':>8} {'MB':>7}")
    for r in results:
        print(f"{r.tool:<24} {r.version:<9} {r.status:<7} {r.seconds:8.2f} {r.size / 1e6:7.1f}")
    print(f"total {total:.2f} s (the tools of one module share one go build and its time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
