"""The storage version migration (`storage_version.py`): which objects it rewrites, and when
it may say so in the CRD's record. The real API server's part (re-encoding, etcd) is proven
by tests/e2e/test_upgrade.py; here the decisions, over a recording client."""

from __future__ import annotations

import asyncio
import copy
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube import ALL_NS, ApiError
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from memorystore.operator import storage_version
from memorystore.operator.crd import BACKUP_CRD_NAME, CRD_NAME, render_backup_crd, render_crd
from memorystore.spec import VERSION


def _error(code: int) -> ApiError:
    response = httpx.Response(
        code,
        json={"kind": "Status", "code": code, "message": f"answered {code}"},
        request=httpx.Request("PATCH", "https://api/x"),
    )
    return ApiError(request=response.request, response=response)


class Cluster:
    """lightkube's AsyncClient over two CRDs and some stored objects (kind, ns, name)."""

    def __init__(
        self,
        objects: list[tuple[str, str, str]],
        stored: list[str],
        storage: str = VERSION,
        gone: frozenset[str] = frozenset(),
        refuse: int | None = None,
    ) -> None:
        self.objects, self.gone, self.refuse = objects, gone, refuse
        self.crds: dict[str, dict[str, Any]] = {}
        for crd in (render_crd(), render_backup_crd()):
            crd = copy.deepcopy(crd)
            for version in crd["spec"]["versions"]:
                version["storage"] = version["name"] == storage
            crd["status"] = {"storedVersions": list(stored)}
            self.crds[crd["metadata"]["name"]] = crd
        self.rewritten: list[tuple[str, str, str]] = []

    async def get(self, resource: Any, name: str) -> Any:
        assert resource is CustomResourceDefinition
        return CustomResourceDefinition.from_dict(self.crds[name])

    async def list(self, resource: Any, namespace: str):
        for kind, ns, name in self.objects:
            if kind == resource.__name__ and namespace in (ALL_NS, ns):
                yield resource.from_dict(
                    {
                        "apiVersion": f"memorystore.dev/{VERSION}",
                        "kind": kind,
                        "metadata": {"name": name, "namespace": ns},
                    }
                )

    async def patch(self, resource: Any, name: str, obj: Any, **kw: Any) -> None:
        if resource is CustomResourceDefinition.Status:
            self.crds[name]["status"] = copy.deepcopy(obj["status"])
            return
        assert obj == {} and kw["patch_type"].value == "application/merge-patch+json"
        if self.refuse is not None:
            raise _error(self.refuse)
        if name in self.gone:
            raise _error(404)
        self.rewritten.append((resource.__name__, kw["namespace"], name))


OBJECTS = [
    ("MemoryStore", "a", "one"),
    ("MemoryStore", "b", "two"),
    ("MemoryStoreBackup", "a", "nightly"),
]


def _run(cluster: Cluster, namespaces: list[str] | None) -> storage_version.Migrated:
    return asyncio.run(storage_version.migrate(cluster, namespaces))  # type: ignore[arg-type]


def test_watching_every_namespace_rewrites_every_object_then_the_record():
    cluster = Cluster(OBJECTS, stored=["v1alpha1", VERSION])
    done = _run(cluster, None)
    assert sorted(cluster.rewritten) == sorted(OBJECTS)
    assert done.rewritten == {CRD_NAME: 2, BACKUP_CRD_NAME: 1}
    assert done.recorded == {CRD_NAME: True, BACKUP_CRD_NAME: True}
    for crd in cluster.crds.values():
        assert crd["status"]["storedVersions"] == [VERSION]


def test_watching_some_namespaces_rewrites_theirs_and_leaves_the_record():
    cluster = Cluster(OBJECTS, stored=["v1alpha1", VERSION])
    done = _run(cluster, ["a"])
    assert sorted(cluster.rewritten) == [
        ("MemoryStore", "a", "one"),
        ("MemoryStoreBackup", "a", "nightly"),
    ]
    assert done.recorded == {CRD_NAME: False, BACKUP_CRD_NAME: False}
    for crd in cluster.crds.values():
        assert crd["status"]["storedVersions"] == ["v1alpha1", VERSION]


def test_nothing_is_done_before_the_crd_stores_the_new_version():
    cluster = Cluster(OBJECTS, stored=["v1alpha1"], storage="v1alpha1")
    done = _run(cluster, None)
    assert cluster.rewritten == []
    assert done.recorded == {CRD_NAME: None, BACKUP_CRD_NAME: None}
    assert cluster.crds[CRD_NAME]["status"]["storedVersions"] == ["v1alpha1"]


def test_nothing_is_rewritten_once_the_record_names_the_new_version_alone():
    cluster = Cluster(OBJECTS, stored=[VERSION])
    assert _run(cluster, None).rewritten == {CRD_NAME: 0, BACKUP_CRD_NAME: 0}
    assert cluster.rewritten == []


def test_an_object_deleted_since_the_list_is_not_a_failure():
    cluster = Cluster(OBJECTS, stored=["v1alpha1", VERSION], gone=frozenset({"two"}))
    assert _run(cluster, None).rewritten == {CRD_NAME: 1, BACKUP_CRD_NAME: 1}
    assert cluster.crds[CRD_NAME]["status"]["storedVersions"] == [VERSION]


def test_a_refused_rewrite_never_updates_the_record_and_is_retried(
    monkeypatch: pytest.MonkeyPatch,
):
    cluster = Cluster(OBJECTS, stored=["v1alpha1", VERSION], refuse=403)
    with pytest.raises(ApiError):
        _run(cluster, None)
    assert cluster.crds[CRD_NAME]["status"]["storedVersions"] == ["v1alpha1", VERSION]

    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 6:
            cluster.refuse = None  # e.g. the RBAC was fixed

    monkeypatch.setattr(storage_version, "asyncio", SimpleNamespace(sleep=sleep))
    asyncio.run(storage_version.keep_migrating(cluster, None))  # type: ignore[arg-type]
    assert pauses == [5.0, 30.0, 120.0, 300.0, 300.0, 300.0]
    assert cluster.crds[CRD_NAME]["status"]["storedVersions"] == [VERSION]


@settings(max_examples=60, deadline=None)
@given(
    objects=st.lists(
        st.tuples(
            st.sampled_from(["MemoryStore", "MemoryStoreBackup"]),
            st.sampled_from(["a", "b", "c"]),
            st.text("abcdefgh", min_size=1, max_size=4),
        ),
        unique=True,
        max_size=12,
    ),
    watched=st.none() | st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, unique=True),
)
def test_every_watched_object_is_rewritten_once_and_the_record_only_when_all_are_seen(
    objects: list[tuple[str, str, str]], watched: list[str] | None
):
    cluster = Cluster(objects, stored=["v1alpha1", VERSION])
    _run(cluster, watched)
    expected = [o for o in objects if watched is None or o[1] in watched]
    assert sorted(cluster.rewritten) == sorted(expected)
    record = cluster.crds[CRD_NAME]["status"]["storedVersions"]
    assert record == ([VERSION] if watched is None else ["v1alpha1", VERSION])
