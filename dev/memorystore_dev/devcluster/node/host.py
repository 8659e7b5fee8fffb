"""The host as the real node finds it: commands, sysctls, what is there, and the host lock.

Why: the node changes the machine (a bridge, a blackhole route, iptables chains, sysctls,
mounts, cgroups, network namespaces), so it reads what is there before it starts
(journal.py records it), undoes its changes from that record (teardown.py), and tests compare
`snapshot()` before and after. One real node runs per machine at a time (a host-wide flock),
because kube-proxy's iptables chains have fixed names.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import ipaddress
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CGROUP_ROOT",
    "GUARD_CHAINS",
    "IPTABLES_TABLES",
    "LOCK_FD_ENV",
    "LOCK_PATH",
    "NETNS_DIR",
    "SYSCTLS",
    "WATCHED_PATHS",
    "HostError",
    "Log",
    "cidr_conflicts",
    "existing_paths",
    "host_lock",
    "iptables_chains",
    "iptables_dump",
    "link_names",
    "links_of",
    "mounts",
    "netns_names",
    "nft_tables",
    "read_sysctl",
    "routes",
    "run",
    "shim_sockets",
    "snapshot",
    "sysctl_path",
    "write_sysctl",
]

Log = Callable[[str], None]

LOCK_PATH = Path("/run/memorystore-real-node.lock")
NETNS_DIR = Path("/run/netns")
CGROUP_ROOT = Path("/sys/fs/cgroup")

# What the kubelet (setupKernelTunables), kube-proxy and the CNI plugins may change, and what
# the harness itself sets: saved before the node starts, written back at teardown.
SYSCTLS: tuple[str, ...] = (
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.forwarding",
    "net.ipv4.conf.all.route_localnet",
    "net.ipv6.conf.all.forwarding",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
)
# Host paths a kubelet or containerd may create outside their configured folders.
WATCHED_PATHS: tuple[str, ...] = (
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/lib/containerd",
    "/run/containerd",
    "/run/netns",
    "/etc/cni",
    "/opt/cni",
    "/etc/kubernetes",
)
IPTABLES_TABLES = ("filter", "nat", "mangle", "raw")
GUARD_CHAINS = ("MEMORYSTORE-NODE-FWD", "MEMORYSTORE-NODE-OUT")  # the node's network guards
_COUNTERS = re.compile(r" \[\d+:\d+\]$")


class HostError(RuntimeError):
    """A host command failed; the message names the command and its output."""


def run(argv: Sequence[str], check: bool = True, timeout: float = 60) -> str:
    """Run a host command; a failure raises HostError with its stderr."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostError(f"`{' '.join(argv)}` could not run: {exc}") from exc
    if check and proc.returncode != 0:
        raise HostError(
            f"`{' '.join(argv)}` exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
        )
    return proc.stdout


# --- sysctls ------------------------------------------------------------------------------


def sysctl_path(name: str) -> Path:
    """/proc/sys path of a dotted sysctl name (interface names may hold no dots here)."""
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctl(name: str) -> str | None:
    """The value, or None where the kernel has no such setting."""
    try:
        return sysctl_path(name).read_text().strip()
    except OSError:
        return None


def write_sysctl(name: str, value: str) -> None:
    """Write one sysctl; HostError names it when the kernel refuses."""
    try:
        sysctl_path(name).write_text(f"{value}\n")
    except OSError as exc:
        raise HostError(f"cannot set sysctl {name}={value}: {exc}") from exc


# --- the host lock ------------------------------------------------------------------------

LOCK_FD_ENV = "MEMORYSTORE_REAL_NODE_LOCK_FD"
_held = 0  # how deep this process is inside host_lock


def _inherited_lock() -> bool:
    """Whether the parent passed its held lock down (fd number in LOCK_FD_ENV, same file)."""
    fd = os.environ.get(LOCK_FD_ENV, "")
    if not fd.isdigit():
        return False
    try:
        return os.fstat(int(fd)).st_ino == os.stat(LOCK_PATH).st_ino
    except OSError:
        return False


@contextlib.contextmanager
def host_lock(timeout: float = 600, log: Log = print) -> Iterator[int | None]:
    """Hold the machine-wide real-node lock; wait for another holder up to `timeout` s.

    Tests that change the host's network (bridges, iptables) take it too, so they never run
    beside a real node and compare each other's rules. Re-entrant within a process; a child
    started with LOCK_FD_ENV=<fd> (and that fd passed) runs under its parent's lock. Yields
    the lock's fd when this call took it, None when it was already held.
    """
    global _held
    if _held or _inherited_lock():
        _held += 1
        try:
            yield None
        finally:
            _held -= 1
        return
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    handle = LOCK_PATH.open("a+")
    try:
        deadline = time.monotonic() + timeout
        said = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                if time.monotonic() > deadline:
                    raise HostError(
                        f"another real node (pid {holder}) holds {LOCK_PATH} after {timeout:.0f} s"
                    ) from None
                if not said:
                    log(f"waiting for the real node of pid {holder} to stop ({LOCK_PATH})")
                    said = True
                time.sleep(1)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        _held = 1
        try:
            yield handle.fileno()
        finally:
            _held = 0
    finally:
        with contextlib.suppress(OSError):
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


# --- reading the host ---------------------------------------------------------------------


def routes() -> list[dict[str, Any]]:
    """All IPv4 routes of every table, as `ip -j` objects."""
    return list(json.loads(run(["ip", "-j", "-4", "route", "show", "table", "all"]) or "[]"))


def cidr_conflicts(cidrs: Sequence[str]) -> list[str]:
    """Routes or addresses of this machine that overlap any of `cidrs` (so are in use)."""
    nets = [ipaddress.ip_network(c) for c in cidrs]
    found = []
    for route in routes():
        dst = route.get("dst", "")
        if dst in ("default", "") or route.get("type") == "broadcast":
            continue
        try:
            net = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if any(net.overlaps(n) for n in nets) and not net.is_loopback:
            found.append(f"route {dst} ({route.get('type', 'unicast')} via {route.get('dev')})")
    return found


def link_names() -> list[str]:
    """Names of every network interface of the host namespace."""
    return [link["ifname"] for link in json.loads(run(["ip", "-j", "link", "show"]) or "[]")]


def links_of(master: str) -> list[str]:
    """Interfaces enslaved to `master` (the pods' host-side veths on the bridge)."""
    out = run(["ip", "-j", "link", "show", "master", master], check=False)
    try:
        return [link["ifname"] for link in json.loads(out or "[]")]
    except ValueError:
        return []


def iptables_chains(family: int) -> dict[str, list[str]]:
    """Chain names per table (`iptables-save` for 4, `ip6tables-save` for 6)."""
    tool = "iptables-save" if family == 4 else "ip6tables-save"
    chains: dict[str, list[str]] = {}
    for table in IPTABLES_TABLES:
        out = run([tool, "-t", table], check=False)
        chains[table] = [line[1:].split()[0] for line in out.splitlines() if line[:1] == ":"]
    return chains


def nft_tables() -> list[str]:
    """`family name` of every nftables table (iptables-nft keeps its tables there)."""
    if not shutil.which("nft"):
        return []
    out = run(["nft", "list", "tables"], check=False)
    return sorted(line.removeprefix("table ").strip() for line in out.splitlines() if line)


def iptables_dump() -> str:
    """Rules of both families without counters or timestamps: comparable before and after."""
    lines = []
    for tool in ("iptables-save", "ip6tables-save"):
        for line in run([tool], check=False).splitlines():
            if line.startswith("#"):
                continue
            lines.append(f"{tool}: " + _COUNTERS.sub("", line))
    return "\n".join(lines)


def mounts() -> list[str]:
    """Mount points of this mount namespace, in mount order."""
    points = []
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2:
            points.append(fields[1].encode().decode("unicode_escape"))
    return points


def netns_names() -> list[str]:
    """Named network namespaces (/run/netns)."""
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def existing_paths(paths: Sequence[str] = WATCHED_PATHS) -> list[str]:
    """Which of `paths` exist now."""
    return [p for p in paths if os.path.lexists(p)]


def shim_sockets() -> list[str]:
    """containerd 1.6 puts every shim socket in /run/containerd/s, whatever its config says."""
    folder = Path("/run/containerd/s")
    try:
        return sorted(str(p) for p in folder.iterdir())
    except FileNotFoundError:
        return []


def snapshot() -> dict[str, Any]:
    """What a real node may change on the host; equal before start and after stop."""
    return {
        "routes": sorted(
            line.strip()
            for fam in ("-4", "-6")
            for line in run(["ip", fam, "route", "show", "table", "all"]).splitlines()
            if line.strip()
        ),
        "links": sorted(link_names()),
        "addresses": sorted(
            re.sub(r"\s+valid_lft.*", "", line.split(" ", 1)[1])
            for line in run(["ip", "-o", "addr", "show"]).splitlines()
        ),
        "mounts": mounts(),
        "iptables": iptables_dump(),
        "sysctls": {name: read_sysctl(name) for name in SYSCTLS},
        "netns": netns_names(),
        "paths": existing_paths(),
        "cgroups": sorted(
            str(p.relative_to(CGROUP_ROOT))
            for c in CGROUP_ROOT.iterdir()
            if c.is_dir()
            for p in c.iterdir()
            if p.is_dir()
        ),
    }
