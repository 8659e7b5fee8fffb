"""The user's path past `kubectl apply`: the data plane runs on what the operator rendered.

The operator (on the real control plane) turns two MemoryStores into children. Then, per
tenant, the memory-service process starts with exactly the config and key the operator
rendered (read back from the API server), and the AgentScope factory runs with exactly the
client config and key it rendered (written to a directory, as a volume mount would).

What cannot exist here is substituted, and only that: simulated nodes run no containers,
so the service runs as a local process on a loopback address (its listen address), with its
data in a temporary directory, and — no Qdrant server binary being obtainable — the embedded
Qdrant engine instead of the StatefulSet's server. There is no cluster DNS either: the
Service's name resolves to that loopback address (`support.cluster_dns`), so agents use the
rendered https endpoint as is and verify the operator-issued certificate, name included,
against the CA in the client ConfigMap.
"""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from agentscope.message import UserMsg

from memorystore.middleware import MemoryMiddlewareFactory
from memorystore.operator import names
from memorystore.service.ops.runner import wait_until_ready
from memorystore_dev.devcluster.target import Kube
from support.agent_memory import agent_for, hints
from support.cluster_dns import cluster_dns, loopback_address
from support.secret_mount import sync_secret
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

PREFERENCE = "Please make my charts in dark mode by default."
REQUEST = "Draw me a bar chart of monthly sales."


@dataclass
class Tenant:
    store: str
    url: str  # the rendered in-cluster endpoint (https)
    client_config: Path
    proc: subprocess.Popen[bytes]
    verify: ssl.SSLContext  # trusts the store's CA (the client ConfigMap's ca.crt) only


def ready_store(kube: Kube, namespace: str, store: str, spec: str = "{}") -> dict:
    kube.apply(
        f"apiVersion: memorystore.dev/v1beta1\nkind: MemoryStore\n"
        f"metadata: {{name: {store}}}\nspec: {spec}\n",
        "-n",
        namespace,
    )

    def ready() -> dict | None:
        status = kube.get("mstore", store, "-n", namespace).get("status") or {}
        return status if status.get("phase") == "Ready" else None

    return wait_for(ready, timeout=120)


def secret_value(kube: Kube, namespace: str, name: str, key: str) -> str:
    data = kube.get("secret", name, "-n", namespace)["data"]
    return base64.b64decode(data[key]).decode()


@pytest.fixture
def start_tenant(kube: Kube, namespace: str, tmp_path: Path) -> Iterator:
    procs: list[subprocess.Popen[bytes]] = []
    dns: dict[str, str] = {}  # Service host -> the loopback address its service listens on

    def start(store: str) -> Tenant:
        root = tmp_path / store
        (root / "data").mkdir(parents=True)
        # the service: the rendered ConfigMap, its keys from the service-key Secret's mount
        cm = kube.get("configmap", names.memory_config_map_name(store), "-n", namespace)
        service = yaml.safe_load(cm["data"][names.SERVICE_CONFIG_FILE])
        address = loopback_address(names.SERVICE_PORT)
        service["listen"] = {"host": address, "port": names.SERVICE_PORT}
        dns[f"{names.memory_service_name(store)}.{namespace}.svc"] = address
        service["dataDir"] = str(root / "data")
        service["history"] = {"path": str(root / "data" / "history.db")}
        service["vectorStore"] = {
            "embedded": {},
            "collection": service["vectorStore"]["collection"],
        }
        key_dir = root / "service-key"
        sync_secret(kube, namespace, names.service_key_secret_name(store), key_dir)
        for field in ("apiKey", "previousApiKey"):  # same file names, in the local mount
            service[field]["file"] = str(key_dir / Path(service[field]["file"]).name)
        # the serving certificate the operator issued: the <store>-tls Secret's mount
        tls_dir = root / "tls"
        sync_secret(kube, namespace, names.tls_secret_name(store), tls_dir)
        for field in ("certFile", "keyFile"):
            service["tls"][field] = str(tls_dir / Path(service["tls"][field]).name)
        config = root / "service.yaml"
        config.write_text(yaml.safe_dump(service))
        env = dict(os.environ)
        log = (root / "service.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "memorystore", "serve", "--config", str(config)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        # the agent pod's mounts: the client ConfigMap and the client Secret, as files
        mount = root / "agent"
        mount.mkdir()
        ccm = kube.get("configmap", names.client_config_map_name(store), "-n", namespace)
        (mount / names.CA_CERT).write_text(ccm["data"][names.CA_CERT])
        verify = ssl.create_default_context(cafile=str(mount / names.CA_CERT))
        url = names.memory_endpoint(store, namespace)
        wait_until_ready(url, proc, verify=verify)
        client_key = secret_value(
            kube, namespace, names.client_secret_name(store), names.CLIENT_API_KEY
        )
        (mount / names.CLIENT_API_KEY).write_text(client_key)
        client = yaml.safe_load(ccm["data"][names.CLIENT_CONFIG_FILE])
        assert client["endpoint"] == url and url.startswith("https://")
        assert client["tls"] == {"caFile": "/etc/memorystore/client/ca.crt"}
        client["tls"]["caFile"] = str(mount / names.CA_CERT)  # the same file, mounted here
        client["apiKey"] = {"file": str(mount / names.CLIENT_API_KEY)}
        path = mount / names.CLIENT_CONFIG_FILE
        path.write_text(yaml.safe_dump(client))
        return Tenant(store, url, path, proc, verify)

    with cluster_dns(dns):
        yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)


def factory(tenant: Tenant, **toggles: str) -> MemoryMiddlewareFactory:
    env = {"MEMORYSTORE_CLIENT_CONFIG": str(tenant.client_config), **toggles}
    return MemoryMiddlewareFactory.from_env(env)


async def turn(f: MemoryMiddlewareFactory, text: str, reply: str, **kwargs: str):
    agent, model = await agent_for(f, [reply], **kwargs)
    answer = await agent.reply(UserMsg(name="user", content=text))
    await f.drain()
    return answer, model


async def test_the_rendered_config_carries_memory_across_sessions_and_toggles_apply(
    kube: Kube, namespace: str, operator: None, start_tenant
):
    ready_store(kube, namespace, "acme")
    tenant = start_tenant("acme")

    f = factory(tenant)
    try:
        await turn(f, PREFERENCE, "Noted.", session="s1")
        # the rendered config captures per session: s1's exchange becomes memory at its end
        ended = await f.end_session("alice", "assistant", "s1", wait=True)
        assert ended is not None and ended["exchanges"] == 1, ended
        _, model = await turn(f, REQUEST, "Dark-mode chart.", session="s2")
        (call,) = model.calls
        (hint,) = hints(call)
        assert PREFERENCE in hint, "session 2 recalls session 1"
        assert "Noted." not in hint, "assistant replies are not stored"
        assert {"search_memory", "add_memory"} <= set(call.tool_names), "the spec's mode: both"
    finally:
        await f.aclose()

    off = factory(tenant, MEMORYSTORE_ENABLED="false")
    assert await off("alice", "assistant", "s3") == []

    static = factory(tenant, MEMORYSTORE_MODE="static_control")
    try:
        _, model = await turn(static, REQUEST, "Chart.", session="s4")
        (call,) = model.calls
        assert hints(call) and "search_memory" not in call.tool_names
    finally:
        await static.aclose()

    per_agent = factory(tenant, MEMORYSTORE_SCOPE="agent")
    try:
        _, model = await turn(per_agent, REQUEST, "Chart.", agent_id="planner", session="s5")
        (call,) = model.calls
        assert hints(call) == [], "agent scope: the planner has no memory of its own yet"
    finally:
        await per_agent.aclose()

    tenant.proc.terminate()
    tenant.proc.wait(timeout=30)
    fail_open = factory(tenant)  # the service is gone: the factory gives no middleware
    try:
        assert await fail_open("alice", "assistant", "s6") == []
    finally:
        await fail_open.aclose()


async def test_two_tenants_get_separate_keys_services_and_policies_and_cannot_cross(
    kube: Kube, namespace: str, operator: None, start_tenant
):
    ready_store(kube, namespace, "alpha")
    ready_store(kube, namespace, "beta")
    keys = {
        store: secret_value(kube, namespace, names.keys_secret_name(store), names.SERVICE_API_KEY)
        for store in ("alpha", "beta")
    }
    assert keys["alpha"] != keys["beta"]
    for store in ("alpha", "beta"):
        kube.get("service", names.memory_service_name(store), "-n", namespace)
        policy = kube.get("networkpolicy", names.memory_network_policy_name(store), "-n", namespace)
        assert policy["spec"]["podSelector"]["matchLabels"] == names.selector_labels(
            store, "memory-service"
        )

    alpha, beta = start_tenant("alpha"), start_tenant("beta")
    fa = factory(alpha)
    try:
        await turn(fa, PREFERENCE, "Noted.", session="s1")
    finally:
        await fa.aclose()
    # alpha's client key against beta's service: refused, and beta holds nothing of alpha's
    response = httpx.post(
        f"{beta.url}/v3/memories/search/",
        json={"query": "charts", "filters": {"user_id": "alice"}},
        headers={"Authorization": f"Token {keys['alpha']}"},
        verify=beta.verify,
    )
    assert response.status_code == 401
    listed = httpx.post(
        f"{beta.url}/v3/memories/",
        json={"filters": {"user_id": "alice"}},
        headers={"Authorization": f"Token {keys['beta']}"},
        verify=beta.verify,
    )
    assert listed.json()["results"] == []
    # a CA per store: what alpha's agents trust does not vouch for beta's service
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{beta.url}/v1/ping/", verify=alpha.verify)
