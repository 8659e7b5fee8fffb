"""`kubectl memorystore` on the real API server with the simulated node: kubectl finds the
plugin, and status, backup, restore and rotate-key do what they say against a running
operator. No memory service answers here (kwok runs no pod), so a backup fails the way the
operator fails it and the restored store is checked as created; export, import, reindex and
logs, which reach the service, run on the real node (tests/e2e/test_walk_real_node.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from memorystore_dev.devcluster.target import Kube
from support.backup_objects import backup, finished
from support.plugin import plugin
from support.stores import create_store
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

RunOperator = Callable[..., subprocess.Popen[bytes]]


def phase(kube: Kube, namespace: str, name: str, kind: str = "mstore") -> str | None:
    return (kube.get(kind, name, "-n", namespace).get("status") or {}).get("phase")


def test_kubectl_finds_the_plugin(kube: Kube, namespace: str):
    shown = plugin(kube, namespace, "--help")
    assert shown.returncode == 0, shown.stderr
    for command in ("status", "backup", "restore", "export", "import", "rotate-key",
                    "reindex", "logs"):  # fmt: skip
        assert command in shown.stdout


def test_status_backup_restore_and_rotate_key_on_the_api_server(
    kube: Kube, namespace: str, run_operator: RunOperator
):
    run_operator()
    create_store(kube, namespace, "s", "{vectorStore: {embedded: {}}}")
    wait_for(lambda: phase(kube, namespace, "s") == "Ready", timeout=90)

    # a backup the operator refuses (no spec.backup.volume): followed to Failed, exit 1
    taken = plugin(kube, namespace, "backup", "s", "--name", "s-b1", "--timeout", "60")
    assert taken.returncode == 1, taken.stdout + taken.stderr
    assert "memorystorebackup/s-b1 created" in taken.stderr
    assert "backup s-b1 Failed" in taken.stderr and "no spec.backup.volume" in taken.stderr

    shown = plugin(kube, namespace, "status", "s")
    assert shown.returncode == 0, shown.stderr
    assert f"MemoryStore {namespace}/s  phase: Ready  tier: embedded  tls: on" in shown.stdout
    assert "Deployment s-memory: 1/1 ready" in shown.stdout
    assert "last backup:  s-b1 Failed" in shown.stdout
    assert "service key:  generation 0" in shown.stdout
    missing = plugin(kube, namespace, "status", "nobody")
    assert missing.returncode == 1
    assert f"MemoryStore nobody not found in namespace {namespace}" in missing.stderr

    rotated = plugin(kube, namespace, "rotate-key", "s", "--timeout", "60")
    assert rotated.returncode == 0, rotated.stderr
    assert "rotated: generation 1; the previous key is accepted until" in rotated.stdout
    store = kube.get("mstore", "s", "-n", namespace)
    assert store["spec"]["serviceKey"]["rotation"] == 1
    assert store["status"]["serviceKey"]["generation"] == 1

    # a restore refuses a backup that did not succeed, then makes a new store from one that did
    refused = plugin(kube, namespace, "restore", "s-b1", "--to", "s2")
    assert refused.returncode == 1 and "backup s-b1 is Failed, not Succeeded" in refused.stderr
    backup(kube, namespace, "s-b2", "s")
    # The running operator takes it first (and fails it: no volume); only then the stand-in
    # for a backup a service wrote, which the operator leaves alone as finished. Written
    # before the operator's verdict, the verdict could land last (seen in CI).
    wait_for(lambda: phase(kube, namespace, "s-b2", "msbackup") == "Failed", timeout=60)
    finished(kube, namespace, "s-b2")  # a stand-in: no service wrote it here
    made = plugin(kube, namespace, "restore", "s-b2", "--to", "s2", "--no-wait")
    assert made.returncode == 0, made.stderr
    assert "memorystore/s2 created from backup s-b2" in made.stderr
    restored = kube.get("mstore", "s2", "-n", namespace)
    assert restored["spec"]["restore"] == {"fromBackup": "s-b2", "trustUnsigned": False}
    assert restored["spec"]["vectorStore"] == store["spec"]["vectorStore"]
    again = plugin(kube, namespace, "restore", "s-b2", "--to", "s2")
    assert again.returncode == 1 and "MemoryStore s2 exists" in again.stderr
