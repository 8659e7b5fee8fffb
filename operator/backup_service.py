"""The memory service's backup API as the operator calls it: the store's Service name, its
current service key and its CA, exactly as an agent pod reaches it.

Why apart from `backups.py`: the connection's outcomes are what a backup's retries depend
on, so they are told apart here: a connection that could not be made (nothing was sent:
retried at once), one that dropped after the request was sent (`ConnectionDropped`: the
service may have done it, so the caller asks before asking again), and the service's own
refusals (`_detail`, its `detail`, never a header: never the key).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from typing import Any

import httpx
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Secret

from memorystore.operator import apply, names

__all__ = [
    "BACKUP_TIMEOUT",
    "CONNECT_ATTEMPTS",
    "SHORT_TIMEOUT",
    "ConnectionDropped",
    "ServiceError",
    "StoreService",
    "detail",
]

# How long the service may take to write a backup (big stores take minutes).
BACKUP_TIMEOUT = httpx.Timeout(connect=10.0, read=1800.0, write=30.0, pool=10.0)
SHORT_TIMEOUT = httpx.Timeout(10.0)
CONNECT_ATTEMPTS = 3


class ServiceError(Exception):
    """The service refused or could not be reached; the message is safe for status."""


class ConnectionDropped(ServiceError):
    """The request was sent but no answer came (the connection dropped or timed out): the
    service may have done what was asked, or not."""


def _decode(secret: Secret | None, key: str) -> str | None:
    raw = ((secret.data or {}) if secret else {}).get(key)
    if not raw:
        return None
    try:
        return base64.b64decode(raw).decode().strip() or None
    except (ValueError, UnicodeDecodeError):
        return None


class StoreService:
    """The memory service of one store, as an agent reaches it: the Service's name, the
    store's current service key, its CA."""

    def __init__(self, endpoint: str, key: str, ca_cert: str | None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._key = key
        self._verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cadata=ca_cert) if ca_cert else True
        )

    @classmethod
    async def of(cls, client: AsyncClient, store: str, namespace: str, tls: bool) -> StoreService:
        async def read(secret: str, key: str) -> str | None:
            return _decode(await apply.get_secret(client, secret, namespace), key)

        key = await read(names.service_key_secret_name(store), names.CURRENT_SERVICE_KEY)
        if key is None:
            raise ServiceError(
                f"the service key of store {store} (Secret "
                f"{names.service_key_secret_name(store)}) does not exist yet"
            )
        ca = None
        if tls:
            ca = await read(names.ca_secret_name(store), names.CA_CERT) or await read(
                names.tls_secret_name(store), names.CA_CERT
            )
        return cls(names.memory_endpoint(store, namespace, tls=tls), key, ca)

    async def call(
        self,
        method: str,
        path: str,
        timeout: httpx.Timeout,
        body: Any = None,
        attempts: int = CONNECT_ATTEMPTS,
    ) -> httpx.Response:
        """One request; a connection that could not be made is retried `attempts` times."""
        url = f"{self.endpoint}{path}"
        headers = {"Authorization": f"Token {self._key}"}
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                async with httpx.AsyncClient(verify=self._verify, timeout=timeout) as http:
                    return await http.request(method, url, json=body, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent
                last = exc
                if attempt + 1 < attempts:
                    await asyncio.sleep(2.0 * (attempt + 1))
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                raise ConnectionDropped(
                    f"the memory service at {self.endpoint} did not answer {method} {path}: "
                    f"{type(exc).__name__}"
                ) from None
            except httpx.HTTPError as exc:
                raise ServiceError(
                    f"the memory service at {self.endpoint} did not answer {method} {path}: "
                    f"{type(exc).__name__}"
                ) from None
        raise ServiceError(
            f"cannot reach the memory service at {self.endpoint}: {type(last).__name__} "
            f"({attempts} attempts)"
        )


def detail(response: httpx.Response) -> str:
    """The service's error `detail` (never echoes a header, so never the key)."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = detail if isinstance(detail, str) else response.reason_phrase
    return f"HTTP {response.status_code}: {text}"[:2000]
