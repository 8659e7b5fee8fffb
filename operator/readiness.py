"""Why a store's memory service is not ready, in its own words: its pods' `/readyz`.

The operator never sends a request to an address a tenant wrote (an external Qdrant's
`spec.vectorStore.external.url`, a database DSN): that would let anyone who can create a
MemoryStore probe any address from the operator's pod and read the answer in the store's
status. The memory service has to reach its vector store and its database anyway: one it
cannot reach at start-up stops it, saying why in its last log line (the container's
termination message, `FallbackToLogsOnError`), and one lost later makes its `/readyz` (no
key needed) answer 503 with the reason; kubelet's readiness probe turns that into the pod's
readiness, which the Deployment's status carries. What the status lacks is the reason, so
while the Deployment is not ready the operator reports a crashed container's termination
message (read from the pod's status: no request at all) or else asks one not-ready pod's
`/readyz` itself.

Only pods the operator's Deployment made are asked: the store's memory-service labels, a
Running pod on the pod network (a hostNetwork pod's address is its node's), at the pod IP
the API server reports, on the service's port. With TLS the answer is verified against the
store's CA under the Service's DNS name (the certificate names no pod IP). At most 4 KiB
are read, within 3 s, and only the `reason` field, cut to 300 printable characters, is
reported: nothing the pod says can grow the status or the operator's memory.

A ready pod's `/readyz` is read the same way for an embedder migration's progress
(`migration_progress`): only the fields `EmbedderMigrationStatus` has, each bounded, and
event reasons from a fixed set; anything else makes it None.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
from typing import Any

import httpx
from lightkube import AsyncClient
from pydantic import ValidationError

from memorystore.operator import backups, names
from memorystore.spec import EmbedderMigrationStatus

__all__ = [
    "MAX_BODY",
    "MAX_REASON",
    "ask_readyz",
    "crashed_pod",
    "migration_in",
    "migration_progress",
    "not_ready_reason",
    "ready_pod",
    "unready_pod",
]

CONTAINER = names.MEMORY_SERVICE  # the container's name too (builders/memory_service.py)

TIMEOUT = httpx.Timeout(3.0)
MAX_BODY = 4096
MAX_REASON = 300


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def unready_pod(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(name, pod IP) of the first Running, not-ready pod on the pod network, by name."""
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        if spec.get("hostNetwork") or status.get("phase") != "Running" or _ready(pod):
            continue
        if status.get("podIP"):
            return pod["metadata"]["name"], str(status["podIP"])
    return None


def crashed_pod(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(name, why) of the first not-ready pod, by name, whose memory-service container last
    ended with an error: its exit code and termination message (its last log line)."""
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        if _ready(pod):
            continue
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != CONTAINER:
                continue
            state = status.get("state") or {}
            ended = state.get("terminated") or (status.get("lastState") or {}).get("terminated")
            if ended and ended.get("exitCode"):
                lines = str(ended.get("message") or "").strip().splitlines()
                message = _printable(lines[-1]) if lines else ""
                why = f"the memory service exited with code {ended['exitCode']}"
                return pod["metadata"]["name"], f"{why}: {message}" if message else why
    return None


def _printable(text: str) -> str:
    cleaned = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    return cleaned if len(cleaned) <= MAX_REASON else cleaned[: MAX_REASON - 1] + "…"


def _reason(status: int, body: bytes) -> str | None:
    """What to report for an answer: None when the pod says it is ready."""
    if status == 200:
        return None
    try:
        reason = json.loads(body).get("reason")
    except (ValueError, AttributeError):
        reason = None
    if isinstance(reason, str) and reason.strip():
        return f"its /readyz answered HTTP {status}: {_printable(reason)}"
    return f"its /readyz answered HTTP {status}"


async def _get_readyz(
    address: str, port: int, *, server_name: str | None, ca_cert: str | None
) -> tuple[int, bytes] | str:
    """GET https://address:port/readyz (http:// when `server_name` is None, i.e. no TLS):
    (status, at most MAX_BODY bytes), or why it could not be asked."""
    verify: ssl.SSLContext | bool = False
    if server_name is not None:
        verify = ssl.create_default_context(cadata=ca_cert) if ca_cert else True
    scheme = "http" if server_name is None else "https"
    host = f"[{address}]" if ":" in address else address
    extensions = {"sni_hostname": server_name} if server_name else {}
    try:
        async with (
            httpx.AsyncClient(verify=verify, timeout=TIMEOUT, trust_env=False) as http,
            http.stream(
                "GET", f"{scheme}://{host}:{port}/readyz", extensions=extensions
            ) as response,
        ):
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) >= MAX_BODY:
                    break
            return response.status_code, body[:MAX_BODY]
    except httpx.HTTPError as exc:
        return f"its /readyz could not be asked ({type(exc).__name__})"


async def ask_readyz(
    address: str, port: int, *, server_name: str | None, ca_cert: str | None
) -> str | None:
    """None when the pod's /readyz answers 200, otherwise why not, in one short line."""
    answer = await _get_readyz(address, port, server_name=server_name, ca_cert=ca_cert)
    if isinstance(answer, str):
        return answer
    return _reason(*answer)


# the service's /readyz field -> the status field (the rest of what a pod says is dropped)
_MIGRATION_FIELDS = {
    "phase": "phase",
    "live": "live",
    "desired": "desired",
    "other": "other",
    "done": "done",
    "total": "total",
    "ratePerSecond": "rate_per_second",
    "etaSeconds": "eta_seconds",
    "errors": "errors",
    "lastError": "last_error",
}


def migration_in(body: bytes) -> EmbedderMigrationStatus | None:
    """The embedder migration a 200 /readyz reports, its strings made printable and cut, or
    None (no migration, or anything not of the expected shape: a pod's words are not trusted
    to grow or break the status)."""
    try:
        reported = json.loads(body).get("embedderMigration")
    except (ValueError, AttributeError):
        return None
    if not isinstance(reported, dict):
        return None
    fields: dict[str, Any] = {}
    for key, field in _MIGRATION_FIELDS.items():
        value = reported.get(key)
        if isinstance(value, str):
            value = _printable(value)[:200]
        if value is not None:
            fields[field] = value
    listed = reported.get("events")
    events = [_event(e) for e in listed[-10:]] if isinstance(listed, list) else []
    events = [e for e in events if e is not None]
    last = _event(reported.get("lastEvent"))
    if last is not None:
        fields["last_event"] = last["reason"]
        fields["last_event_message"] = last["message"]
        fields["last_event_time"] = last["time"]
    fields["recent_events"] = events
    if isinstance(fields.get("rate_per_second"), int | float):
        fields["rate_per_second"] = round(float(fields["rate_per_second"]), 1)
    try:
        return EmbedderMigrationStatus.model_validate(fields, strict=False)
    except ValidationError:
        return None


def _event(event: Any) -> dict[str, str] | None:
    """One event a pod reported, if it is one of the service's, with a time; else None."""
    if not isinstance(event, dict):
        return None
    reason, message, when = event.get("reason"), event.get("message"), event.get("time")
    if not isinstance(reason, str) or reason not in MIGRATION_EVENTS:
        return None
    if not isinstance(when, int | float) or isinstance(when, bool):
        return None
    try:
        stamp = dt.datetime.fromtimestamp(float(when), dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    text = _printable(str(message or ""))
    return {"reason": reason, "message": text, "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}


# what the service names its migration events (service/migration/migrator.py)
MIGRATION_EVENTS = frozenset(
    {
        "MigrationStarted",
        "MigrationRetargeted",
        "MigrationAborted",
        "MigrationSwitched",
        "MigrationReverted",
        "MigrationFinished",
    }
)


def ready_pod(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(name, pod IP) of the first Running, ready pod on the pod network, by name."""
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        if spec.get("hostNetwork") or status.get("phase") != "Running" or not _ready(pod):
            continue
        if status.get("podIP"):
            return pod["metadata"]["name"], str(status["podIP"])
    return None


async def migration_progress(
    client: AsyncClient, namespace: str, store: str, *, tls: bool, ca_cert: str | None
) -> EmbedderMigrationStatus | None:
    """The embedder migration one ready pod of the store's memory service reports (its
    /readyz, read as `not_ready_reason` reads it), or None."""
    found = ready_pod(await backups.service_pods(client, namespace, store))
    if found is None:
        return None
    server_name = names.memory_dns_names(store, namespace)[2] if tls else None
    answer = await _get_readyz(
        found[1], names.SERVICE_PORT, server_name=server_name, ca_cert=ca_cert
    )
    if isinstance(answer, str) or answer[0] != 200:
        return None
    return migration_in(answer[1])


async def not_ready_reason(
    client: AsyncClient, namespace: str, store: str, *, tls: bool, ca_cert: str | None
) -> str | None:
    """'pod NAME: why' for one not-ready pod of the store's memory service, or None."""
    pods = await backups.service_pods(client, namespace, store)
    crashed = crashed_pod(pods)
    if crashed is not None:
        return f"pod {crashed[0]}: {crashed[1]}"
    found = unready_pod(pods)
    if found is None:
        return None
    pod, address = found
    server_name = names.memory_dns_names(store, namespace)[2] if tls else None
    why = await ask_readyz(address, names.SERVICE_PORT, server_name=server_name, ca_cert=ca_cert)
    return None if why is None else f"pod {pod}: {why}"
