"""A store's memory service, reached from outside the cluster: `kubectl port-forward` to its
Service, HTTPS verified against the store's CA under the Service's name (the certificate
holds it, not 127.0.0.1), the store's current key from its client Secret. What an agent pod
mounts, so the plugin needs no more than that pod has."""

from __future__ import annotations

import base64
import contextlib
import ssl
from collections.abc import Iterator

import httpx

from memorystore.kubectl.kube import Kubectl, KubeError
from memorystore.operator import names

__all__ = ["service_client"]


@contextlib.contextmanager
def service_client(kube: Kubectl, store: str, timeout: float = 120) -> Iterator[httpx.Client]:
    """An httpx client of the store's memory service for the block."""
    secret = kube.get("secret", names.client_secret_name(store))
    config = kube.get("configmap", names.client_config_map_name(store))
    if secret is None or config is None:
        raise KubeError(
            f"store {store} has no client Secret or ConfigMap yet (is it Ready? "
            f"kubectl memorystore status {store})"
        )
    key = base64.b64decode(secret["data"][names.CLIENT_API_KEY]).decode()
    ca = (config.get("data") or {}).get(names.CA_CERT)
    service = names.memory_service_name(store)
    with kube.port_forward(f"service/{service}", names.SERVICE_PORT) as port:
        verify: ssl.SSLContext | bool = True
        extensions: dict[str, str] = {}
        base = f"http://127.0.0.1:{port}"  # tls.enabled: false
        if ca is not None:
            base = f"https://127.0.0.1:{port}"
            verify = ssl.create_default_context(cadata=ca)
            # SNI and the name checked: the Service's, as agents reach it
            extensions = {"sni_hostname": f"{service}.{kube.namespace}.svc"}
        with httpx.Client(
            base_url=base,
            verify=verify,
            timeout=timeout,
            headers={"Authorization": f"Token {key}"},
        ) as http:
            http.event_hooks["request"] = [lambda request: request.extensions.update(extensions)]
            yield http
