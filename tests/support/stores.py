"""MemoryStores in cluster tests: one way to create one."""

from __future__ import annotations

from memorystore.operator.crd import API_VERSION
from memorystore_dev.devcluster.target import Kube


def create_store(kube: Kube, namespace: str, name: str, spec: str = "{}") -> None:
    """`kubectl apply` a MemoryStore with `spec` (YAML flow text, e.g. `{suspend: true}`)."""
    kube.apply(
        f"apiVersion: {API_VERSION}\nkind: MemoryStore\nmetadata: {{name: {name}}}\nspec: {spec}\n",
        "-n",
        namespace,
    )
