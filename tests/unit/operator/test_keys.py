"""Service-key rotation: the pure decision (operator/keys.py) and what the builders make of it.

Seeding, rotating, the no-op, expiry, a lost or damaged Secret, and the round trip through
the Secret the builders render — every branch with a fixed clock and a counting key maker.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import yaml

from memorystore.operator import names
from memorystore.operator.builders import desired_children
from memorystore.operator.builders.configs import service_config
from memorystore.operator.builders.model import Images, Keys, Owner
from memorystore.operator.builders.paths import (
    PREVIOUS_SERVICE_KEY_FILE,
    SERVICE_KEY_DIR,
    SERVICE_KEY_FILE,
)
from memorystore.operator.builders.secrets import service_key_secret
from memorystore.operator.keys import (
    Change,
    ServiceKeyState,
    decide,
    describe,
    format_time,
    read_state,
)
from memorystore.spec import MemoryStoreSpec, ServiceKeySpec

NOW = dt.datetime(2025, 3, 1, 12, 0, 0, 500_000, tzinfo=dt.UTC)  # sub-second: dropped
OWNER = Owner(name="acme", namespace="tenants", uid="uid-1", generation=1)
SEED = "seed-key-from-the-keys-secret"


def key_maker() -> Any:
    numbers = count(1)
    return lambda: f"new-key-{next(numbers)}"


def run(
    stored: ServiceKeyState | None,
    rotation: int = 0,
    grace: int = 3600,
    now: dt.datetime = NOW,
    known: int | None = 0,
    in_use: str | None = None,
):
    return decide(
        stored,
        seed=SEED,
        known_generation=known,
        in_use=in_use,
        spec=ServiceKeySpec(rotation=rotation, grace_period_seconds=grace),
        now=now,
        new_key=key_maker(),
    )


def state(current: str = "k0", previous: str | None = None, generation: int = 0, until=None):
    return ServiceKeyState(current, previous, generation, until)


# --- the decision ---------------------------------------------------------------------------


def test_first_time_the_key_created_with_the_store_is_seeded_at_generation_0():
    decision = run(None, known=None)
    assert decision.changes == (Change.SEEDED,)
    assert decision.state == ServiceKeyState(SEED, None, 0, None)


def test_seeding_and_a_requested_rotation_happen_in_one_step():
    decision = run(None, rotation=2, known=None)
    assert decision.changes == (Change.SEEDED, Change.ROTATED)
    assert decision.state.current == "new-key-1"
    assert decision.state.previous == SEED  # agents holding the seed keep working
    assert decision.state.generation == 2


def test_nothing_changes_when_the_generation_is_current():
    stored = state("k0", generation=3)
    decision = run(stored, rotation=3)
    assert decision.changes == () and not decision.changed
    assert decision.state is stored


def test_a_lower_rotation_never_rotates_back():
    stored = state("k5", generation=5)
    assert run(stored, rotation=2).changes == ()


def test_a_bump_rotates_keeping_the_old_key_for_the_grace_period():
    decision = run(state("k0", generation=0), rotation=1, grace=600)
    assert decision.changes == (Change.ROTATED,)
    new = decision.state
    assert new.current == "new-key-1" and new.previous == "k0" and new.generation == 1
    assert new.previous_valid_until == dt.datetime(2025, 3, 1, 12, 10, 0, tzinfo=dt.UTC)


def test_a_jump_of_several_generations_is_one_rotation():
    decision = run(state("k1", generation=1), rotation=7)
    assert decision.changes == (Change.ROTATED,)
    assert decision.state.generation == 7 and decision.state.previous == "k1"


def test_the_previous_key_stays_until_the_deadline_and_goes_at_it():
    until = NOW.replace(microsecond=0) + dt.timedelta(seconds=60)
    during = state("k1", "k0", 1, until)
    assert run(during, rotation=1, now=until - dt.timedelta(seconds=1)).changes == ()
    expired = run(during, rotation=1, now=until)
    assert expired.changes == (Change.EXPIRED,)
    assert expired.state == ServiceKeyState("k1", None, 1, None)


def test_rotating_again_within_the_grace_period_drops_the_oldest_key_at_once():
    until = NOW + dt.timedelta(seconds=3000)
    decision = run(state("k1", "k0", 1, until), rotation=2, grace=120)
    assert decision.changes == (Change.ROTATED,)
    assert decision.state.previous == "k1" and "k0" not in (
        decision.state.current,
        decision.state.previous,
    )
    assert decision.state.previous_valid_until == NOW.replace(microsecond=0) + dt.timedelta(
        seconds=120
    )


def test_expiry_and_a_rotation_due_together():
    decision = run(state("k1", "k0", 1, NOW - dt.timedelta(seconds=5)), rotation=2)
    assert decision.changes == (Change.EXPIRED, Change.ROTATED)
    assert decision.state.previous == "k1" and decision.state.generation == 2


def test_a_previous_key_without_a_deadline_is_expired_at_once():
    decision = run(state("k1", "k0", 1, None), rotation=1)
    assert decision.changes == (Change.EXPIRED,)
    assert decision.state.previous is None


def test_a_lost_secret_is_never_reseeded_once_a_generation_was_reported():
    # the seed may be exactly the key that was rotated away after a leak
    from_client = run(None, rotation=3, known=3, in_use="key-agents-have")
    assert from_client.changes == (Change.RECREATED,)
    assert from_client.state == ServiceKeyState("key-agents-have", None, 3, None)
    fresh = run(None, rotation=3, known=3, in_use=None)
    assert fresh.state.current == "new-key-1" and fresh.state.current != SEED
    assert fresh.state.generation == 3


def test_a_lost_secret_and_a_pending_rotation():
    decision = run(None, rotation=4, known=3, in_use="key-agents-have")
    assert decision.changes == (Change.RECREATED, Change.ROTATED)
    assert decision.state.previous == "key-agents-have" and decision.state.generation == 4


def test_a_damaged_generation_is_repaired_by_a_rotation():
    decision = run(state("k0", generation=-1), rotation=0)
    assert decision.changes == (Change.ROTATED,)
    assert decision.state.generation == 0 and decision.state.previous == "k0"


def test_descriptions_name_generation_and_deadline_but_never_a_key():
    decision = run(state("k-secret-value", generation=0), rotation=1, grace=60)
    (line,) = describe("tenants/acme", decision)
    assert "generation 1" in line and "2025-03-01T12:01:00Z" in line
    assert "k-secret-value" not in line and "new-key-1" not in line
    assert "k-secret-value" not in repr(decision.state)
    assert "new-key-1" not in repr(decision) and "new-key-1" not in str(decision)


def test_status_carries_generation_and_deadline_only():
    until = dt.datetime(2025, 3, 1, 13, 0, tzinfo=dt.UTC)
    status = state("k1", "k0", 1, until).status()
    assert status.model_dump(by_alias=True) == {
        "generation": 1,
        "previousKeyValidUntil": "2025-03-01T13:00:00Z",
    }
    assert state("k1").status().previous_key_valid_until is None


# --- the Secret round trip ------------------------------------------------------------------


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_the_secret_holds_current_and_previous_with_the_bookkeeping_in_annotations():
    until = dt.datetime(2025, 3, 1, 13, 0, tzinfo=dt.UTC)
    secret = service_key_secret(OWNER, state("k1", "k0", 4, until), owned=False)
    assert secret["metadata"]["name"] == "acme-service-key"
    assert "immutable" not in secret  # rewritten in place on every rotation
    assert "ownerReferences" not in secret["metadata"]
    assert _decoded(secret) == {"api-key": "k1", "previous-api-key": "k0"}
    assert secret["metadata"]["annotations"] == {
        "memorystore.dev/service-key-generation": "4",
        "memorystore.dev/previous-key-valid-until": "2025-03-01T13:00:00Z",
    }
    assert not {"k0", "k1"} & set(yaml.safe_dump(secret["metadata"]).split())
    assert read_state(secret["data"], secret["metadata"]["annotations"]) == state(
        "k1", "k0", 4, until
    )


def test_outside_a_grace_period_there_is_no_previous_key_or_deadline():
    secret = service_key_secret(OWNER, state("k1", generation=2), owned=True)
    assert _decoded(secret) == {"api-key": "k1"}
    assert secret["metadata"]["annotations"] == {"memorystore.dev/service-key-generation": "2"}
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"  # deletionPolicy Delete
    assert read_state(secret["data"], secret["metadata"]["annotations"]) == state("k1", None, 2)


@pytest.mark.parametrize(
    ("data", "annotations", "expected"),
    [
        ({}, {}, None),  # no current key: treated as lost
        ({"api-key": ""}, {}, None),
        ({"api-key": "!!not base64!!"}, {}, None),
        ({"api-key": base64.b64encode(b"  \n").decode()}, {}, None),
        (  # a generation that is not a number: -1, repaired by rotating
            {"api-key": base64.b64encode(b"k").decode()},
            {"memorystore.dev/service-key-generation": "two"},
            ServiceKeyState("k", None, -1, None),
        ),
        (  # a previous key whose deadline cannot be read: no deadline, so it expires
            {
                "api-key": base64.b64encode(b"k").decode(),
                "previous-api-key": base64.b64encode(b"p").decode(),
            },
            {
                "memorystore.dev/service-key-generation": "3",
                "memorystore.dev/previous-key-valid-until": "tomorrow",
            },
            ServiceKeyState("k", "p", 3, None),
        ),
    ],
)
def test_damaged_secrets_are_read_on_the_safe_side(data, annotations, expected):
    assert read_state(data, annotations) == expected


def test_times_are_rfc3339_utc_whole_seconds():
    assert format_time(dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)) == "2025-01-02T03:04:05Z"
    assert format_time(None) is None


# --- the memory service reads what the Deployment mounts ------------------------------------


def _children(service_key: str) -> list[dict[str, Any]]:
    keys = Keys(service_api_key=service_key, qdrant_api_key="qdrant-key")
    return desired_children(OWNER, MemoryStoreSpec(), Images(), keys)


def _find(children: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(c for c in children if c["kind"] == kind and c["metadata"]["name"] == name)


def test_the_service_reads_its_keys_from_the_mounted_service_key_secret():
    deployment = _find(_children("k"), "Deployment", "acme-memory")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "service-key")
    assert mount == {"mountPath": SERVICE_KEY_DIR, "name": "service-key", "readOnly": True}
    assert "subPath" not in mount  # subPath mounts are never updated by kubelet
    volume = next(v for v in pod["volumes"] if v["name"] == "service-key")
    assert volume["secret"] == {"defaultMode": 0o440, "secretName": "acme-service-key"}
    # the files the config names are the Secret's keys, in the mounted directory
    cfg = service_config(OWNER, MemoryStoreSpec())
    assert cfg.api_key.file == SERVICE_KEY_FILE == f"{SERVICE_KEY_DIR}/{names.CURRENT_SERVICE_KEY}"
    assert cfg.previous_api_key is not None
    assert cfg.previous_api_key.file == PREVIOUS_SERVICE_KEY_FILE
    assert os.path.dirname(PREVIOUS_SERVICE_KEY_FILE) == SERVICE_KEY_DIR
    assert Path(PREVIOUS_SERVICE_KEY_FILE).name == names.PREVIOUS_SERVICE_KEY
    assert cfg.previous_api_key.optional
    # no other mount contains it (a volume inside another volume's mount is fragile)
    for other in container["volumeMounts"]:
        if other["name"] != "service-key":
            assert not SERVICE_KEY_DIR.startswith(other["mountPath"].rstrip("/") + "/")
    # and no env var carries the service key any more
    assert all("service-api-key" not in str(e) for e in container["env"])


def test_a_rotation_changes_the_client_secret_and_nothing_that_restarts_pods():
    before, after = _children("old-key"), _children("new-key")
    changed = [
        (a["kind"], a["metadata"]["name"]) for a, b in zip(before, after, strict=True) if a != b
    ]
    assert changed == [("Secret", "acme-client")]
    client = _find(after, "Secret", "acme-client")
    assert _decoded(client) == {"api-key": "new-key"}


# --- the apply layer's patch and the status ---------------------------------------------------


def test_the_patch_replaces_what_the_operator_manages_on_the_version_read():
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Secret

    from memorystore.operator.apply import _replacement

    until = dt.datetime(2025, 3, 1, 13, 0, tzinfo=dt.UTC)
    existing = Secret(
        metadata=ObjectMeta(
            name="acme-service-key",
            resourceVersion="42",
            annotations=service_key_secret(OWNER, state("k1", "k0", 1, until), True)["metadata"][
                "annotations"
            ],
        ),
        data=service_key_secret(OWNER, state("k1", "k0", 1, until), True)["data"],
    )
    desired = service_key_secret(OWNER, state("k1", None, 1), owned=False)  # expired, Retain
    patch = _replacement(desired, existing)
    assert patch["metadata"]["resourceVersion"] == "42"  # a concurrent write makes it a 409
    assert patch["metadata"]["ownerReferences"] is None
    assert patch["metadata"]["annotations"] == {
        "memorystore.dev/service-key-generation": "1",
        "memorystore.dev/previous-key-valid-until": None,
    }
    assert patch["data"] == {
        "api-key": base64.b64encode(b"k1").decode(),
        "previous-api-key": None,
    }
    assert desired["data"] == {"api-key": base64.b64encode(b"k1").decode()}  # not mutated


def test_status_reports_the_service_key_generation_and_deadline():
    from memorystore.operator.status import Observed, compute_status
    from memorystore.spec import MemoryStoreStatus

    until = dt.datetime(2025, 3, 1, 13, 0, tzinfo=dt.UTC)
    observed = Observed(
        generation=2, suspended=False, service_key=state("k1", "k0", 1, until).status()
    )
    status = compute_status(observed, MemoryStoreStatus(), "2025-03-01T12:00:00Z")
    dumped = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert dumped["serviceKey"] == {
        "generation": 1,
        "previousKeyValidUntil": "2025-03-01T13:00:00Z",
    }
    assert "k0" not in str(dumped) and "k1" not in str(dumped)
    invalid = compute_status(
        Observed(generation=3, suspended=False, spec_error="bad"), status, "2025-03-01T12:00:01Z"
    )
    # a spec error reports nothing about the key: the merge patch keeps what status had
    assert invalid.service_key is None
