"""What agent pods mount: the client ConfigMap (client.yaml, ca.crt) and the client Secret."""

from __future__ import annotations

from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.common import b64, metadata
from memorystore.operator.builders.model import Keys, Owner


def client_config_map(owner: Owner, config_text: str, ca_cert: str | None = None) -> dict[str, Any]:
    """client.yaml, and the CA that signs the service's certificate (public: ca.crt)."""
    data = {names.CLIENT_CONFIG_FILE: config_text}
    if ca_cert:
        data[names.CA_CERT] = ca_cert
    return {
        "apiVersion": "v1",
        "data": data,
        "kind": "ConfigMap",
        "metadata": metadata(owner, names.client_config_map_name(owner.name), names.CLIENT),
    }


def client_secret(owner: Owner, keys: Keys) -> dict[str, Any]:
    """The current service key alone: agent pods mount this, never the keys Secret (Qdrant's
    key). After a rotation it holds the new key; agents re-read the mounted file."""
    return {
        "apiVersion": "v1",
        "data": {names.CLIENT_API_KEY: b64(keys.service_api_key)},
        "kind": "Secret",
        "metadata": metadata(owner, names.client_secret_name(owner.name), names.CLIENT),
        "type": "Opaque",
    }
