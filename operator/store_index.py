"""The specs of each namespace's MemoryStores, kept in memory for the shared-agent-pods check.

Whether another store of the namespace admits this store's agent pods needs every store's
spec on every reconcile; a list per reconcile would cost the API server one list per store
per resync. The index lists a namespace once, the first time it is asked for, then every live
read and every resync list keeps it current.
"""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient
from pydantic import ValidationError

from memorystore.operator.resources import MemoryStoreResource, as_body
from memorystore.spec import MemoryStoreSpec

__all__ = ["StoreIndex"]


class StoreIndex:
    """The specs of the stores of each namespace, by name. A spec that does not validate is
    None (its own status reports it)."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, MemoryStoreSpec | None]] = {}

    @staticmethod
    def _parse(body: dict[str, Any]) -> MemoryStoreSpec | None:
        try:
            return MemoryStoreSpec.model_validate(body.get("spec") or {})
        except ValidationError:
            return None

    def remember(self, body: dict[str, Any]) -> None:
        """A store as just read, if its namespace is indexed (else the first ask lists it)."""
        meta = body["metadata"]
        stores = self._by_namespace.get(meta["namespace"])
        if stores is not None:
            stores[meta["name"]] = self._parse(body)

    def forget(self, namespace: str, name: str) -> None:
        self._by_namespace.get(namespace, {}).pop(name, None)

    def namespaces(self) -> set[str]:
        return set(self._by_namespace)

    def replace(self, namespace: str, bodies: list[dict[str, Any]]) -> None:
        """One namespace's stores as just listed."""
        self._by_namespace[namespace] = {b["metadata"]["name"]: self._parse(b) for b in bodies}

    async def specs(self, client: AsyncClient, namespace: str) -> dict[str, MemoryStoreSpec | None]:
        """Every store of `namespace` by name, listed from the API the first time."""
        if namespace not in self._by_namespace:
            listing = client.list(MemoryStoreResource, namespace=namespace)
            self.replace(namespace, [as_body(store) async for store in listing])
        return self._by_namespace[namespace]
