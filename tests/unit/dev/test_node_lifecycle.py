"""The real node's lifecycle (node/lifecycle.py): a failed start names its step and log."""

from __future__ import annotations

from pathlib import Path

from memorystore_dev.devcluster.node import NodeStartError


def test_a_start_error_names_the_step_and_the_log():
    err = NodeStartError("kubelet", "node not Ready after 120 s", Path("/x/kubelet.log"))
    assert str(err) == (
        "real node: step 'kubelet' failed: node not Ready after 120 s; log: /x/kubelet.log"
    )
