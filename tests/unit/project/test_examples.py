"""The example manifests users apply are valid against the spec model (the CRD's source)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memorystore.spec import GROUP, KIND, VERSION, MemoryStoreSpec
from support.paths import REPO

EXAMPLES = REPO / "examples"
MANIFESTS = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name != "service.yaml")


def test_the_readme_example_exists():
    assert EXAMPLES / "memorystore.yaml" in MANIFESTS


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_example_is_a_valid_memorystore(path: Path):
    doc = yaml.safe_load(path.read_text())
    assert doc["apiVersion"] == f"{GROUP}/{VERSION}" and doc["kind"] == KIND
    MemoryStoreSpec.model_validate(doc["spec"])
