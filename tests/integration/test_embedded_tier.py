"""spec.vectorStore.embedded: the memory service runs on exactly the config the operator
renders for it, with the real Qdrant engine in its process and its files on the data volume.

The pod's mounts become directories here (the data volume, the service-key Secret); every
other field of the rendered file is used as is. A second process on the same volume is
refused by the engine's lock, which is why the CRD allows at most one replica.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from memorystore.config import ServiceConfig, load_model
from memorystore.operator.builders import paths
from memorystore.operator.builders.configs import render_service_config, service_config
from memorystore.operator.builders.model import Owner
from memorystore.service.ops.runner import ServiceThread
from memorystore.spec import MemoryStoreSpec

pytestmark = pytest.mark.timeout(300)

OWNER = Owner(name="acme", namespace="tenants", uid="u", generation=1)
KEY = "embedded-tier-test-key-0123456789"


def rendered_config(tmp_path: Path) -> Path:
    """The operator's service.yaml for an embedded store, its mounts mapped under tmp_path."""
    spec = MemoryStoreSpec.model_validate(
        {"vectorStore": {"embedded": {}}, "tls": {"enabled": False}}
    )
    data: dict[str, Any] = yaml.safe_load(render_service_config(OWNER, service_config(OWNER, spec)))
    volume, keys = tmp_path / "data", tmp_path / "service-key"
    volume.mkdir()
    keys.mkdir()
    (keys / "api-key").write_text(KEY + "\n")

    def on_volume(path: str) -> str:
        # everything the service writes lies on the data volume's mount
        assert path == paths.DATA_DIR or path.startswith(paths.DATA_DIR + "/"), path
        return str(volume) + path.removeprefix(paths.DATA_DIR)

    data["dataDir"] = on_volume(data["dataDir"])
    data["history"]["path"] = on_volume(data["history"]["path"])
    data["vectorStore"]["embedded"]["path"] = on_volume(data["vectorStore"]["embedded"]["path"])
    for field in ("apiKey", "previousApiKey"):
        assert data[field]["file"].startswith(paths.SERVICE_KEY_DIR + "/")
        data[field]["file"] = str(keys / Path(data[field]["file"]).name)
    assert data["listen"] == {"host": "0.0.0.0", "port": 8765}
    data["listen"] = {"host": "127.0.0.1", "port": 0}  # a free loopback port here
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_rendered_embedded_config_serves_and_keeps_the_engine_on_the_volume(tmp_path: Path):
    config = rendered_config(tmp_path)
    cfg = load_model(ServiceConfig, config)
    assert cfg.vector_store.embedded is not None and cfg.vector_store.server is None
    headers = {"Authorization": f"Token {KEY}"}
    with ServiceThread(cfg) as svc, httpx.Client(base_url=svc.url, timeout=60) as http:
        assert http.get("/readyz").json() == {"status": "ok"}
        added = http.post(
            "/v3/memories/add/",
            json={
                "messages": [{"role": "user", "content": "I keep bees on the roof."}],
                "user_id": "alice",
                "infer": False,
            },
            headers=headers,
        )
        assert added.status_code == 200, added.text
        found = http.post(
            "/v3/memories/search/",
            json={"query": "what animals do I keep?", "user_id": "alice"},
            headers=headers,
        ).json()["results"]
        assert any("bees" in hit["memory"] for hit in found)

        # The engine's shard and the history are on the volume, nowhere else.
        volume = tmp_path / "data"
        assert (volume / "qdrant" / "memories").is_dir()
        assert (volume / "history.db").is_file()

        # A second replica on the same volume cannot open the engine: it exits, naming why,
        # and the running service keeps serving what it stored.
        second = subprocess.run(
            [sys.executable, "-m", "memorystore", "serve", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert second.returncode == 1, second.stderr[-2000:]
        assert "memorystore serve: cannot start" in second.stderr
        assert "failed to open WAL" in second.stderr and "qdrant/memories" in second.stderr
        assert KEY not in second.stderr + second.stdout
        assert http.get("/readyz").status_code == 200
        again = http.post(
            "/v3/memories/search/",
            json={"query": "bees", "user_id": "alice"},
            headers=headers,
        ).json()["results"]
        assert any("bees" in hit["memory"] for hit in again)

    # Stopped (as a pod is on Recreate), the volume opens again with everything on it.
    reopened = load_model(ServiceConfig, config)
    with ServiceThread(reopened) as svc, httpx.Client(base_url=svc.url, timeout=60) as http:
        assert http.get("/readyz").status_code == 200
        listed = http.post(
            "/v3/memories/search/", json={"query": "bees", "user_id": "alice"}, headers=headers
        ).json()["results"]
        assert any("bees" in hit["memory"] for hit in listed)
