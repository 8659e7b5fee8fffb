"""Every tenant container is bounded: requests and limits by default (memorystore/spec/sizing.py),
overridable per store, a limit below its request refused naming both; every emptyDir has a
size limit. Checked on the golden manifests and on builder outputs for every tier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube.utils.quantity import parse_quantity

from memorystore.operator.builders import desired_children
from memorystore.operator.builders.model import Images, Keys, Owner, Restore
from memorystore.operator.builders.validate import SpecError, check_spec
from memorystore.spec import MemoryStoreSpec
from memorystore.spec.sizing import (
    QDRANT_LIMITS,
    QDRANT_REQUESTS,
    SERVICE_LIMITS,
    SERVICE_REQUESTS,
)

GOLDEN = Path(__file__).parent / "golden"
OWNER = Owner("acme", "tenants", "0b6f1c9e-0000-4000-8000-3a1f0c2d7e11", 1)
KEYS = Keys("s" * 43, "q" * 43)
TIERS = {
    "managed": {},
    "embedded": {"vectorStore": {"embedded": {}}},
    "external": {"vectorStore": {"external": {"url": "https://q.example:6333"}}},
    "postgres": {
        "vectorStore": {"postgres": {}},
        "historyDb": {"postgres": {"dsnSecretRef": {"name": "pg", "key": "uri"}}},
    },
}


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet")
    ]


def assert_bounded(objects: list[dict[str, Any]]) -> int:
    """Every container has cpu and memory requests and limits, no limit below its request,
    and every emptyDir a size limit; the number of containers seen."""
    seen = 0
    for name, pod in pod_specs(objects):
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            resources = container["resources"]
            where = f"{name}/{container['name']}"
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= resources.get(kind, {}).keys(), f"{where} {kind}"
            for what, limit in resources["limits"].items():
                request = resources["requests"].get(what)
                assert request is None or parse_quantity(limit) >= parse_quantity(request)
            seen += 1
        for volume in pod["volumes"]:
            if "emptyDir" in volume:
                assert volume["emptyDir"].get("sizeLimit"), f"{name}: {volume['name']}"
    return seen


def test_the_defaults_are_the_measured_ones_and_each_limit_holds_its_request():
    spec = MemoryStoreSpec.model_validate({})
    assert spec.service.resources.requests == SERVICE_REQUESTS
    assert spec.service.resources.limits == SERVICE_LIMITS
    assert spec.vector_store.managed is not None
    assert spec.vector_store.managed.resources.requests == QDRANT_REQUESTS
    assert spec.vector_store.managed.resources.limits == QDRANT_LIMITS
    for requests, limits in ((SERVICE_REQUESTS, SERVICE_LIMITS), (QDRANT_REQUESTS, QDRANT_LIMITS)):
        assert requests.keys() == limits.keys() == {"cpu", "memory"}
        for what in requests:
            assert parse_quantity(limits[what]) >= parse_quantity(requests[what])


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_golden_container_is_bounded(path: Path):
    objects = [o for o in yaml.safe_load_all(path.read_text()) if o]
    assert assert_bounded(objects) >= 1


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("restoring", [False, True], ids=["serving", "restoring"])
def test_every_tier_is_bounded_by_default_restore_init_container_included(
    tier: str, restoring: bool
):
    spec = MemoryStoreSpec.model_validate(TIERS[tier])
    restore = Restore(claim="backups", path="old") if restoring else None
    children = desired_children(OWNER, spec, Images(), KEYS, restore=restore)
    containers = assert_bounded(children)
    assert containers == (2 if tier == "managed" else 1) + (1 if restoring else 0)
    (deployment,) = [o for o in children if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    if restoring:
        (init,) = pod["initContainers"]
        assert init["resources"] == pod["containers"][0]["resources"]


quantities = st.builds(
    lambda n, unit: f"{n}{unit}", st.integers(1, 4096), st.sampled_from(["Mi", "Gi", "M", "G"])
)


@settings(max_examples=80, deadline=None)
@given(request=quantities, limit=quantities, where=st.sampled_from(["service", "managed"]))
def test_a_limit_below_its_request_is_refused_naming_both(request: str, limit: str, where: str):
    resources = {"requests": {"memory": request}, "limits": {"memory": limit}}
    raw = (
        {"service": {"resources": resources}}
        if where == "service"
        else {"vectorStore": {"managed": {"resources": resources}}}
    )
    field = "spec.service.resources" if where == "service" else "spec.vectorStore.managed.resources"
    spec = MemoryStoreSpec.model_validate(raw)
    if parse_quantity(limit) >= parse_quantity(request):
        check_spec(OWNER, spec)
        return
    with pytest.raises(SpecError) as info:
        check_spec(OWNER, spec)
    message = str(info.value)
    assert f"{field}.limits.memory ({limit})" in message
    assert f"{field}.requests.memory ({request})" in message


def test_setting_requests_keeps_the_default_limits_and_a_too_big_request_is_refused():
    spec = MemoryStoreSpec.model_validate({"service": {"resources": {"requests": {"cpu": "1"}}}})
    assert spec.service.resources.limits == SERVICE_LIMITS
    check_spec(OWNER, spec)
    big = MemoryStoreSpec.model_validate(
        {"service": {"resources": {"requests": {"memory": "4Gi"}}}}
    )
    with pytest.raises(SpecError, match=r"spec\.service\.resources\.limits\.memory \(2Gi\)"):
        check_spec(OWNER, big)
