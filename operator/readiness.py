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
"""

from __future__ import annotations

import json
import ssl
from typing import Any

import httpx
from lightkube import AsyncClient

from memorystore.operator import backups, names

__all__ = [
    "MAX_BODY",
    "MAX_REASON",
    "ask_readyz",
    "crashed_pod",
    "not_ready_reason",
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


async def ask_readyz(
    address: str, port: int, *, server_name: str | None, ca_cert: str | None
) -> str | None:
    """GET https://address:port/readyz (http:// when `server_name` is None, i.e. no TLS):
    None when it answers 200, otherwise why not, in one short line."""
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
            return _reason(response.status_code, body[:MAX_BODY])
    except httpx.HTTPError as exc:
        return f"its /readyz could not be asked ({type(exc).__name__})"


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
