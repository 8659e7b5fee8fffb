"""A network lab for the enforcer's integration test: "pods" that are network namespaces on
a test bridge, each serving TCP 8080, TCP 8081 and UDP 8080, and probes between them.

Why network namespaces and not real pods: the enforcer sees only addresses and API objects,
so a namespace whose address a Pod object's status names stands in for a pod, and the lab
needs no container runtime. Sockets are made inside a namespace by a short-lived thread that
`setns`-es into it (a socket keeps the namespace it was made in), so one test process
serves and probes every "pod" without a subprocess per probe. Traffic stays on the bridge.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memorystore_dev.devcluster.node import host

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
SERVE = (("TCP", 8080), ("TCP", 8081), ("UDP", 8080))
REPLY = b"ok"


def run(*argv: str) -> str:
    return host.run(list(argv))


def in_netns(netns: str, make: Callable[[], Any]) -> Any:
    """Call `make` on a thread inside network namespace `netns` (by name) and return its result."""
    box: dict[str, Any] = {}

    def enter() -> None:
        fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into {netns}: {os.strerror(err)}")
            box["value"] = make()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            os.close(fd)

    thread = threading.Thread(target=enter, name=f"netns-{netns}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass
class Node:
    """One "pod": a network namespace with an address on the lab bridge and its servers."""

    netns: str
    ip: str
    sockets: list[socket.socket] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def serve(self) -> None:
        """Answer every TCP connection and UDP datagram on SERVE with REPLY, until closed."""
        for proto, port in SERVE:
            kind = socket.SOCK_STREAM if proto == "TCP" else socket.SOCK_DGRAM

            def listen(kind: int = kind, port: int = port) -> socket.socket:
                sock = socket.socket(socket.AF_INET, kind)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.ip, port))
                if kind == socket.SOCK_STREAM:
                    sock.listen(64)
                return sock

            sock = in_netns(self.netns, listen)
            self.sockets.append(sock)
            loop = _tcp_loop if proto == "TCP" else _udp_loop
            thread = threading.Thread(target=loop, args=(sock,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self.threads:
            thread.join(timeout=5)
        self.sockets.clear()
        self.threads.clear()


def _tcp_loop(sock: socket.socket) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn, contextlib.suppress(OSError):
            conn.sendall(REPLY)


def _udp_loop(sock: socket.socket) -> None:
    while True:
        try:
            _, peer = sock.recvfrom(64)
        except OSError:
            return
        if peer is None:  # shut down
            return
        with contextlib.suppress(OSError):
            sock.sendto(REPLY, peer)


class ProbeError(RuntimeError):
    """A probe met something that is neither an answer nor silence (e.g. a reset)."""


def probe(src: Node, dst: Node, proto: str, port: int, timeout: float = 2.0) -> bool:
    """True when `src` gets REPLY from `dst`; False when nothing comes back in `timeout` s.

    A refused connection (RST) is an error, not a verdict: the enforcer drops, it never
    rejects, and every lab node serves every probed port."""
    kind = socket.SOCK_STREAM if proto == "TCP" else socket.SOCK_DGRAM
    sock = in_netns(src.netns, lambda: socket.socket(socket.AF_INET, kind))
    with sock:
        sock.settimeout(timeout)
        try:
            if proto == "TCP":
                sock.connect((dst.ip, port))
                data = sock.recv(len(REPLY))
            else:
                data = _udp_exchange(sock, (dst.ip, port), timeout)
        except TimeoutError:
            return False
        except OSError as exc:
            raise ProbeError(f"{proto} {src.ip} → {dst.ip}:{port}: {exc}") from exc
    if data != REPLY:
        raise ProbeError(f"{proto} {src.ip} → {dst.ip}:{port}: unexpected reply {data!r}")
    return True


def _udp_exchange(sock: socket.socket, address: tuple[str, int], timeout: float) -> bytes:
    """One datagram, sent again once halfway through `timeout` when nothing came back.

    TCP retransmits its SYN by itself within a probe's timeout; a lone UDP datagram lost
    on a busy machine would read as "denied". Two sends give UDP the same second chance; a
    dropped flow still drops both (same source port, same verdict)."""
    sock.settimeout(timeout / 2)
    sock.sendto(b"ping", address)
    try:
        return sock.recvfrom(64)[0]
    except TimeoutError:
        sock.sendto(b"ping", address)  # the second chance; a second timeout is the verdict
        return sock.recvfrom(64)[0]


def probe_all(pairs: Sequence[tuple[Node, Node, str, int]], timeout: float = 2.0) -> list[bool]:
    """The probes of `pairs` at once (a refused one costs `timeout`, so never one by one)."""
    with ThreadPoolExecutor(max_workers=max(1, len(pairs))) as pool:
        return list(pool.map(lambda p: probe(*p, timeout=timeout), pairs))


class Lab:
    """A bridge (no address: nothing of the host joins it) and one namespace per node."""

    def __init__(self, prefix: str, subnet: str, addresses: Sequence[int]) -> None:
        self.prefix = prefix  # short: interface names have 15 characters
        self.bridge = f"{prefix}br"
        self.subnet = subnet
        self.nodes = {last: Node(f"{prefix}-{last}", f"{subnet}.{last}") for last in addresses}
        self.bridge_sysctl: str | None = None

    def up(self) -> None:
        name = "net.bridge.bridge-nf-call-iptables"
        self.bridge_sysctl = host.read_sysctl(name)
        host.write_sysctl(name, "1")  # bridged frames traverse iptables (restored in down)
        run("ip", "link", "add", self.bridge, "type", "bridge")
        # IPv4 only: no link-local addresses and routes appearing a moment later on the host
        host.write_sysctl(f"net.ipv6.conf.{self.bridge}.disable_ipv6", "1")
        run("ip", "link", "set", self.bridge, "up")
        for last, node in self.nodes.items():
            veth = f"{self.prefix}{last}h"
            run("ip", "netns", "add", node.netns)
            peer = ["peer", "name", "eth0", "netns", node.netns]  # never an eth0 on the host
            run("ip", "link", "add", veth, "type", "veth", *peer)
            host.write_sysctl(f"net.ipv6.conf.{veth}.disable_ipv6", "1")
            run("ip", "link", "set", veth, "master", self.bridge, "up")
            run("ip", "-n", node.netns, "addr", "add", f"{node.ip}/24", "dev", "eth0")
            run("ip", "-n", node.netns, "link", "set", "eth0", "up")
            run("ip", "-n", node.netns, "link", "set", "lo", "up")
            node.serve()

    def down(self) -> list[str]:
        """Remove everything `up` made (also half of it); returns what could not be undone."""
        problems = []
        for last, node in self.nodes.items():
            node.close()
            for argv in (
                ["ip", "link", "del", f"{self.prefix}{last}h"],
                ["ip", "netns", "del", node.netns],
            ):
                proc = subprocess.run(argv, capture_output=True, text=True, check=False)
                gone = "Cannot find" in proc.stderr or "No such file" in proc.stderr
                if proc.returncode != 0 and not gone:
                    problems.append(f"{' '.join(argv)}: {proc.stderr.strip()}")
        if self.bridge in host.link_names():
            run("ip", "link", "del", self.bridge)
        if self.bridge_sysctl is not None:
            host.write_sysctl("net.bridge.bridge-nf-call-iptables", self.bridge_sysctl)
        return problems

    @contextlib.contextmanager
    def running(self) -> Iterator[Lab]:
        try:
            self.up()
            yield self
        finally:
            problems = self.down()
            assert not problems, problems


# --- the host before and after --------------------------------------------------------------


def _iptables_normalised() -> list[str]:
    """iptables-save of both families without counters, comments, and tables that hold
    nothing (iptables-nft creates a table on first use and never removes it)."""
    out = []
    for tool in ("iptables-save", "ip6tables-save"):
        table: list[str] = []
        for line in host.run([tool], check=False).splitlines():
            if line.startswith("#"):
                continue
            line = host._COUNTERS.sub("", line)
            if line.startswith("*"):
                table = [f"{tool} {line}"]
            elif line == "COMMIT":
                # empty: no rule, and only built-in chains (custom ones show policy "-")
                # all with policy ACCEPT
                empty = not any(t.startswith("-A") for t in table[1:]) and all(
                    t.split()[1] == "ACCEPT" for t in table[1:] if t.startswith(":")
                )
                if not empty:
                    out += table
            else:
                table.append(line)
    return out


def host_state() -> dict[str, Any]:
    """What the lab and the enforcer may touch on this machine."""
    nft = host.run(["nft", "list", "tables"], check=False) if _has("nft") else ""
    return {
        "iptables": _iptables_normalised(),
        "ipsets": sorted(host.run(["ipset", "list", "-n"], check=False).split()),
        "links": sorted(host.link_names()),
        "netns": host.netns_names(),
        "routes": sorted(host.run(["ip", "route", "show", "table", "all"]).splitlines()),
        # the upstream enforcer's own nftables table must never come into being here
        "nft_enforcer_table": [t for t in nft.splitlines() if "kube-network-policies" in t],
        "bridge_sysctl": host.read_sysctl("net.bridge.bridge-nf-call-iptables"),
        # the enforcer's credentials go over /run only inside its own mount namespace
        "host_run_secrets": Path("/run/secrets").exists(),
    }


def state_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changed between two `host_state`s: lists as (gone, new), other values as pairs."""
    out: dict[str, Any] = {}
    for key in before:
        was, now = before[key], after.get(key)
        if was == now:
            continue
        if isinstance(was, list) and isinstance(now, list):
            out[key] = {"gone": sorted(set(was) - set(now)), "new": sorted(set(now) - set(was))}
        else:
            out[key] = (was, now)
    return out


def _has(command: str) -> bool:
    import shutil

    return shutil.which(command, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is not None
