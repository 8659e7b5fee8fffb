"""Host-level changes of the real node, each recorded before it is made so it can be undone.

Why a journal: the node changes the machine (a bridge, a blackhole route, iptables chains,
sysctls, mounts, cgroups, network namespaces). Its processes die with the harness, but these
changes would survive a SIGKILL. So every change is first written to a journal file under
/run; `teardown` undoes what the journal says, and the next start undoes the leftovers of a
killed run before it begins. One real node runs per machine at a time (a host-wide flock),
because kube-proxy's iptables chains have fixed names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

Log = Callable[[str], None]

LOCK_PATH = Path("/run/memorystore-real-node.lock")
JOURNAL_PATH = Path("/run/memorystore-real-node.json")
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


# --- the journal --------------------------------------------------------------------------


@dataclasses.dataclass
class Journal:
    """Everything the node changed on this machine, enough to undo it after a SIGKILL."""

    pid: int
    workdir: str
    bridge: str
    pod_cidr: str
    service_cidr: str
    cgroup_root: str  # the kubelet's cgroupRoot, e.g. /memorystore-real-node
    containerd_socket: str = ""
    kube_proxy: str = ""  # the kube-proxy binary, for `kube-proxy --cleanup`
    kube_proxy_config: str = ""
    sysctls: dict[str, str] = dataclasses.field(default_factory=dict)
    routes: list[str] = dataclasses.field(default_factory=list)  # `ip route` specs we added
    chains: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # fam:table -> names
    netns_before: list[str] = dataclasses.field(default_factory=list)
    nft_tables_before: list[str] = dataclasses.field(default_factory=list)
    paths_before: list[str] = dataclasses.field(default_factory=list)
    shim_sockets_before: list[str] = dataclasses.field(default_factory=list)
    cni_network: str = ""
    created_bridge: bool = False

    def save(self) -> None:
        """Write atomically, before the change it describes is made."""
        partial = JOURNAL_PATH.with_suffix(".tmp")
        partial.write_text(json.dumps(dataclasses.asdict(self), indent=1))
        os.replace(partial, JOURNAL_PATH)

    @classmethod
    def load(cls) -> Journal | None:
        """The journal of a run that did not finish its teardown, if any."""
        try:
            data = json.loads(JOURNAL_PATH.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            # An unreadable journal is useless; say so rather than guess.
            return None
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    @staticmethod
    def remove() -> None:
        """Forget the journal once everything in it is undone."""
        with contextlib.suppress(FileNotFoundError):
            JOURNAL_PATH.unlink()


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


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a live (non-zombie) process."""
    return Path(f"/proc/{pid}").exists() and not _zombie(pid)


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


BUILTIN_CHAINS = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}


def nft_tables() -> list[str]:
    """`family name` of every nftables table (iptables-nft keeps its tables there)."""
    if not shutil.which("nft"):
        return []
    out = run(["nft", "list", "tables"], check=False)
    return sorted(line.removeprefix("table ").strip() for line in out.splitlines() if line)


def remove_empty_new_tables(before: Sequence[str]) -> list[str]:
    """Delete the iptables-nft tables that appeared during the run and hold no rule now.

    iptables-nft creates a table (e.g. `ip nat`) on first use and never deletes it; an empty
    one with default policies changes nothing, but the host should look exactly as before.
    """
    errors = []
    for table in nft_tables():
        if table in before:
            continue
        family, _, name = table.partition(" ")
        if family not in ("ip", "ip6") or name not in IPTABLES_TABLES:
            continue
        save = "iptables-save" if family == "ip" else "ip6tables-save"
        lines = run([save, "-t", name], check=False).splitlines()
        chains = [line[1:].split() for line in lines if line.startswith(":")]
        empty = not any(line.startswith("-A ") for line in lines) and all(
            c[0] in BUILTIN_CHAINS and c[1] == "ACCEPT" for c in chains
        )
        if not empty:
            errors.append(f"nftables table {table} appeared during the run and holds rules")
            continue
        run(["nft", "delete", "table", family, name], check=False)
    return errors


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


# --- undoing ------------------------------------------------------------------------------


def pids_in_cgroups(root_name: str) -> list[int]:
    """PIDs in any cgroup under `root_name` in any v1 controller (the node's pods)."""
    pids: set[int] = set()
    for controller in CGROUP_ROOT.iterdir():
        base = controller / root_name.strip("/")
        if not base.is_dir():
            continue
        for procs in base.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(x) for x in procs.read_text().split())
    return sorted(pids)


def pids_with_arg(needle: str) -> list[int]:
    """PIDs whose command line contains `needle` (a path unique to this node), not ours."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle.encode() in cmdline:
            found.append(int(entry.name))
    return found


def kill_pids(pids: Sequence[int]) -> None:
    """SIGKILL each PID; gone ones are fine."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def wait_gone(pids: Sequence[int], timeout: float = 10) -> list[int]:
    """The PIDs still alive after `timeout` s."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and not _zombie(p)]
        if alive:
            time.sleep(0.1)
    return alive


def _zombie(pid: int) -> bool:
    """A zombie holds no resources; its parent reaps it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def unmount_under(prefixes: Sequence[str]) -> list[str]:
    """Unmount every mount at or below `prefixes`, deepest (newest) first; errors returned."""
    errors = []
    norm = [p.rstrip("/") for p in prefixes if p]
    for _ in range(3):  # a stacked mount can hide another one below it
        points = [
            m for m in reversed(mounts()) if any(m == p or m.startswith(p + "/") for p in norm)
        ]
        if not points:
            return []
        for point in points:
            proc = subprocess.run(["umount", point], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                lazy = subprocess.run(
                    ["umount", "-l", point], capture_output=True, text=True, check=False
                )
                if lazy.returncode != 0:
                    errors.append(f"umount {point}: {lazy.stderr.strip()}")
    left = [m for m in mounts() if any(m == p or m.startswith(p + "/") for p in norm)]
    return errors + [f"still mounted: {m}" for m in left]


def make_cgroups(root_name: str) -> None:
    """Create `root_name` in every cgroup v1 hierarchy (cpuset inherits its parent's CPUs)."""
    for controller in sorted(CGROUP_ROOT.iterdir()):
        if not controller.is_dir() or controller.name == "unified":
            continue
        if not (controller / "cgroup.procs").exists():
            continue
        base = controller / root_name.strip("/")
        base.mkdir(exist_ok=True)
        if controller.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if not (base / knob).read_text().strip():
                    (base / knob).write_text((controller / knob).read_text())


def remove_cgroups(root_name: str) -> list[str]:
    """rmdir the node's cgroup tree in every controller, leaves first; errors returned."""
    errors = []
    for controller in CGROUP_ROOT.iterdir():
        base = controller / root_name.strip("/")
        if not base.is_dir():
            continue
        dirs = sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for path in [*dirs, base]:
            for attempt in range(20):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if attempt == 19:
                        errors.append(f"rmdir {path}: {exc}")
                    time.sleep(0.1)
    return errors


def remove_chains(family: int, table: str, names: Sequence[str]) -> None:
    """Delete chains and every rule that jumps to them, in one iptables-restore transaction."""
    if not names:
        return
    save = "iptables-save" if family == 4 else "ip6tables-save"
    restore = "iptables-restore" if family == 4 else "ip6tables-restore"
    current = run([save, "-t", table], check=False)
    present = {line[1:].split()[0] for line in current.splitlines() if line[:1] == ":"}
    doomed = [n for n in names if n in present]
    if not doomed:
        return
    script = [f"*{table}"]
    for line in current.splitlines():
        if not line.startswith("-A "):
            continue
        chain = line.split()[1]
        target = re.search(r" -[jg] (\S+)", line)
        if chain not in doomed and target and target.group(1) in doomed:
            script.append("-D " + line[3:])
    script += [f"-F {n}" for n in doomed] + [f"-X {n}" for n in doomed] + ["COMMIT", ""]
    proc = subprocess.run(
        [restore, "--noflush"], input="\n".join(script), capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        raise HostError(f"{restore} could not remove {table} chains {doomed}: {proc.stderr}")


def teardown(journal: Journal, log: Log) -> list[str]:
    """Undo everything `journal` records, in reverse order of making; best effort throughout.

    Returns the problems met (empty when the host is as it was). Callers stop the node's own
    processes (kubelet, containerd, …) first; this also kills whatever is left of them.
    """
    problems: list[str] = []

    def attempt(what: str, action: Callable[[], object]) -> None:
        """Run one undo step; record instead of raising so the next steps still run."""
        try:
            result = action()
            if isinstance(result, list) and result:
                problems.extend(f"{what}: {r}" for r in result)
        except Exception as exc:  # every step must get its chance
            problems.append(f"{what}: {exc}")

    workdir = journal.workdir.rstrip("/")
    # 1. Processes: the pods (by the node's own cgroups), the containerd shims (by the node's
    # own containerd socket on their command line), anything else run from the node's folder.
    for _ in range(3):
        pods = pids_in_cgroups(journal.cgroup_root)
        shims = pids_with_arg(journal.containerd_socket) if journal.containerd_socket else []
        rest = pids_with_arg(workdir + "/node/") if workdir else []
        doomed = sorted(set(pods + shims + rest))
        if not doomed:
            break
        kill_pids(doomed)
        left = wait_gone(doomed)
        if left:
            problems.append(f"processes still alive after SIGKILL: {left}")
    # 2. Network namespaces containerd made (named cni-*), then every mount of the node.
    new_netns = [n for n in netns_names() if n not in journal.netns_before and n.startswith("cni-")]
    for name in new_netns:
        attempt(f"netns {name}", lambda name=name: unmount_under([str(NETNS_DIR / name)]))
        with contextlib.suppress(OSError):
            (NETNS_DIR / name).unlink()
    if workdir:
        attempt("mounts", lambda: unmount_under([workdir]))
    # 3. cgroups of the pods and of the kubelet's QoS tree.
    attempt("cgroups", lambda: remove_cgroups(journal.cgroup_root))
    # 4. iptables: kube-proxy's own cleanup, then any KUBE-*/CNI-*/harness chain not there before.
    if journal.kube_proxy and Path(journal.kube_proxy).exists():
        argv = [journal.kube_proxy, "--cleanup"]
        if journal.kube_proxy_config and Path(journal.kube_proxy_config).exists():
            argv.append(f"--config={journal.kube_proxy_config}")
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            log(f"kube-proxy --cleanup exited {proc.returncode} (continuing): {proc.stderr[-500:]}")
    for family in (4, 6):
        now = iptables_chains(family)
        for table, names in now.items():
            before = set(journal.chains.get(f"{family}:{table}", []))
            # kube-proxy's, the CNI plugins', and the node's and its addons' (MEMORYSTORE-NODE*)
            # that appeared during the run; the node's own guards in any case.
            ours = [
                n
                for n in names
                if (n not in before and n.startswith(("KUBE-", "CNI-", "MEMORYSTORE-NODE")))
                or n in GUARD_CHAINS
            ]
            attempt(
                f"iptables -{family} -t {table}",
                lambda family=family, table=table, ours=ours: remove_chains(family, table, ours),
            )
    attempt("nftables tables", lambda: remove_empty_new_tables(journal.nft_tables_before))
    # 5. Links: the pods' veths left on the bridge, then the bridge.
    if journal.created_bridge and journal.bridge in link_names():
        for veth in links_of(journal.bridge):
            attempt(f"link {veth}", lambda veth=veth: run(["ip", "link", "del", veth]))
        attempt(f"bridge {journal.bridge}", lambda: run(["ip", "link", "del", journal.bridge]))
    # 6. Routes the harness added.
    for spec in reversed(journal.routes):
        attempt(f"route {spec}", lambda spec=spec: _del_route(spec))
    # 7. Sysctls back to what they were.
    for name, value in journal.sysctls.items():
        if read_sysctl(name) not in (None, value):
            attempt(f"sysctl {name}", lambda name=name, value=value: write_sysctl(name, value))
    # 8. Files the kubelet or containerd made outside the workdir.
    attempt("host files", lambda: _remove_new_files(journal))
    return problems


def remove_workdir(workdir: str) -> None:
    """Delete a killed run's cluster folder, unless something is still mounted inside it."""
    folder = Path(workdir)
    if not workdir or not folder.is_dir() or not folder.name.startswith("memorystore-cluster-"):
        return
    if any(m == workdir or m.startswith(f"{workdir}/") for m in mounts()):
        raise HostError(f"{workdir} still has mounts; not deleting it")
    shutil.rmtree(folder, ignore_errors=True)


def _del_route(spec: str) -> None:
    """Delete a route we added, if it is still there."""
    listed = run(["ip", "route", "show", "type", *spec.split()[:1], "to", "exact", spec.split()[1]])
    if listed.strip():
        run(["ip", "route", "del", *spec.split()])


def _listening_unix_paths() -> set[str]:
    """Paths of unix sockets some live process has bound (/proc/net/unix)."""
    paths = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8:
            paths.add(fields[7])
    return paths


def _our_sandboxes(journal: Journal) -> set[str]:
    """Sandbox IDs in the CNI result cache of the node's network (`<network>-<id>-<if>`)."""
    prefix = f"{journal.cni_network}-"
    results = Path("/var/lib/cni/results")
    ids = set()
    if journal.cni_network and results.is_dir():
        ids |= {
            p.name[len(prefix) :].rsplit("-", 1)[0]
            for p in results.iterdir()
            if p.name.startswith(prefix)
        }
    # …and the sandboxes containerd kept in the node's own state folder.
    for kind in ("root", "state"):
        folder = Path(journal.workdir) / f"node/containerd/{kind}/io.containerd.grpc.v1.cri"
        if journal.workdir and (folder / "sandboxes").is_dir():
            ids |= {p.name for p in (folder / "sandboxes").iterdir()}
    return ids


def _ours(path: Path, journal: Journal, live: set[str], sandboxes: set[str]) -> bool:
    """A file the node left: a link into its workdir, its CNI cache (its network's, and the
    loopback results of its own sandboxes), a dead shim socket."""
    if path.is_symlink():
        with contextlib.suppress(OSError):
            return os.readlink(path).startswith(journal.workdir)
        return False
    if path.is_socket():
        return str(path) not in live and str(path) not in journal.shim_sockets_before
    if path.name.startswith("cni-loopback-"):
        return path.name.removeprefix("cni-loopback-").rsplit("-", 1)[0] in sandboxes
    return bool(journal.cni_network) and path.name.startswith(f"{journal.cni_network}-")


def _remove_new_files(journal: Journal) -> list[str]:
    """Remove the node's files from the watched host paths, and nothing of anyone else's.

    A watched path that appeared during the run is removed once only the node's files (and
    empty folders) were in it; anything else found there is reported, not deleted.
    """
    errors = []
    live = _listening_unix_paths()
    sandboxes = _our_sandboxes(journal)
    for path in existing_paths():
        root = Path(path)
        if root.is_dir() and not root.is_symlink():
            for item in sorted(root.rglob("*"), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    if item.is_dir() and not item.is_symlink():
                        if path not in journal.paths_before:
                            item.rmdir()  # only succeeds when empty
                    elif _ours(item, journal, live, sandboxes):
                        item.unlink()
        if path in journal.paths_before:
            continue
        try:
            if root.is_dir() and not root.is_symlink():
                root.rmdir()
            elif root.is_symlink() or root.is_file():
                errors.append(f"{path} appeared during the run")
        except OSError:
            errors.append(
                f"{path} appeared during the run and holds files not the node's: "
                f"{[str(p) for p in root.rglob('*')][:3]}"
            )
    return errors
