"""The real-node cluster for e2e tests: requirements, a deliberate failed start, the good
start, the probe image, and a host comparison before and after."""

from __future__ import annotations

import difflib
import getpass
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memorystore_dev.devcluster.node import (
    HostProcess,
    RealNode,
    host,
    missing_requirements,
    oci,
    undo_leftovers,
)
from memorystore_dev.devcluster.target import Kube, real_node_cluster
from memorystore_dev.devcluster.tools import ensure_tools
from memorystore_dev.replicas import CPU_LIMIT_PREFIX

PROBE_SOURCE = Path(__file__).parent / "nodeprobe"
PROBE_REPO = "memorystore.local/nodeprobe"
DYING_ADDON = "dies-at-once"


def skip_unless_real_node_possible() -> None:
    """Skip with the reason when the machine cannot run a real node; fail instead in CI."""
    problems = missing_requirements()
    if problems:
        reason = "real node unavailable: " + "; ".join(problems)
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: this must run in CI)")
        pytest.skip(reason)


# Mounts the node never makes, made beside it: the image-build harness's
# (devcluster/images/dockerd.py: its dockerd's data root and exec roots), which may be
# building beside a developer's run, and other tests' in their own pytest temp dirs (the
# backup tests' full target, a 64 KiB tmpfs, runs in another worker while the node is up).
# The node mounts only under its cluster workdir (memorystore-cluster-*).
OTHER_HARNESS_MOUNTS = ("/memorystore/docker/", "/ms-docker-", f"/pytest-of-{getpass.getuser()}/")
# Cgroups the node never makes, made beside it: the replica harness's CPU quotas
# (memorystore_dev/replicas.py, the scale-out tests in another worker). The node's own
# tree is its kubelet's cgroupRoot, memorystore-real-node.
OTHER_HARNESS_CGROUPS = (f"cpu/{CPU_LIMIT_PREFIX}",)


def _own(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot without what other harnesses and tests make beside the node."""
    mounts = [m for m in snapshot["mounts"] if not any(o in m for o in OTHER_HARNESS_MOUNTS)]
    cgroups = [c for c in snapshot.get("cgroups", []) if not c.startswith(OTHER_HARNESS_CGROUPS)]
    return {**snapshot, "mounts": mounts, "cgroups": cgroups}


def host_diff(before: dict[str, Any], after: dict[str, Any]) -> str:
    """A readable diff of two host snapshots; empty when equal."""
    before, after = _own(before), _own(after)
    out = []
    for key in before:
        if before[key] == after.get(key):
            continue
        if isinstance(before[key], str):
            lines = difflib.unified_diff(
                before[key].splitlines(), after[key].splitlines(), lineterm="", n=0
            )
            out.append(f"{key}:\n" + "\n".join(lines))
        elif isinstance(before[key], dict):
            changed = {
                k: (before[key].get(k), after[key].get(k))
                for k in set(before[key]) | set(after[key])
                if before[key].get(k) != after[key].get(k)
            }
            out.append(f"{key}: {changed}")
        else:
            gone = sorted(set(before[key]) - set(after[key]))
            new = sorted(set(after[key]) - set(before[key]))
            out.append(f"{key}: gone {gone}, new {new}")
    return "\n".join(out)


@dataclass
class FailedStart:
    """What a deliberately failed start left: its error and the host afterwards."""

    error: BaseException | None
    seconds: float
    lines: list[str]
    after: dict[str, Any]
    started_pids: list[int]
    leftover_processes: list[int]
    workdir_left: bool


@dataclass
class KilledRun:
    """A `memorystore dev cluster --real-node` SIGKILLed with a pod running."""

    pid: int
    left: str  # the host diff right after the kill: what the next start must undo
    seconds: float


def _killed_run(log: Callable[[str], None], kubectl: Path, lock_fd: int) -> KilledRun:
    """Start the CLI's real node, run a pod, SIGKILL the CLI: its processes die with it, but
    the host keeps the bridge, rules, mounts, sysctls … until the next start undoes them."""
    t0 = time.monotonic()
    before = host.snapshot()
    cli = subprocess.Popen(
        [sys.executable, "-m", "memorystore.cli", "dev", "cluster", "--real-node"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # it runs under this process's host lock, so nothing else starts when it dies
        env={**os.environ, "PYTHONSAFEPATH": "1", host.LOCK_FD_ENV: str(lock_fd)},
        pass_fds=(lock_fd,),
    )
    try:
        assert cli.stdout is not None
        kubeconfig = ""
        for line in cli.stdout:
            log(f"(to be killed) {line.rstrip()}")
            if line.startswith("export KUBECONFIG="):
                kubeconfig = line.split("=", 1)[1].strip()
            if line.startswith("Ctrl-C"):
                break
        assert kubeconfig, "the CLI printed no KUBECONFIG"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "doomed"},
            "spec": {
                "nodeSelector": {"memorystore.dev/node": "real"},
                "tolerations": [{"key": "memorystore.dev/real-node", "operator": "Exists"}],
                "containers": [
                    {"name": "c", "image": oci.pause_image()[1], "imagePullPolicy": "Never"}
                ],
            },
        }
        base = [str(kubectl), f"--kubeconfig={kubeconfig}"]
        subprocess.run([*base, "apply", "-f", "-"], input=json.dumps(pod), check=True,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
        subprocess.run([*base, "wait", "--for=condition=Ready", "pod/doomed", "--timeout=90s"],
                       check=True, capture_output=True, text=True, timeout=120)  # fmt: skip
    finally:
        cli.kill()
        cli.wait()
        if cli.stdout is not None:
            cli.stdout.close()
    time.sleep(1)  # the components get their PR_SET_PDEATHSIG
    return KilledRun(cli.pid, host_diff(before, host.snapshot()), time.monotonic() - t0)


@dataclass
class RealNodeRun:
    kube: Kube
    node: RealNode
    probe_image: str
    before: dict[str, Any]
    killed_run: KilledRun
    failed_start: FailedStart
    timings: dict[str, float] = field(default_factory=dict)


def _failed_start(log: Callable[[str], None]) -> FailedStart:
    """Start a node whose last step (an addon) dies at once; record what is left (it first
    undoes what a killed run left)."""
    dying = HostProcess(DYING_ADDON, argv=lambda info: ["/bin/false"], ready=lambda info: False)
    pids: list[int] = []
    workdirs: list[Path] = []
    lines: list[str] = []

    def spy(line: str) -> None:
        if started := re.match(r"started (\S+) \(pid (\d+)\)", line):
            pids.append(int(started.group(2)))
        if where := re.match(r"starting a local cluster in (\S+)", line):
            workdirs.append(Path(where.group(1)))
        lines.append(line)
        log(f"(failing on purpose) {line}")

    t0 = time.monotonic()
    error: BaseException | None = None
    after: list[dict[str, Any]] = []
    try:
        with real_node_cluster(
            log=spy, addons=[dying], on_stopped=lambda: after.append(host.snapshot())
        ):
            pass
    except Exception as exc:  # the expected outcome
        error = exc
    seconds = time.monotonic() - t0
    return FailedStart(
        error=error,
        seconds=seconds,
        lines=lines,
        after=after[0] if after else host.snapshot(),
        started_pids=pids,
        leftover_processes=[p for p in pids if Path(f"/proc/{p}").exists()],
        workdir_left=any(w.exists() for w in workdirs),
    )


@contextmanager
def real_node_run(log: Callable[[str], None]) -> Iterator[RealNodeRun]:
    """A SIGKILLed run, then a failed start (which undoes the killed run's leftovers), then
    the real-node cluster with the probe image imported; on exit, the host must equal what it
    was before all three (AssertionError otherwise). All under one hold of the host lock, so
    no other real node or host-network test changes the machine in between."""
    skip_unless_real_node_possible()
    kubectl = ensure_tools(["kubectl"], log=log)["kubectl"]
    probe_tar, probe_ref = oci.go_image(PROBE_SOURCE, PROBE_REPO)
    with host.host_lock(timeout=1800, log=log) as lock_fd:
        assert lock_fd is not None, "the real-node fixture must take the host lock itself"
        undo_leftovers(log)  # an earlier run killed before its teardown is not this run's change
        before = host.snapshot()
        killed = _killed_run(log, kubectl, lock_fd)
        failed = _failed_start(log)
        t0 = time.monotonic()
        after: list[dict[str, Any]] = []
        with real_node_cluster(log=log, on_stopped=lambda: after.append(host.snapshot())) as kube:
            assert kube.local is not None and kube.local.real_node is not None
            node = kube.local.real_node
            up = time.monotonic() - t0
            node.import_image(probe_tar)
            log(f"real node up in {up:.1f} s; steps: {json.dumps(node.timings)}")
            yield RealNodeRun(kube, node, probe_ref, before, killed, failed, {"bring_up": up})
        problems = node.teardown_problems
        diff = host_diff(before, after[0] if after else host.snapshot())
        assert not problems and not diff, (
            f"the real node left the host changed:\nproblems: {problems}\n{diff}"
        )
