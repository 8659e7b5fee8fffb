"""The real Qdrant of the tests (memorystore_dev.qdrant, the vendored binary): it is what the
managed tier runs, so the harness is held to what the StatefulSet promises: the API key is
required, TLS is verified against the store's CA, a kill loses nothing acknowledged, the
server stops by PID, and three peers bootstrapped from the first form one cluster that keeps a
replicated collection answering with a peer down."""

from __future__ import annotations

import os
import socket
import ssl
import uuid

import httpx
import pytest
from qdrant_client import models

from memorystore_dev.qdrant import QdrantCluster, QdrantServer

pytestmark = pytest.mark.timeout(300)


def test_the_api_key_is_required_and_readyz_is_open():
    with QdrantServer() as qdrant:
        assert httpx.get(f"{qdrant.url}/collections").status_code == 401
        wrong = httpx.get(f"{qdrant.url}/collections", headers={"api-key": "nope"})
        assert wrong.status_code == 401
        with qdrant.http() as http:
            assert http.get("/collections").status_code == 200
        # what the probes rely on: /readyz and /livez answer without the key
        assert httpx.get(f"{qdrant.url}/readyz").status_code == 200
        assert httpx.get(f"{qdrant.url}/livez").status_code == 200


def test_tls_is_served_from_the_ca_and_plain_http_is_refused():
    with QdrantServer(tls=True) as qdrant:
        assert qdrant.url.startswith("https://") and qdrant.ca is not None
        with qdrant.http() as http:
            assert http.get("/collections").status_code == 200
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{qdrant.url}/readyz", verify=ssl.create_default_context())
        plain = qdrant.url.replace("https://", "http://")
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{plain}/readyz", timeout=3)


def test_a_killed_server_restarts_on_its_storage_with_every_acknowledged_write():
    with QdrantServer() as qdrant:
        client = qdrant.client()
        vectors = models.VectorParams(size=2, distance=models.Distance.COSINE)
        client.create_collection("kept", vectors_config=vectors)
        ids = [str(uuid.uuid4()) for _ in range(50)]
        points = [models.PointStruct(id=i, vector=[1.0, 0.5]) for i in ids]
        client.upsert("kept", points=points, wait=True)
        assert qdrant.proc is not None
        pid = qdrant.proc.pid
        qdrant.kill()
        assert qdrant.proc.returncode == -9 and not os.path.exists(f"/proc/{pid}")
        qdrant.start()
        client = qdrant.client()
        assert client.count("kept", exact=True).count == 50
        assert {str(p.id) for p in client.retrieve("kept", ids=ids)} == set(ids)
    assert not qdrant.root.exists(), "the server's files are removed when it stops"


def test_three_peers_form_one_cluster_and_a_replicated_collection_survives_a_peer_down():
    with QdrantCluster(3) as cluster:
        assert [cluster.peers(i) for i in range(3)] == [3, 3, 3]
        client = cluster.nodes[0].client()
        vectors = models.VectorParams(size=2, distance=models.Distance.COSINE)
        client.create_collection(
            "replicated", vectors_config=vectors, shard_number=3, replication_factor=2
        )
        ids = [str(uuid.uuid4()) for _ in range(30)]
        points = [models.PointStruct(id=i, vector=[1.0, float(n)]) for n, i in enumerate(ids)]
        client.upsert("replicated", points=points, wait=True)
        cluster.nodes[2].kill()
        reader = cluster.nodes[1].client()
        assert reader.count("replicated", exact=True).count == 30
        assert {str(p.id) for p in reader.retrieve("replicated", ids=ids)} == set(ids)


def test_a_port_taken_before_the_first_start_is_picked_again():
    """free_port() hands a port out and lets it go: another process may take it before the
    server binds it (Qdrant then logs the error and runs on without that listener)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        qdrant = QdrantServer()
        qdrant.http_port = taken.getsockname()[1]
        qdrant._write_config()
        try:
            qdrant.start()
            assert qdrant.http_port != taken.getsockname()[1]
            assert qdrant.ready()
        finally:
            qdrant.close()
