"""TLS on the real control plane: the operator's CA and serving certificate, renewal on
reconcile, what agents get, and the cert-manager path (missing, pending, issued, handed back).

The operator runs as users run it (`memorystore operator`, resync every 2 s) against a real
kube-apiserver. cert-manager itself cannot run here: its API is installed as a bare CRD, and
the test writes the Secret cert-manager would write.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509

from memorystore.operator import names, tls
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.devcluster.target import Kube
from memorystore_dev.metrics_text import sample_sum
from support.stores import create_store
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

CERT_MANAGER_CRD = "certificates.cert-manager.io"


@pytest.fixture
def metrics_port(run_operator: Callable[..., subprocess.Popen[bytes]]) -> int:
    """A running operator; the port of its metrics (to count its reconciles)."""
    port = free_port()
    run_operator(metrics_port=port)
    return port


def reconciles(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sample_sum(
        text,
        "memorystore_operator_reconciles_total",
        lambda labels: labels.get("outcome") == "applied",
    )


def wait_for_reconciles(port: int, more: int) -> None:
    start = reconciles(port)
    wait_for(lambda: reconciles(port) >= start + more, timeout=60)


def status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return kube.get("mstore", name, "-n", namespace).get("status") or {}


def condition(kube: Kube, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in status(kube, namespace, name).get("conditions", []) if c["type"] == type_), None
    )


def secret(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    result = kube.kubectl("get", "secret", name, "-n", namespace, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def decoded(obj: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}


def cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def version(kube: Kube, namespace: str, kind: str, name: str) -> str:
    return kube.get(kind, name, "-n", namespace)["metadata"]["resourceVersion"]


def put_tls(kube: Kube, namespace: str, name: str, data: dict[str, str]) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    kube.kubectl(
        "patch",
        "secret",
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"data": encoded}),
    )


def no_private_key_outside_secrets(kube: Kube, namespace: str, store: str, log: Path) -> None:
    """Keys only in Secrets: not in ConfigMaps, the store's status, Events or the log."""
    texts = [
        json.dumps(kube.get("configmaps", "-n", namespace)),
        json.dumps(kube.get("mstore", store, "-n", namespace)),
        json.dumps(kube.get("events", "-n", namespace)),
        log.read_text(),
    ]
    for text in texts:
        assert "PRIVATE KEY" not in text
        assert base64.b64encode(b"-----BEGIN PRIVATE KEY").decode()[:20] not in text


def test_the_operator_issues_verifies_and_renews_the_serving_certificate(
    kube: Kube, namespace: str, metrics_port: int, operator_log: Path
):
    store = "t"
    create_store(kube, namespace, store)
    ready = wait_for(
        lambda: (
            status(kube, namespace, store).get("phase") == "Ready"
            and status(kube, namespace, store)
        ),
        timeout=120,
    )
    endpoint = f"https://{names.memory_service_name(store)}.{namespace}.svc:{names.SERVICE_PORT}"
    assert ready["endpoint"] == endpoint == names.memory_endpoint(store, namespace)

    # the CA: never mounted; the serving certificate: signed by it, for the Service's names
    ca_secret = secret(kube, namespace, names.ca_secret_name(store))
    tls_secret = secret(kube, namespace, names.tls_secret_name(store))
    assert ca_secret is not None and tls_secret is not None
    assert tls_secret["type"] == "kubernetes.io/tls"
    ca, served = decoded(ca_secret), decoded(tls_secret)
    assert set(ca) == {"ca.crt", "ca.key"} and set(served) == {"tls.crt", "tls.key", "ca.crt"}
    assert served["ca.crt"] == ca["ca.crt"]
    leaf = cert(served["tls.crt"])
    leaf.verify_directly_issued_by(cert(ca["ca.crt"]))
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == names.memory_dns_names(store, namespace)
    # the managed Qdrant's certificate: the same CA, for its Service and every peer
    qdrant_tls = decoded(secret(kube, namespace, names.qdrant_tls_secret_name(store)))
    assert qdrant_tls["ca.crt"] == ca["ca.crt"]
    peer = cert(qdrant_tls["tls.crt"])
    peer.verify_directly_issued_by(cert(ca["ca.crt"]))
    peer_sans = peer.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert peer_sans.get_values_for_type(x509.DNSName) == names.qdrant_dns_names(store, namespace)
    assert (
        tls.serving_problem(
            served["tls.crt"],
            served["tls.key"],
            ca["ca.crt"],
            names.memory_dns_names(store, namespace),
            dt.datetime.now(dt.UTC),
            dt.timedelta(days=30),
            dt.timedelta(days=90),
        )
        is None
    )
    # Retain (the default): the CA outlives the store like the keys; the leaf is owned
    assert not ca_secret["metadata"].get("ownerReferences")
    assert tls_secret["metadata"]["ownerReferences"][0]["name"] == store

    # what agents mount: the CA (public) beside client.yaml, which points at it
    client_cm = kube.get("configmap", names.client_config_map_name(store), "-n", namespace)
    assert client_cm["data"]["ca.crt"] == ca["ca.crt"]
    client = yaml.safe_load(client_cm["data"]["client.yaml"])
    assert client["endpoint"] == endpoint
    assert client["tls"] == {"caFile": "/etc/memorystore/client/ca.crt"}

    # the service pod: the leaf (cert and key only), HTTPS probes, no CA key anywhere
    deployment = kube.get("deployment", names.memory_deployment_name(store), "-n", namespace)
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == names.tls_secret_name(store)
    assert [i["key"] for i in volumes["tls"]["secret"]["items"]] == ["tls.crt", "tls.key"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    mounted = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert names.ca_secret_name(store) not in mounted  # the CA's key stays in its Secret
    assert names.qdrant_tls_secret_name(store) in mounted  # Qdrant's ca.crt, to verify it
    (qdrant_ca,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") ==
                    names.qdrant_tls_secret_name(store)]  # fmt: skip
    assert [i["key"] for i in qdrant_ca["secret"]["items"]] == ["ca.crt"]
    service = kube.get("service", names.memory_service_name(store), "-n", namespace)
    assert service["spec"]["ports"][0]["name"] == "https"

    # a reconcile that finds everything current writes nothing
    watched = {
        ("secret", names.ca_secret_name(store)): None,
        ("secret", names.tls_secret_name(store)): None,
        ("configmap", names.client_config_map_name(store)): None,
        ("deployment", names.memory_deployment_name(store)): None,
    }
    for kind, name in watched:
        watched[(kind, name)] = version(kube, namespace, kind, name)
    wait_for_reconciles(metrics_port, 3)
    for (kind, name), before in watched.items():
        assert version(kube, namespace, kind, name) == before, f"{kind}/{name} was rewritten"

    # near expiry: 10 days left, renewBeforeDays 30. Renewed under the same CA, and neither
    # the pods (no template change) nor the agents' CA are touched.
    ca_issued = tls.Issued(ca["ca.crt"], ca["ca.key"])
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=80)
    expiring = tls.issue_serving(
        ca_issued, names.memory_dns_names(store, namespace), old, dt.timedelta(days=90)
    )
    put_tls(
        kube,
        namespace,
        names.tls_secret_name(store),
        {"tls.crt": expiring.cert, "tls.key": expiring.key},
    )

    def renewed() -> dict[str, str] | None:
        now = decoded(secret(kube, namespace, names.tls_secret_name(store)) or {})
        return now if tls.serial(now["tls.crt"]) != tls.serial(expiring.cert) else None

    fresh = wait_for(renewed, timeout=30)
    new_leaf = cert(fresh["tls.crt"])
    new_leaf.verify_directly_issued_by(cert(ca["ca.crt"]))
    remaining = new_leaf.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=89) < remaining <= dt.timedelta(days=90)
    assert fresh["tls.key"] != expiring.key and fresh["ca.crt"] == ca["ca.crt"]
    for kind, name in (
        ("secret", names.ca_secret_name(store)),
        ("configmap", names.client_config_map_name(store)),
        ("deployment", names.memory_deployment_name(store)),
    ):
        assert version(kube, namespace, kind, name) == watched[(kind, name)], f"{kind}/{name}"

    # tampered: a certificate from another CA (and the right names) is replaced
    impostor = tls.issue_serving(
        tls.issue_ca(store, dt.datetime.now(dt.UTC)),
        names.memory_dns_names(store, namespace),
        dt.datetime.now(dt.UTC),
        dt.timedelta(days=90),
    )
    put_tls(
        kube,
        namespace,
        names.tls_secret_name(store),
        {"tls.crt": impostor.cert, "tls.key": impostor.key},
    )
    wait_for(
        lambda: (
            tls.serial(decoded(secret(kube, namespace, names.tls_secret_name(store)))["tls.crt"])
            not in (tls.serial(impostor.cert), tls.serial(expiring.cert))
        ),
        timeout=30,
    )
    cert(
        decoded(secret(kube, namespace, names.tls_secret_name(store)))["tls.crt"]
    ).verify_directly_issued_by(cert(ca["ca.crt"]))
    # deleted: issued again
    kube.kubectl("delete", "secret", names.tls_secret_name(store), "-n", namespace)
    wait_for(lambda: secret(kube, namespace, names.tls_secret_name(store)), timeout=30)

    no_private_key_outside_secrets(kube, namespace, store, operator_log)


def test_tls_off_serves_plain_http_and_issues_nothing(
    kube: Kube, namespace: str, metrics_port: int
):
    # Qdrant's own TLS off too: with it, the store's CA would exist for Qdrant's certificate
    spec = "{tls: {enabled: false}, vectorStore: {managed: {tls: false}}}"
    create_store(kube, namespace, "plain", spec)
    ready = wait_for(
        lambda: (
            status(kube, namespace, "plain").get("phase") == "Ready"
            and status(kube, namespace, "plain")
        ),
        timeout=120,
    )
    assert ready["endpoint"] == names.memory_endpoint("plain", namespace, tls=False)
    assert ready["endpoint"].startswith("http://")
    assert secret(kube, namespace, names.ca_secret_name("plain")) is None
    assert secret(kube, namespace, names.tls_secret_name("plain")) is None
    client_cm = kube.get("configmap", names.client_config_map_name("plain"), "-n", namespace)
    assert set(client_cm["data"]) == {"client.yaml"}


@pytest.fixture
def cert_manager_api(kube: Kube) -> Iterator[None]:
    """cert-manager's Certificate API without its controller (a bare CRD), removed after."""
    existed = kube.kubectl("get", "crd", CERT_MANAGER_CRD, check=False).returncode == 0
    if existed:
        pytest.skip("this cluster runs cert-manager: the 'not installed' path cannot be shown")
    yield
    kube.kubectl("delete", "crd", CERT_MANAGER_CRD, "--ignore-not-found", "--timeout=60s")


BARE_CERT_MANAGER_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: certificates.cert-manager.io}
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Certificate, listKind: CertificateList, plural: certificates, singular: certificate}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def test_the_cert_manager_path_from_missing_to_issued_and_back(
    kube: Kube, namespace: str, metrics_port: int, cert_manager_api: None, operator_log: Path
):
    store = "cm"
    spec = (  # Qdrant's TLS off: the operator's own CA would otherwise sign its certificate
        "{tls: {issuerRef: {name: tenant-ca, kind: ClusterIssuer}, "
        "durationDays: 30, renewBeforeDays: 10}, vectorStore: {managed: {tls: false}}}"
    )
    create_store(kube, namespace, store, spec)

    # 1. cert-manager is not installed: a condition naming the field, no crash, nothing issued
    missing = wait_for(
        lambda: (
            (c := condition(kube, namespace, store, "ServiceReady"))
            and c["reason"] == "CertManagerMissing"
            and c
        ),
        timeout=60,
    )
    assert "spec.tls.issuerRef" in missing["message"] and "cert-manager" in missing["message"]
    # once Qdrant is up, the missing certificate is what keeps the store from Ready
    ready = wait_for(
        lambda: (
            (c := condition(kube, namespace, store, "Ready"))
            and c["reason"] == "CertManagerMissing"
            and c
        ),
        timeout=60,
    )
    assert ready["status"] == "False" and ready["message"] == missing["message"]
    assert status(kube, namespace, store)["phase"] == "Pending"
    assert secret(kube, namespace, names.ca_secret_name(store)) is None
    assert secret(kube, namespace, names.tls_secret_name(store)) is None
    assert "Traceback" not in operator_log.read_text()

    # 2. its API appears: the operator applies the Certificate and waits for the Secret
    kube.apply(BARE_CERT_MANAGER_CRD)
    kube.wait_established(CERT_MANAGER_CRD)
    wait_for(
        lambda: (
            (c := condition(kube, namespace, store, "ServiceReady"))
            and c["reason"] == "CertificatePending"
        ),
        timeout=60,
    )
    certificate = kube.get(
        "certificates.cert-manager.io", names.certificate_name(store), "-n", namespace
    )
    assert certificate["spec"]["secretName"] == names.tls_secret_name(store)
    assert certificate["spec"]["issuerRef"] == {
        "group": "cert-manager.io",
        "kind": "ClusterIssuer",
        "name": "tenant-ca",
    }
    assert certificate["spec"]["dnsNames"] == names.memory_dns_names(store, namespace)
    assert (certificate["spec"]["duration"], certificate["spec"]["renewBefore"]) == ("720h", "240h")
    assert certificate["spec"]["privateKey"]["rotationPolicy"] == "Always"
    assert certificate["metadata"]["ownerReferences"][0]["name"] == store
    assert secret(kube, namespace, names.ca_secret_name(store)) is None  # it issues nothing

    # 3. "cert-manager" issues: the client ConfigMap gets the issuer's CA, the store goes Ready
    issuer_ca = tls.issue_ca("tenant-ca", dt.datetime.now(dt.UTC))
    issued = tls.issue_serving(
        issuer_ca,
        names.memory_dns_names(store, namespace),
        dt.datetime.now(dt.UTC),
        dt.timedelta(days=30),
    )
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": names.tls_secret_name(store),
            "annotations": {"cert-manager.io/certificate-name": names.certificate_name(store)},
        },
        "stringData": {"tls.crt": issued.cert, "tls.key": issued.key, "ca.crt": issuer_ca.cert},
    }
    kube.apply(json.dumps(manifest), "-n", namespace)
    wait_for(
        lambda: (
            kube.get("configmap", names.client_config_map_name(store), "-n", namespace)["data"].get(
                "ca.crt"
            )
            == issuer_ca.cert
        ),
        timeout=30,
    )
    wait_for(lambda: status(kube, namespace, store).get("phase") == "Ready", timeout=60)
    assert decoded(secret(kube, namespace, names.tls_secret_name(store)))["tls.crt"] == issued.cert

    # 4. issuerRef removed: the operator retires its Certificate (else cert-manager would
    # fight it for the Secret) and issues from its own CA
    kube.kubectl(
        "patch",
        "mstore",
        store,
        "-n",
        namespace,
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/tls/issuerRef"}]',
    )
    wait_for(
        lambda: (
            kube.kubectl(
                "get",
                "certificates.cert-manager.io",
                names.certificate_name(store),
                "-n",
                namespace,
                check=False,
            ).returncode
            != 0
        ),
        timeout=30,
    )
    own_ca = wait_for(lambda: secret(kube, namespace, names.ca_secret_name(store)), timeout=30)
    taken = wait_for(
        lambda: (
            (s := secret(kube, namespace, names.tls_secret_name(store)))
            and decoded(s)["tls.crt"] != issued.cert
            and s
        ),
        timeout=30,
    )
    cert(decoded(taken)["tls.crt"]).verify_directly_issued_by(cert(decoded(own_ca)["ca.crt"]))
    annotations = taken["metadata"].get("annotations") or {}
    assert not any(k.startswith("cert-manager.io/") for k in annotations)
    wait_for(
        lambda: (
            kube.get("configmap", names.client_config_map_name(store), "-n", namespace)["data"].get(
                "ca.crt"
            )
            == decoded(own_ca)["ca.crt"]
        ),
        timeout=30,
    )
    no_private_key_outside_secrets(kube, namespace, store, operator_log)
