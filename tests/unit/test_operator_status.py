"""Status computation: reasons that tell a user what is wrong, honest Ready, stable times."""

from __future__ import annotations

from memorystore.operator.status import (
    READY,
    SERVICE_READY,
    VECTOR_STORE_READY,
    Observed,
    Workload,
    compute_status,
    workload_state,
)
from memorystore.spec import MemoryStoreStatus, Phase

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
    assert cond(suspended, VECTOR_STORE_READY).reason == "Embedded"


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


def test_an_unreachable_external_qdrant_is_named():
    problem = "cannot reach the external Qdrant at http://q:6333: ConnectError"
    status = compute_status(
        observed(vector_store=None, external_vector_store="http://q:6333", external_error=problem),
        MemoryStoreStatus(),
        T0,
    )
    vs = cond(status, VECTOR_STORE_READY)
    assert (vs.status, vs.reason, vs.message) == ("False", "Unreachable", problem)
    assert cond(status, READY).message == problem and status.phase == Phase.PENDING


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
