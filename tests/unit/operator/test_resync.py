"""The resync loop (`resync.py`): every `resync_seconds` of the settings, every store is
listed, the store index refreshed from the same list, and each store reconciled."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

import pytest
from lightkube import ALL_NS

from memorystore.operator import resync as resync_module
from memorystore.operator.reconcile import Reconciler
from memorystore.operator.settings import OperatorSettings


class Listing:
    """Just lightkube's AsyncClient.list over a few stores."""

    def __init__(self, *bodies: dict[str, Any]) -> None:
        self.bodies = list(bodies)

    async def list(self, resource: Any, namespace: str | None = None):
        for body in self.bodies:
            if namespace in (ALL_NS, body["metadata"]["namespace"]):
                yield resource.from_dict({"apiVersion": "memorystore.dev/v1beta1", **body})


class Recorder(Reconciler):
    """Records the reconciles asked for; `enough` is set after `wanted` of them."""

    def __init__(self, client: Any, settings: OperatorSettings, wanted: int) -> None:
        super().__init__(client, settings)
        self.runs: list[tuple[str, str]] = []
        self.wanted = wanted
        self.enough = asyncio.Event()

    async def run_logged(self, namespace: str, name: str) -> None:
        self.runs.append((namespace, name))
        if len(self.runs) >= self.wanted:
            self.enough.set()


def body(name: str, namespace: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {}}


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The loop's sleeps, recorded and not waited for."""
    periods: list[float] = []

    async def sleep(seconds: float) -> None:
        periods.append(seconds)
        await asyncio.sleep(0)

    fake = SimpleNamespace(sleep=sleep, gather=asyncio.gather)
    monkeypatch.setattr(resync_module, "asyncio", fake)
    return periods


async def resync_until_enough(reconciler: Recorder, namespaces: list[str] | None) -> None:
    task = asyncio.create_task(resync_module.resync(reconciler, namespaces))
    try:
        await asyncio.wait_for(reconciler.enough.wait(), timeout=10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_every_period_each_store_of_the_namespaces_is_reconciled(slept):
    client = Listing(body("a", "t"), body("b", "u"))
    reconciler = Recorder(client, OperatorSettings(resync_seconds=7), wanted=2)
    await resync_until_enough(reconciler, ["t"])
    assert reconciler.runs == [("t", "a"), ("t", "a")]  # one per period, namespace t only
    assert slept[:2] == [7, 7]
    assert reconciler.index.namespaces() == {"t"}


async def test_cluster_wide_each_listed_namespace_is_indexed(slept):
    client = Listing(body("a", "t"), body("b", "u"))
    reconciler = Recorder(client, OperatorSettings(), wanted=2)
    await resync_until_enough(reconciler, None)
    assert sorted(reconciler.runs) == [("t", "a"), ("u", "b")]
    assert slept[0] == OperatorSettings().resync_seconds
    assert reconciler.index.namespaces() == {"t", "u"}
