"""Rotating a tenant's service key on the real control plane, with no downtime.

The operator runs against the real API server (resync every 2 s). A store is seeded with
the key generated into `<store>-keys`; bumping `spec.serviceKey.rotation` rotates it: the
`<store>-service-key` Secret holds the new key and the old one (until the grace deadline),
the client Secret agents mount holds the new key, status and an Event report generation
and deadline. After the 60 s grace period the old key is removed.

Meanwhile the real memory service runs from the rendered config, its key files kept in
sync with the Secret as kubelet keeps a Secret volume (`support.secret_mount`), and the real
agent-side client reads the client Secret's key file: one service process and one client
live through the whole rotation. Simulated nodes run no containers, so the service runs
as a local process on loopback with the embedded Qdrant engine (as in test_data_plane.py);
TLS, covered by its own tests, is left out of the local copies of the configs.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from memorystore.config import ClientConfig
from memorystore.middleware import MemoryMiddlewareFactory
from memorystore.operator import names
from memorystore.service.ops.runner import wait_until_ready
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.devcluster.target import Kube
from support.secret_mount import sync_secret
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(420)

STORE = "rot"
GRACE = 60


def secret(kube: Kube, namespace: str, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(decoded data, annotations) of a Secret."""
    obj = kube.get("secret", name, "-n", namespace)
    data = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
    return data, obj["metadata"].get("annotations") or {}


def status(kube: Kube, namespace: str) -> dict:
    return kube.get("mstore", STORE, "-n", namespace).get("status") or {}


def patch_spec(kube: Kube, namespace: str, spec: str, check: bool = True):
    return kube.kubectl(
        "patch", "mstore", STORE, "-n", namespace, "--type=merge", "-p", spec, check=check
    )


def accepted(url: str, key: str) -> bool:
    response = httpx.get(f"{url}/v1/ping/", headers={"Authorization": f"Token {key}"})
    assert response.status_code in (200, 401), response.status_code
    return response.status_code == 200


@pytest.fixture
def service(kube: Kube, namespace: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Yields (url, key dir): the real service on the rendered config and the key mount."""
    cm = kube.get("configmap", names.memory_config_map_name(STORE), "-n", namespace)
    cfg = yaml.safe_load(cm["data"][names.SERVICE_CONFIG_FILE])
    port = free_port()
    cfg["listen"] = {"host": "127.0.0.1", "port": port}
    cfg["dataDir"] = str(tmp_path / "data")
    cfg["history"] = {"path": str(tmp_path / "data" / "history.db")}
    cfg["vectorStore"] = {"embedded": {}, "collection": cfg["vectorStore"]["collection"]}
    cfg.pop("tls", None)
    key_dir = tmp_path / "service-key"
    sync_secret(kube, namespace, names.service_key_secret_name(STORE), key_dir)
    for field in ("apiKey", "previousApiKey"):  # the rendered file names, in the local mount
        cfg[field]["file"] = str(key_dir / Path(cfg[field]["file"]).name)
    (tmp_path / "service.yaml").write_text(yaml.safe_dump(cfg))
    log = (tmp_path / "service.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memorystore", "serve", "--config", str(tmp_path / "service.yaml")],
        env=dict(os.environ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, proc)
        yield url, key_dir
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        print((tmp_path / "service.log").read_text()[-3000:])


def agent_client_config(kube: Kube, namespace: str, url: str, mount: Path) -> ClientConfig:
    """The rendered client.yaml, the client Secret mounted at `mount`, the local endpoint."""
    cm = kube.get("configmap", names.client_config_map_name(STORE), "-n", namespace)
    raw = yaml.safe_load(cm["data"][names.CLIENT_CONFIG_FILE])
    raw.pop("tls", None)
    raw["endpoint"] = url
    raw["apiKey"]["file"] = str(mount / Path(raw["apiKey"]["file"]).name)
    return ClientConfig.model_validate(raw)


def parse(value: str) -> dt.datetime:
    return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


async def test_bumping_rotation_rotates_the_key_without_downtime_and_retires_the_old_one(
    kube: Kube, namespace: str, operator: None, operator_log: Path, tmp_path: Path, request
):
    kube.apply(
        f"apiVersion: memorystore.dev/v1beta1\nkind: MemoryStore\nmetadata: {{name: {STORE}}}\n"
        f"spec: {{serviceKey: {{gracePeriodSeconds: {GRACE}}}}}\n",
        "-n",
        namespace,
    )
    seeded = wait_for(lambda: status(kube, namespace).get("serviceKey"), timeout=120)
    assert seeded == {"generation": 0}

    # seeded from the key generated into <store>-keys: existing agents keep working
    keys, _ = secret(kube, namespace, names.keys_secret_name(STORE))
    k0 = keys[names.SERVICE_API_KEY]
    data, annotations = secret(kube, namespace, names.service_key_secret_name(STORE))
    assert data == {"api-key": k0}
    assert annotations["memorystore.dev/service-key-generation"] == "0"
    assert secret(kube, namespace, names.client_secret_name(STORE))[0] == {"api-key": k0}

    # the data plane: the real service on its mounted keys, a real agent-side client
    url, key_dir = request.getfixturevalue("service")
    agent_mount = tmp_path / "agent"
    sync_secret(kube, namespace, names.client_secret_name(STORE), agent_mount)
    factory = MemoryMiddlewareFactory(agent_client_config(kube, namespace, url, agent_mount))
    client = factory.client
    assert client is not None
    try:
        await client.add(
            [{"role": "user", "content": "I like tea."}], {"user_id": "u"}, infer=False
        )

        # rotate
        before = dt.datetime.now(dt.UTC).replace(microsecond=0)
        patch_spec(kube, namespace, '{"spec": {"serviceKey": {"rotation": 1}}}')
        rotated = wait_for(
            lambda: (
                (status(kube, namespace).get("serviceKey") or {}).get("generation") == 1
                and status(kube, namespace)["serviceKey"]
            ),
            timeout=60,
        )
        deadline = parse(rotated["previousKeyValidUntil"])
        after = dt.datetime.now(dt.UTC)
        assert (
            before + dt.timedelta(seconds=GRACE) <= deadline <= after + dt.timedelta(seconds=GRACE)
        )
        data, annotations = secret(kube, namespace, names.service_key_secret_name(STORE))
        k1 = data["api-key"]
        assert data == {"api-key": k1, "previous-api-key": k0} and k1 != k0 and len(k1) >= 32
        assert annotations["memorystore.dev/service-key-generation"] == "1"
        assert (
            annotations["memorystore.dev/previous-key-valid-until"]
            == (rotated["previousKeyValidUntil"])
        )
        # the client Secret switched in the same reconcile that wrote the status
        assert secret(kube, namespace, names.client_secret_name(STORE))[0] == {"api-key": k1}
        # the <store>-keys Secret is untouched (immutable) and still holds the seed
        assert secret(kube, namespace, names.keys_secret_name(STORE))[0] == keys
        events = kube.get(
            "events", "-n", namespace, "--field-selector", "reason=ServiceKeyRotated"
        )["items"]
        (event,) = events
        assert "generation 1" in event["message"]
        assert rotated["previousKeyValidUntil"] in event["message"]

        # kubelet refreshes the service's mount, then the agent's: nobody is refused
        assert accepted(url, k0) and not accepted(url, k1)  # the old mount
        sync_secret(kube, namespace, names.service_key_secret_name(STORE), key_dir)
        wait_for(lambda: accepted(url, k1), timeout=5)
        assert accepted(url, k0)
        await client.search("tea", {"user_id": "u"}, top_k=5, threshold=0.0)  # still k0
        sync_secret(kube, namespace, names.client_secret_name(STORE), agent_mount)
        found = await client.search("tea", {"user_id": "u"}, top_k=5, threshold=0.0)
        assert [m["memory"] for m in found] == ["I like tea."]
        assert client.key.current() == k1

        # the deadline passes: the operator removes the previous key within a resync round
        expired = wait_for(
            lambda: (
                (s := status(kube, namespace).get("serviceKey"))
                and "previousKeyValidUntil" not in s
                and s
            ),
            timeout=GRACE + 30,
        )
        assert expired == {"generation": 1}
        assert dt.datetime.now(dt.UTC) >= deadline
        data, annotations = secret(kube, namespace, names.service_key_secret_name(STORE))
        assert data == {"api-key": k1}
        assert "memorystore.dev/previous-key-valid-until" not in annotations
        (event,) = kube.get(
            "events", "-n", namespace, "--field-selector", "reason=ServiceKeyExpired"
        )["items"]
        assert "previous key is refused" in event["message"] and event["type"] == "Normal"
        sync_secret(kube, namespace, names.service_key_secret_name(STORE), key_dir)
        assert not (key_dir / "previous-api-key").exists()
        wait_for(lambda: not accepted(url, k0), timeout=15)
        assert accepted(url, k1)
        await client.add(
            [{"role": "user", "content": "And scones."}], {"user_id": "u"}, infer=False
        )
    finally:
        await factory.aclose()

    # the counter only grows, and the grace period has bounds (the CRD refuses, naming them)
    refused = patch_spec(kube, namespace, '{"spec": {"serviceKey": {"rotation": 0}}}', False)
    assert refused.returncode != 0
    assert "spec.serviceKey.rotation can only grow" in refused.stderr
    refused = patch_spec(
        kube, namespace, '{"spec": {"serviceKey": {"gracePeriodSeconds": 5}}}', False
    )
    assert refused.returncode != 0 and "spec.serviceKey.gracePeriodSeconds" in refused.stderr

    # a deleted service-key Secret comes back with the key agents have, never the seed
    kube.kubectl("delete", "secret", names.service_key_secret_name(STORE), "-n", namespace)
    data, _ = wait_for(
        lambda: (
            kube.kubectl(
                "get", "secret", names.service_key_secret_name(STORE), "-n", namespace, check=False
            ).returncode
            == 0
            and secret(kube, namespace, names.service_key_secret_name(STORE))
        ),
        timeout=30,
    )
    assert data == {"api-key": k1}
    warned = kube.get("events", "-n", namespace, "--field-selector", "reason=ServiceKeyRecreated")
    assert [e["type"] for e in warned["items"]] == ["Warning"]

    # no key ever reached the operator's log or an Event
    everything = operator_log.read_text() + str(kube.get("events", "-n", namespace))
    for key in (k0, k1):
        assert key not in everything
