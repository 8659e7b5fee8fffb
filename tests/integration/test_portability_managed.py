"""Backups, restores and exports of a managed store, for real: the memory service on a real
Qdrant server (the vendored binary, TLS with its CA and the API key, as the operator runs
it), its collection scrolled into a backup and written back by the real
`memorystore restore` command.

What is promised: a managed store's backup restores into a new managed store (its own,
empty collection) and answers the same searches with the same memories, scores, history and
retired state; the same backup restores into the embedded engine with the same memories
(the backup is the engine's, not the tier's); a user's export from a managed store imports
into another one unchanged. The embedded tier's backups and their hostile cases are
test_backup*.py; these are the managed tier's round trips.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memorystore.config import ServiceConfig, ServiceVectorStore
from memorystore.service.ops.runner import ServiceThread
from memorystore_dev.qdrant import QdrantServer
from support.backups import (
    answers,
    every,
    fill,
    restore_cli,
    signing_key_file,
    store_config,
    write_config,
)
from support.backups import client as service_client

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

USER = "alice"  # support.backups.FACTS: four facts of hers
SCHEMA = '{"type": "object", "properties": {"memories": {"type": "array"}}}'


@pytest.fixture(scope="module")
def qdrant() -> Iterator[QdrantServer]:
    with QdrantServer(tls=True) as server:
        yield server


def managed(
    tmp: Path, name: str, qdrant: QdrantServer, target: Path | None = None
) -> ServiceConfig:
    """A store of its own (data dir and collection) on the server, as a managed store is."""
    cfg = store_config(tmp, name, target)
    cfg.vector_store = ServiceVectorStore(server=qdrant.service_config(), collection=name)
    return cfg


def restore(tmp: Path, cfg: ServiceConfig, source: Path) -> dict[str, object]:
    config = write_config(cfg, tmp / f"{cfg.vector_store.collection}.yaml")
    done = restore_cli(config, source, signing_key_file(tmp))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def collection_size(qdrant: QdrantServer, name: str) -> int:
    with qdrant.http() as http:
        return http.post(f"/collections/{name}/points/count", json={"exact": True}).json()[
            "result"
        ]["count"]


def test_a_managed_backup_restores_into_a_new_managed_store_and_into_the_embedded_engine(
    tmp_path: Path, qdrant: QdrantServer
) -> None:
    target = tmp_path / "backups"
    target.mkdir()
    source = managed(tmp_path, "source", qdrant, target)
    with ServiceThread(source) as svc, service_client(svc) as http:
        fill(http)
        before = answers(http)
        made = http.post("/v1/backups/", json={"name": "managed-1"})
        assert made.status_code == 200, made.text
        manifest = made.json()
    assert manifest["memories"] == collection_size(qdrant, "source") > 0

    summary = restore(tmp_path, managed(tmp_path, "restored", qdrant), target / "managed-1")
    assert summary["restored"] is True and summary["memories"] == manifest["memories"]
    assert collection_size(qdrant, "restored") == manifest["memories"]
    with (
        ServiceThread(managed(tmp_path, "restored", qdrant)) as svc2,
        service_client(svc2) as http2,
    ):
        after = answers(http2)
        assert after == before  # searches (ids, scores), listings, retired ones, history
        ended = http2.post("/v1/sessions/walk/end/", json={"user_id": "carol", "wait": True})
        assert ended.status_code == 200 and ended.json()["exchanges"] == 1, ended.text

    embedded = store_config(tmp_path, "embedded")
    summary = restore(tmp_path, embedded, target / "managed-1")
    assert summary["restored"] is True and summary["memories"] == manifest["memories"]
    with ServiceThread(embedded) as svc3, service_client(svc3) as http3:
        there = answers(http3)
        assert there["list"] == before["list"] and there["history"] == before["history"]
        for asked, hits in before["search"].items():  # another engine: the same ranking
            assert [i for i, _ in there["search"][asked]] == [i for i, _ in hits], asked
            for (_, score), (_, theirs) in zip(there["search"][asked], hits, strict=True):
                assert abs(score - theirs) < 1e-3, asked


def test_an_export_from_a_managed_store_imports_into_another_unchanged(
    tmp_path: Path, qdrant: QdrantServer
) -> None:
    with (
        ServiceThread(managed(tmp_path, "exporter", qdrant)) as one,
        ServiceThread(managed(tmp_path, "importer", qdrant)) as other,
        service_client(one) as http,
        service_client(other) as http2,
    ):
        fill(http)
        listed = every(http, user_id=USER)
        made = http.post("/v1/exports/", json={"schema": SCHEMA, "user_id": USER})
        assert made.status_code == 200, made.text
        export = http.post("/v1/exports/get/", json={"memory_export_id": made.json()["id"]})
        document = export.raise_for_status().json()
        assert len(document["memories"]) == len(listed) > 0
        imported = http2.post("/v1/imports/", json=document).raise_for_status().json()
        assert imported["imported"] == len(listed) and imported["skipped"] == []
        assert every(http2, user_id=USER) == listed  # ids, texts, hashes, times, metadata
        assert collection_size(qdrant, "importer") == len(listed)
