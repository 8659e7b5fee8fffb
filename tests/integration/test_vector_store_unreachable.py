"""A Qdrant server that does not answer: the service starts and says why.

The operator no longer probes a tenant's URL (issue 28): an external store's reachability is
what the memory service's /readyz says, so the service must start while the server is away,
name it in /readyz and answer requests with 503 (not hang, not 500); the start-up retries
create the collection once the server answers. Here the server is a loopback port nobody
listens on; recovery against a real server that comes back is issue 29's.
"""

from __future__ import annotations

import time

import httpx
import pytest

from memorystore.config import ServerQdrant, ServiceVectorStore
from memorystore.service.app import create_app
from memorystore.service.ops.runner import UvicornThread, embedded_config
from memorystore_dev.devcluster.cluster import free_port

pytestmark = pytest.mark.timeout(120)


def test_an_unreachable_qdrant_server_is_named_in_readyz_and_requests_get_503(tmp_path):
    port = free_port()  # nothing listens there
    url = f"http://user:hunter2@127.0.0.1:{port}"
    cfg = embedded_config(
        tmp_path / "data", vector_store=ServiceVectorStore(server=ServerQdrant(url=url))
    )
    app = create_app(cfg)  # building the app must not fail: the server may come later
    key = cfg.api_key.resolve("apiKey").get_secret_value()
    with UvicornThread(app) as server:
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        deadline = time.monotonic() + 60
        while True:  # the first attempt has run once the reason names the server
            ready = httpx.get(f"{server.url}/readyz")
            assert ready.status_code == 503, ready.text
            reason = ready.json()["reason"]
            if "cannot be reached" in reason or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert f"Qdrant server at http://127.0.0.1:{port}" in reason, reason
        assert "cannot be reached" in reason, reason
        assert "hunter2" not in reason and "user" not in reason  # no credentials shown
        search = httpx.post(
            f"{server.url}/v3/memories/search/",
            json={"query": "anything", "user_id": "alice"},
            headers={"Authorization": f"Token {key}"},
        )
        assert search.status_code == 503, search.text
        assert search.headers["Retry-After"]
        assert "hunter2" not in search.text
