"""The memory service of a store: its pods, its HTTPS (a private CA or cert-manager) and the
tenant's service key with rotation. What an agent reaches and how it is trusted.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from memorystore.spec.base import Model
from memorystore.spec.kube import (
    LabelValue,
    Placed,
    Toleration,
    node_selector_field,
    tolerations_field,
)
from memorystore.spec.sizing import ServiceResources

__all__ = [
    "IssuerKind",
    "IssuerRef",
    "ServiceKeySpec",
    "ServiceSpec",
    "TLSSpec",
]


class ServiceSpec(Placed):
    replicas: int = Field(
        1,
        ge=1,
        le=20,
        description="Memory-service replicas, at least 1: to scale to zero use spec.suspend "
        "(data kept). More than 1 needs spec.historyDb.postgres and vectors every replica "
        "reaches (spec.vectorStore.managed, external or postgres).",
    )
    resources: ServiceResources = Field(
        default_factory=ServiceResources,
        description="Resources of the memory service's container and of its restore init "
        "container; requests and limits by default, derived from measurements.",
    )
    image: str | None = Field(None, description="Service image; the chart's default if unset.")
    node_selector: dict[str, LabelValue] = node_selector_field("memory-service pods")
    tolerations: list[Toleration] = tolerations_field("memory-service pods")

    @field_validator("replicas", mode="before")
    @classmethod
    def _zero_is_suspend(cls, replicas: Any) -> Any:
        # Before the range check, so that a store written with 0 (allowed before the minimum
        # was 1) is told what to use instead.
        if replicas == 0 and not isinstance(replicas, bool):
            raise ValueError("must be at least 1: to scale to zero use spec.suspend (data kept)")
        return replicas


class IssuerKind(StrEnum):
    ISSUER = "Issuer"  # a cert-manager Issuer in the store's namespace
    CLUSTER_ISSUER = "ClusterIssuer"


class IssuerRef(Model):
    """A cert-manager issuer, as in a cert-manager Certificate's `issuerRef`."""

    name: str = Field(min_length=1, description="Name of the cert-manager Issuer or ClusterIssuer.")
    kind: IssuerKind = Field(
        IssuerKind.ISSUER,
        description="Issuer (in the store's namespace) or ClusterIssuer.",
    )
    group: str = Field(
        "cert-manager.io", min_length=1, description="API group of the issuer (external issuers)."
    )


class TLSSpec(Model):
    """HTTPS between agents and the memory service.

    Without `issuerRef` the operator runs a private CA per store (Secret `<name>-ca`, never
    mounted) and issues the serving certificate into Secret `<name>-tls`, renewing it on
    reconcile; with `issuerRef` cert-manager issues it. Agents trust the CA the client
    ConfigMap carries (`ca.crt`). The service reloads a renewed certificate without a restart.
    """

    enabled: bool = Field(
        True,
        description="Serve HTTPS (the default). false serves plain HTTP inside the cluster: the "
        "service key and every memory then cross the network in clear text.",
    )
    issuer_ref: IssuerRef | None = Field(
        None,
        description="Have cert-manager issue the serving certificate with this issuer (a "
        "Certificate named `<name>-tls`). Unset: the operator issues it from a private "
        "per-store CA.",
    )
    duration_days: int = Field(
        90, ge=1, le=3650, description="Validity of each serving certificate, in days."
    )
    renew_before_days: int = Field(
        30,
        ge=1,
        le=3649,
        description="Renew the serving certificate when fewer than this many days of validity "
        "remain. Must be less than durationDays.",
    )

    @model_validator(mode="after")
    def _renew_within_duration(self) -> TLSSpec:
        if self.renew_before_days >= self.duration_days:
            raise ValueError(
                f"spec.tls.renewBeforeDays ({self.renew_before_days}) must be less than "
                f"spec.tls.durationDays ({self.duration_days})"
            )
        return self


class ServiceKeySpec(Model):
    """Rotation of the tenant's service key (what agents send as `Authorization: Token <key>`).

    To rotate (e.g. after a leak), set `rotation` to a number above
    `status.serviceKey.generation`, e.g. `kubectl patch mstore NAME --type=merge -p
    '{"spec": {"serviceKey": {"rotation": 1}}}'`. Nothing restarts: agents and the service
    re-read their mounted key files.
    """

    rotation: int = Field(
        0,
        ge=0,
        description="Bump to rotate the service key: whenever this is greater than "
        "status.serviceKey.generation, the operator generates a new key, puts it in the client "
        "Secret agents mount, and keeps accepting the old key for gracePeriodSeconds. It can "
        "only grow.",
    )
    grace_period_seconds: int = Field(
        3600,
        ge=60,
        le=604800,
        description="How long the old key keeps working after a rotation, so that agents pick "
        "up the new one (kubelet refreshes mounted Secrets within about a minute). After it "
        "the old key is refused. Rotating again within a grace period refuses the oldest "
        "key at once: only the key current until then gets a new grace period.",
    )
