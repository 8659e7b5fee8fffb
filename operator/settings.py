"""The operator's settings: every environment variable it reads, parsed once at start-up.

Read at import, a bad value failed with a bare ValueError before the operator logged anything,
and tests had to patch module constants. Now kopf's start-up handler builds one frozen
`OperatorSettings` (`OperatorSettings.from_env`), refusing a bad value with a message that
names the variable, and hands it to what needs it (the reconciler, the backup runner); a test
builds the settings it wants. The Helm chart sets these variables
(charts/memorystore/templates/deployment.yaml). An unset or empty variable means the default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memorystore.operator.builders.model import Images, Monitoring, OperatorPods

__all__ = [
    "BACKUP_WAIT_SECONDS",
    "OPERATOR_NAMESPACE",
    "OPERATOR_POD_LABELS",
    "POD_MONITORS",
    "POD_MONITOR_INTERVAL",
    "POD_MONITOR_LABELS",
    "QDRANT_IMAGE",
    "RESYNC_SECONDS",
    "SCRAPERS",
    "SERVICE_IMAGE",
    "VARIABLES",
    "OperatorSettings",
    "SettingsError",
]

SERVICE_IMAGE = "MEMORYSTORE_SERVICE_IMAGE"
QDRANT_IMAGE = "MEMORYSTORE_QDRANT_IMAGE"
RESYNC_SECONDS = "MEMORYSTORE_OPERATOR_RESYNC_SECONDS"
BACKUP_WAIT_SECONDS = "MEMORYSTORE_OPERATOR_BACKUP_WAIT_SECONDS"
OPERATOR_NAMESPACE = "MEMORYSTORE_OPERATOR_NAMESPACE"
OPERATOR_POD_LABELS = "MEMORYSTORE_OPERATOR_POD_LABELS"
POD_MONITORS = "MEMORYSTORE_OPERATOR_POD_MONITORS"
POD_MONITOR_INTERVAL = "MEMORYSTORE_OPERATOR_POD_MONITOR_INTERVAL"
POD_MONITOR_LABELS = "MEMORYSTORE_OPERATOR_POD_MONITOR_LABELS"
SCRAPERS = "MEMORYSTORE_OPERATOR_SCRAPERS"
# Every variable the operator reads, and nothing else.
VARIABLES = (
    SERVICE_IMAGE,
    QDRANT_IMAGE,
    RESYNC_SECONDS,
    BACKUP_WAIT_SECONDS,
    OPERATOR_NAMESPACE,
    OPERATOR_POD_LABELS,
    POD_MONITORS,
    POD_MONITOR_INTERVAL,
    POD_MONITOR_LABELS,
    SCRAPERS,
)
# What a NetworkPolicy peer may hold (networking.k8s.io/v1 NetworkPolicyPeer).
PEER_FIELDS = frozenset({"podSelector", "namespaceSelector", "ipBlock"})
# A Prometheus duration as the PodMonitor's `interval` takes it (e.g. 30s, 1m, 1m30s).
DURATION = re.compile(r"^((\d+)(ms|s|m|h|d|w|y))+$")
# The settings parsed from one variable each, by field.
_NUMBERS = {"resync_seconds": RESYNC_SECONDS, "backup_wait_seconds": BACKUP_WAIT_SECONDS}


class SettingsError(ValueError):
    """A variable the operator cannot use; the message names it and its value."""


class OperatorSettings(BaseModel):
    """What the operator is configured with; the defaults are a run outside any cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    images: Images = Field(
        default_factory=Images,
        description=f"Default images of every store's children ({SERVICE_IMAGE}, "
        f"{QDRANT_IMAGE}); a store's spec may name its own.",
    )
    operator_pods: OperatorPods | None = Field(
        None,
        description=f"The operator's own pods ({OPERATOR_NAMESPACE}, {OPERATOR_POD_LABELS}), "
        "admitted to every memory service for backups; None outside a cluster.",
    )
    monitoring: Monitoring = Field(
        default_factory=Monitoring,
        description=f"How stores are scraped ({POD_MONITORS}, {POD_MONITOR_INTERVAL}, "
        f"{POD_MONITOR_LABELS}, {SCRAPERS}): a PodMonitor per store, the peers admitted.",
    )
    resync_seconds: float = Field(
        30.0,
        gt=0,
        allow_inf_nan=False,
        description=f"{RESYNC_SECONDS}: how often every store is reconciled again (drift "
        "repair and status refresh behind kopf's events and the children watch).",
    )
    backup_wait_seconds: float = Field(
        600.0,
        ge=0,
        allow_inf_nan=False,
        description=f"{BACKUP_WAIT_SECONDS}: how long a backup waits for the store's service "
        "to be ready with the backup volume before it fails.",
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OperatorSettings:
        """The settings from `env` (the process environment at start-up); SettingsError
        names each variable whose value cannot be used."""
        numbers = {field: _value(env, var) for field, var in _NUMBERS.items()}
        try:
            return cls(
                images=_images(env),
                operator_pods=_operator_pods(env),
                monitoring=_monitoring(env),
                **{field: raw for field, raw in numbers.items() if raw is not None},
            )
        except ValidationError as exc:
            raise SettingsError(_explain(exc, env)) from None


def _value(env: Mapping[str, str], var: str) -> str | None:
    """A variable's value; None when it is unset or empty (the default applies)."""
    raw = env.get(var, "").strip()
    return raw or None


def _images(env: Mapping[str, str]) -> Images:
    """The children's default images: the chart's values win over the built-in ones."""
    return Images(
        service=env.get(SERVICE_IMAGE) or Images.service,
        qdrant=env.get(QDRANT_IMAGE) or Images.qdrant,
    )


def _operator_pods(env: Mapping[str, str]) -> OperatorPods | None:
    """The operator's namespace and pod labels (a JSON object), as the chart passes them;
    None unless both are set and the labels are a non-empty object of strings (an empty
    selector would admit every pod of that namespace), so no peer is added."""
    namespace = env.get(OPERATOR_NAMESPACE, "").strip()
    try:
        labels: Any = json.loads(env.get(OPERATOR_POD_LABELS) or "null")
    except ValueError:
        return None
    if not namespace or not isinstance(labels, dict) or not labels:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    return OperatorPods(namespace, tuple(sorted(labels.items())))


def _monitoring(env: Mapping[str, str]) -> Monitoring:
    """The chart's monitoring values; SettingsError names a variable it cannot use (a peer
    that is not a NetworkPolicy peer would make every store's policy unappliable)."""
    enabled = (_value(env, POD_MONITORS) or "false").lower()
    if enabled not in ("true", "false"):
        raise SettingsError(f"{POD_MONITORS}={env.get(POD_MONITORS)!r}: not true or false")
    interval = _value(env, POD_MONITOR_INTERVAL) or Monitoring.interval
    if not DURATION.match(interval):
        raise SettingsError(
            f"{POD_MONITOR_INTERVAL}={interval!r}: not a Prometheus duration (e.g. 30s, 1m)"
        )
    labels = _json(env, POD_MONITOR_LABELS, {})
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise SettingsError(f"{POD_MONITOR_LABELS}: not a JSON object of strings")
    peers = _json(env, SCRAPERS, [])
    if not isinstance(peers, list):
        raise SettingsError(f"{SCRAPERS}: not a JSON list of NetworkPolicy peers")
    for i, peer in enumerate(peers):
        if (
            not isinstance(peer, dict)
            or not peer
            or not set(peer) <= PEER_FIELDS
            or not all(isinstance(v, dict) for v in peer.values())
        ):
            raise SettingsError(
                f"{SCRAPERS}[{i}]: a NetworkPolicy peer has one or more of "
                f"{', '.join(sorted(PEER_FIELDS))}, each an object"
            )
    return Monitoring(
        pod_monitors=enabled == "true",
        interval=interval,
        labels=tuple(sorted(labels.items())),
        scrapers=tuple(peers),
    )


def _json(env: Mapping[str, str], var: str, default: Any) -> Any:
    raw = _value(env, var)
    if raw is None:
        return default
    try:
        return json.loads(raw)
    except ValueError:
        raise SettingsError(f"{var}: not JSON") from None


def _explain(exc: ValidationError, env: Mapping[str, str]) -> str:
    """Each refused value as `VARIABLE='value': what is wrong`."""
    problems = []
    for error in exc.errors():
        var = _NUMBERS.get(str(error["loc"][0]), str(error["loc"][0]))
        message = error["msg"]
        problems.append(f"{var}={env.get(var)!r}: {message[:1].lower()}{message[1:]}")
    return "; ".join(problems)
