"""The node's network on the host: its bridge, the Service blackhole route, and the guards.

Why guards: pods may reach each other and the host, nothing else. The chains
MEMORYSTORE-NODE-FWD and MEMORYSTORE-NODE-OUT are jumped to first in mangle FORWARD and
POSTROUTING, which the kernel runs before filter, so no filter rule (kube-proxy's ACCEPTs, an
enforcer's NFQUEUE verdicts) can let a packet past them. Each change is journaled first.
"""

from __future__ import annotations

import subprocess

from memorystore_dev.devcluster.node import host
from memorystore_dev.devcluster.node.journal import Journal
from memorystore_dev.devcluster.node.settings import (
    BRIDGE,
    FWD_CHAIN,
    GATEWAY,
    OUT_CHAIN,
    POD_CIDR,
    SERVICE_CIDR,
)

__all__ = ["ensure_safety_first", "install_safety_chains", "make_network", "network_conflicts"]


def network_conflicts() -> list[str]:
    """What on this machine already uses the pod or Service CIDR, or the bridge's name."""
    conflicts = host.cidr_conflicts([POD_CIDR, SERVICE_CIDR])
    if BRIDGE in host.link_names():
        conflicts.append(f"link {BRIDGE} exists")
    return conflicts


def make_network(journal: Journal) -> None:
    """Record in `journal`, then make: the bridge with the gateway address, forwarding on it,
    the blackhole route for untranslated Service addresses, and the guard chains."""
    journal.created_bridge = True
    journal.routes = [f"blackhole {SERVICE_CIDR}"]
    journal.save()  # before the first change
    host.run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    host.write_sysctl(f"net.ipv6.conf.{BRIDGE}.disable_ipv6", "1")
    host.run(["ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE])
    host.run(["ip", "link", "set", BRIDGE, "up"])
    # Forwarding for packets that arrive on the bridge only (pod → Service → pod);
    # the machine's own interfaces keep net.ipv4.ip_forward as it was.
    host.write_sysctl(f"net.ipv4.conf.{BRIDGE}.forwarding", "1")
    host.run(["ip", "route", "add", "blackhole", SERVICE_CIDR])
    install_safety_chains()


def install_safety_chains() -> None:
    """The harness's guards (see the module docstring), each jumped to first in mangle."""
    fwd = [
        f"-A {FWD_CHAIN} -i {BRIDGE} -o {BRIDGE} -j RETURN",
        f"-A {FWD_CHAIN} -i {BRIDGE} -j DROP",
        f"-A {FWD_CHAIN} -o {BRIDGE} -j DROP",
        f"-A {FWD_CHAIN} -s {POD_CIDR} -j DROP",
        f"-A {FWD_CHAIN} -d {POD_CIDR} -j DROP",
        f"-A {FWD_CHAIN} -d {SERVICE_CIDR} -j DROP",
    ]
    out = [
        f"-A {OUT_CHAIN} -m conntrack --ctstate DNAT --ctorigdst {SERVICE_CIDR} "
        f"! -d {POD_CIDR} -j DROP",
        f"-A {OUT_CHAIN} -s {POD_CIDR} ! -d {POD_CIDR} ! -o lo -j DROP",
        f"-A {OUT_CHAIN} -d {SERVICE_CIDR} -j DROP",
    ]
    script = ["*mangle", f":{FWD_CHAIN} - [0:0]", f":{OUT_CHAIN} - [0:0]", *fwd, *out]
    script += [f"-I FORWARD 1 -j {FWD_CHAIN}", f"-I POSTROUTING 1 -j {OUT_CHAIN}"]
    script += ["COMMIT", ""]
    proc = subprocess.run(
        ["iptables-restore", "--noflush"],
        input="\n".join(script),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        raise host.HostError(f"iptables-restore of the safety chains failed: {proc.stderr}")


def ensure_safety_first() -> None:
    """Put the jumps to the safety chains back at position 1 of mangle FORWARD/POSTROUTING."""
    for chain, target in (("FORWARD", FWD_CHAIN), ("POSTROUTING", OUT_CHAIN)):
        mangle = ["iptables", "-t", "mangle"]
        rules = host.run([*mangle, "-S", chain]).splitlines()
        first = next((r for r in rules if r.startswith("-A ")), "")
        if first == f"-A {chain} -j {target}":
            continue
        while f"-A {chain} -j {target}" in rules:
            host.run([*mangle, "-D", chain, "-j", target])
            rules = host.run([*mangle, "-S", chain]).splitlines()
        host.run([*mangle, "-I", chain, "1", "-j", target])
