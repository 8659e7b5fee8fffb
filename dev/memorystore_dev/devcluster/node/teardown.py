"""Undo what the journal records, in reverse order of making: the host as it was before.

Why best effort throughout: a step that fails must not keep the next ones from running; the
problems are returned, so a caller can refuse to start over a host that still holds leftovers.
Only what is the node's is removed (its processes, mounts, chains, links, routes, files);
anything else found in a watched path is reported, not deleted.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from memorystore_dev.devcluster.node.cgroups import pids_in_cgroups, remove_cgroups
from memorystore_dev.devcluster.node.host import (
    GUARD_CHAINS,
    IPTABLES_TABLES,
    NETNS_DIR,
    HostError,
    Log,
    existing_paths,
    iptables_chains,
    link_names,
    links_of,
    mounts,
    netns_names,
    nft_tables,
    read_sysctl,
    run,
    write_sysctl,
)
from memorystore_dev.devcluster.node.journal import Journal
from memorystore_dev.devcluster.node.processes import kill_pids, pids_with_arg, wait_gone

__all__ = [
    "remove_chains",
    "remove_empty_new_tables",
    "remove_workdir",
    "teardown",
    "unmount_under",
]

BUILTIN_CHAINS = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}


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
