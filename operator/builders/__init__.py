"""Pure builders: a MemoryStore spec in, the desired Kubernetes children out, as plain dicts.

No I/O, no clock, no randomness: the same input gives byte-identical objects, so the apply
layer can server-side-apply them on every reconcile and any difference is a real change.
The generated keys come in as `Keys` (the apply layer creates them once and keeps them)
and the service key's rotation state as `keys.ServiceKeyState`; secret values appear only
in the Secrets built here. Everything else refers to secrets as files (Secret volumes in pod
specs, `{file: PATH}` in the config files, `--config-path` for Qdrant), so no secret is
ever copied into a ConfigMap or an environment variable.

One module per kind of child; the spec is checked once, by `validate.check_spec`, before
any of them is built. This module is the table of contents.
"""

from __future__ import annotations

from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.client import client_config_map, client_secret
from memorystore.operator.builders.common import canonical
from memorystore.operator.builders.configs import (
    client_config,
    render_client_config,
    render_service_config,
    service_config,
)
from memorystore.operator.builders.disruption import (
    memory_disruption_budget,
    qdrant_disruption_budget,
)
from memorystore.operator.builders.memory_service import (
    memory_config_map,
    memory_data_claim,
    memory_deployment,
    memory_service,
)
from memorystore.operator.builders.model import (
    Images,
    Keys,
    Monitoring,
    OperatorPods,
    Owner,
    Restore,
)
from memorystore.operator.builders.monitoring import memory_pod_monitor
from memorystore.operator.builders.network import memory_network_policy, qdrant_network_policy
from memorystore.operator.builders.qdrant import (
    qdrant_config_secret,
    qdrant_headless_service,
    qdrant_service,
    qdrant_statefulset,
)
from memorystore.spec import MemoryStoreSpec


def desired_children(
    owner: Owner,
    spec: MemoryStoreSpec,
    images: Images,
    keys: Keys,
    *,
    ca_cert: str | None = None,
    backup_claim: str | None = None,
    restore: Restore | None = None,
    operator_pods: OperatorPods | None = None,
    scrapers: tuple[dict[str, Any], ...] = (),
    service: bool = True,
) -> list[dict[str, Any]]:
    """Every child but the keys Secret, in apply order: network policies before the pods
    they protect, Services before the StatefulSet that names one, each disruption budget
    before the pods it guards, config and volume before the Deployment that mounts them.
    Needs a spec `check_spec` accepted.

    `ca_cert` is the CA agents must trust (the apply layer reads it from the TLS Secrets);
    the certificate Secrets themselves are written by the apply layer, not applied here.
    What the apply layer observed comes in too, so the builders stay pure: `backup_claim`
    is spec.backup.volume's claim when it exists (mounted, and named in the service config;
    a missing one is simply not mounted), `restore` the Succeeded backup spec.restore names,
    `operator_pods` the operator's pods and `scrapers` the chart's scrapers (both admitted to
    the service), and `service=False`
    leaves the Deployment out (a restore waiting for its backup)."""
    service_text = render_service_config(
        owner, service_config(owner, spec, backup=backup_claim is not None)
    )
    client_text = render_client_config(owner, client_config(owner, spec, ca_cert))
    managed = spec.vector_store.managed is not None
    children: list[dict[str, Any]] = []
    if managed:
        children.append(qdrant_network_policy(owner))
    children.append(memory_network_policy(owner, spec, operator_pods, scrapers))
    if managed:
        children += [
            qdrant_headless_service(owner),
            qdrant_service(owner),
            qdrant_disruption_budget(owner),
            qdrant_config_secret(owner, keys, spec),
            qdrant_statefulset(owner, spec, images),
        ]
    children.append(memory_config_map(owner, service_text))
    if spec.history_db.sqlite is not None:  # PostgreSQL: nothing durable on a volume
        children.append(memory_data_claim(owner, spec))
    # Always, whatever the replicas: at most one pod evicted at a time (one replica can
    # still be drained), so no budget ever needs deleting when spec.service.replicas changes.
    children.append(memory_disruption_budget(owner))
    if service:
        children.append(
            memory_deployment(
                owner, spec, images, service_text, backup_claim=backup_claim, restore=restore
            )
        )
    children += [
        memory_service(owner, spec),
        client_config_map(owner, client_text, ca_cert if spec.tls.enabled else None),
        client_secret(owner, keys),
    ]
    return [canonical(child) for child in children]


def pod_monitor(
    owner: Owner, spec: MemoryStoreSpec, monitoring: Monitoring
) -> dict[str, Any] | None:
    """The store's PodMonitor when the operator makes them (the apply layer applies it only
    where the Prometheus Operator's CRD is served); None otherwise."""
    if not monitoring.pod_monitors:
        return None
    return canonical(memory_pod_monitor(owner, spec, monitoring))


def expected_workloads(owner: Owner, spec: MemoryStoreSpec) -> list[tuple[str, str]]:
    """(kind, name) of the workloads that must report ready replicas for Ready (those
    `desired_children` makes). Needs a spec `check_spec` accepted."""
    workloads = []
    if spec.vector_store.managed is not None:
        workloads.append(("StatefulSet", names.qdrant_statefulset_name(owner.name)))
    workloads.append(("Deployment", names.memory_deployment_name(owner.name)))
    return workloads
