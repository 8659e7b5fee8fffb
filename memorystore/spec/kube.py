"""Kubernetes building blocks the spec's parts share: Secret keys, resources, volumes, label
and object-name syntax, tolerations and node selectors. They are checked here with the
API server's own rules, so a bad value is refused naming its field before any pod is built.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from memorystore.spec.base import Model

__all__ = [
    "LABEL_VALUE_PATTERN",
    "MAX_TOLERATIONS",
    "OBJECT_NAME_PATTERN",
    "QUALIFIED_NAME_PATTERN",
    "TOLERATION_KEY_PATTERN",
    "LabelSelector",
    "LabelValue",
    "ObjectName",
    "Placed",
    "Resources",
    "SecretKeyRef",
    "Storage",
    "TaintEffect",
    "Toleration",
    "TolerationOperator",
    "node_selector_field",
    "qualified_name_problem",
    "tolerations_field",
]


class SecretKeyRef(Model):
    """A key of a Kubernetes Secret in the MemoryStore's namespace."""

    name: str = Field(description="Secret name.", min_length=1)
    key: str = Field(description="Key inside the Secret.", min_length=1)


class Resources(Model):
    """Container resources, as in a Pod spec."""

    requests: dict[str, str] = Field(default_factory=dict, description="Resource requests.")
    limits: dict[str, str] = Field(default_factory=dict, description="Resource limits.")


class Storage(Model):
    size: str = Field("1Gi", description="Volume size.")
    storage_class_name: str | None = Field(None, description="StorageClass; default if unset.")


# Kubernetes' label syntax (k8s.io/apimachinery validation): a qualified name is an optional
# DNS-subdomain prefix and `/`, then a name of at most 63 characters; a value is empty or a
# name-like string of at most 63.
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_PATTERN = rf"^({_DNS_SUBDOMAIN}/)?{_LABEL_NAME}$"
LABEL_VALUE_PATTERN = rf"^({_LABEL_NAME})?$"
TOLERATION_KEY_PATTERN = rf"^(({_DNS_SUBDOMAIN}/)?{_LABEL_NAME})?$"  # empty: every key
MAX_TOLERATIONS = 32


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a valid label key / taint key (None when it is)."""
    prefix, _, name = key.rpartition("/")
    if len(name) > 63:
        return f"{key!r}: the name after the prefix must be at most 63 characters"
    if prefix and len(prefix) > 253:
        return f"{key!r}: the prefix must be at most 253 characters"
    if not re.fullmatch(QUALIFIED_NAME_PATTERN, key):
        return (
            f"{key!r} is not a qualified name: an optional DNS-subdomain prefix and '/', then "
            "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        )
    return None


LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]


class TolerationOperator(StrEnum):
    EXISTS = "Exists"  # any value of the key (or, with no key, every taint)
    EQUAL = "Equal"  # the key with exactly this value


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(Model):
    """A Kubernetes Toleration, copied as is into the pods' spec.tolerations."""

    key: str | None = Field(
        None,
        max_length=317,
        pattern=TOLERATION_KEY_PATTERN,
        description="Taint key to tolerate. Empty (with operator Exists): every taint.",
    )
    operator: TolerationOperator = Field(
        TolerationOperator.EQUAL,
        description="Equal (the default): the taint's value must equal `value`. Exists: any "
        "value; `value` must then be empty.",
    )
    value: LabelValue | None = Field(None, description="Taint value to match with operator Equal.")
    effect: TaintEffect | None = Field(
        None,
        description="Taint effect to tolerate: NoSchedule, PreferNoSchedule or NoExecute. "
        "Empty: every effect.",
    )
    toleration_seconds: int | None = Field(
        None,
        ge=0,
        description="With effect NoExecute only: how long the pod stays bound after the taint "
        "appears (unset: forever).",
    )

    @field_validator("key")
    @classmethod
    def _key_syntax(cls, key: str | None) -> str | None:
        if key:
            problem = qualified_name_problem(key)
            if problem:
                raise ValueError(f"key {problem}")
        return key

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if not self.key and self.operator != TolerationOperator.EXISTS:
            raise ValueError("operator must be Exists when key is empty (it tolerates every taint)")
        if self.operator == TolerationOperator.EXISTS and self.value:
            raise ValueError("value must be empty when operator is Exists")
        if self.toleration_seconds is not None and self.effect != TaintEffect.NO_EXECUTE:
            raise ValueError("tolerationSeconds is only allowed with effect NoExecute")
        return self

    def as_pod_toleration(self) -> dict[str, Any]:
        """The object for a pod spec: camelCase, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Placed(Model):
    """Pod placement fields (a base of the specs of pods the operator runs): validated here
    so that a bad key is refused naming its field, before any pod is built."""

    @field_validator("node_selector", check_fields=False)
    @classmethod
    def _selector_keys(cls, selector: dict[str, str]) -> dict[str, str]:
        for key in selector:
            problem = qualified_name_problem(key)
            if problem:
                raise ValueError(f"label key {problem}")
        return selector


def node_selector_field(pods: str) -> Any:
    """The `nodeSelector` field of a kind of pod (`pods` names it in the description)."""
    return Field(
        default_factory=dict,
        description=f"Node labels the {pods} must match (a pod's spec.nodeSelector), e.g. "
        "a dedicated node pool. Empty: any node.",
    )


def tolerations_field(pods: str) -> Any:
    """The `tolerations` field of a kind of pod (at most MAX_TOLERATIONS)."""
    return Field(
        default_factory=list,
        max_length=MAX_TOLERATIONS,
        description=f"Taints the {pods} tolerate (a pod's spec.tolerations), e.g. to run "
        "on a tainted node pool that nodeSelector picks.",
    )


class LabelSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict, description="Labels to match.")


# A Kubernetes object name (DNS subdomain): PersistentVolumeClaims, MemoryStoreBackups.
OBJECT_NAME_PATTERN = rf"^{_DNS_SUBDOMAIN}$"
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=OBJECT_NAME_PATTERN)]
