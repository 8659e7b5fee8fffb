"""Build the missing tools of each group once, check that they run, and install them.

Why: a tool is built from its pinned module in a temp wrapper module beside the cache, run once
to prove it prints the pinned version, and only then moved into the cache; a second process
that wanted the same group waits on its lock and then finds it cached.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from memorystore_dev.devcluster.tools.cache import (
    cache_root,
    file_lock,
    install_atomically,
    is_cached,
    remove_leftovers,
    tool_dir,
    tool_path,
)
from memorystore_dev.devcluster.tools.errors import BuildError
from memorystore_dev.devcluster.tools.gomod import wrapper_go_mod
from memorystore_dev.devcluster.tools.groups import GROUPS, TOOLS, Group, group_of
from memorystore_dev.devcluster.tools.ldflags import build_date, helm_ldflags, kubernetes_ldflags
from memorystore_dev.devcluster.tools.toolchain import Log, _run, _run_streaming, find_go, go_env

__all__ = ["ToolResult", "all_cached", "build_tools", "check_runs", "ensure_tools"]

VERSION_CHECK_TIMEOUT = 120


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What `build_tools` did for one tool, for the CLI's timing table."""

    tool: str
    version: str
    path: Path
    status: str  # "cached" or "built"
    seconds: float
    size: int


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
    if group.name == "actionlint":  # its release build's stamp (`actionlint -version`)
        return ["-s", "-w", f"-X {group.module}.version={group.version.removeprefix('v')}"]
    if group.name == "prometheus":  # `promtool --version` says the module pin
        return ["-s", "-w", f"-X github.com/prometheus/common/version.Version={group.version}"]
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
        missing = [t for t in mine if not _cached(t, root)]
        built: dict[str, Path] = {}
        if missing:
            with file_lock(root / f".lock-{group.name}-{group.version}"):
                # Another process may have finished the build while this one waited.
                missing = [t for t in missing if not _cached(t, root)]
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


def ensure_tools(tools: list[str] | None = None, log: Log = print) -> dict[str, Path]:
    """Paths of the requested tools (all when None), building the missing ones first."""
    return {r.tool: r.path for r in build_tools(tools, log=log)}


def all_cached(tools: Sequence[str] | None = None, root: Path | None = None) -> bool:
    """Whether every requested tool (all when None) is already cached: nothing to build."""
    root = cache_root() if root is None else root
    return all(_cached(t, root) for t in (TOOLS if tools is None else tools))


def _cached(tool: str, root: Path) -> bool:
    return is_cached(tool_path(tool, group_of(tool).key, root))
