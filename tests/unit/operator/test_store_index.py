"""The store index (`store_index.py`): one list per namespace, then kept current by reads."""

from __future__ import annotations

from typing import Any

from memorystore.operator.store_index import StoreIndex
from memorystore.spec import MemoryStoreSpec


def store(name: str, namespace: str = "t", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


class Listing:
    """Just lightkube's AsyncClient.list, counting the calls."""

    def __init__(self, *bodies: dict[str, Any]) -> None:
        self.bodies = list(bodies)
        self.lists: list[str] = []

    async def list(self, resource: Any, namespace: str | None = None):
        self.lists.append(str(namespace))
        for body in self.bodies:
            if body["metadata"]["namespace"] == namespace:
                yield resource.from_dict({"apiVersion": "memorystore.dev/v1beta1", **body})


async def test_a_namespace_is_listed_once_then_kept_current_by_reads():
    client = Listing(store("a"), store("b", scope="agent"), store("c", namespace="other"))
    index = StoreIndex()
    specs = await index.specs(client, "t")  # type: ignore[arg-type]
    assert set(specs) == {"a", "b"} and specs["b"] == MemoryStoreSpec(scope="agent")
    index.remember(store("d"))
    index.forget("t", "a")
    assert set(await index.specs(client, "t")) == {"b", "d"}  # type: ignore[arg-type]
    assert client.lists == ["t"]
    assert index.namespaces() == {"t"}


async def test_a_store_of_an_unlisted_namespace_waits_for_its_list():
    client = Listing(store("c", namespace="other"))
    index = StoreIndex()
    index.remember(store("x", namespace="other"))  # not indexed yet: the list decides
    assert set(await index.specs(client, "other")) == {"c"}  # type: ignore[arg-type]


def test_an_invalid_spec_is_none_and_a_list_replaces_a_namespace():
    index = StoreIndex()
    index.replace("t", [store("bad", scope="nobody"), store("good")])
    assert index._by_namespace["t"] == {"bad": None, "good": MemoryStoreSpec()}
    index.replace("t", [])
    assert index._by_namespace["t"] == {}
