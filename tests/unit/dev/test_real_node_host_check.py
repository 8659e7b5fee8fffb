"""The real node's before/after host comparison (tests/support/real_node.py) counts only what
the node could have changed: mounts and cgroups made beside it by other workers' tests are not
its."""

from __future__ import annotations

import getpass
import tempfile
from pathlib import Path

from memorystore_dev.replicas import CPU_CGROUPS, CpuLimit
from support.real_node import host_diff


def test_mounts_of_other_tests_and_the_image_harness_are_not_the_nodes():
    user = getpass.getuser()
    other_test = str(Path(tempfile.gettempdir()) / f"pytest-of-{user}/pytest-50/popen-gw1/t0/small")
    node = "/tmp/memorystore-cluster-abc/kubelet/pods/x/volumes/kubernetes.io~empty-dir/data"
    before = {"mounts": ["/"], "cgroups": ["cpu/system"]}
    beside = {
        "mounts": ["/", other_test, "/memorystore/docker/overlay2/x"],
        "cgroups": ["cpu/system"],
    }
    assert host_diff(before, beside) == ""
    # a mount under the node's cluster workdir left behind is still a change
    leaked = {"mounts": ["/", other_test, node], "cgroups": ["cpu/system"]}
    assert node in host_diff(before, leaked)


def test_cpu_quotas_of_the_replica_harness_are_not_the_nodes():
    quota = CpuLimit("replica-0", 0.5).path.relative_to(CPU_CGROUPS.parent)
    before = {"mounts": ["/"], "cgroups": ["cpu/system"]}
    beside = {"mounts": ["/"], "cgroups": ["cpu/system", str(quota)]}
    assert host_diff(before, beside) == ""
    # the node's own tree left behind is still a change
    leaked = {"mounts": ["/"], "cgroups": ["cpu/system", "cpu/memorystore-real-node"]}
    assert "memorystore-real-node" in host_diff(before, leaked)
