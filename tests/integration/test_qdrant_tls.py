"""The memory service and a Qdrant server over TLS (the vendored server, memorystore_dev.qdrant,
serving a certificate from a test CA): the service verifies the server against the CA it is
given (`vectorStore.server.ca`), refuses a server it cannot verify, fails at start-up on a CA
that is not one, and follows a renewed CA and certificate without a restart or a failed
request when the new CA is trusted before the certificate changes (what the operator does)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from memorystore.config import ConfigError, ServerQdrant, ServiceConfig, ServiceVectorStore
from memorystore.service.app import create_app
from memorystore.service.ops.runner import ServiceThread, UvicornThread, embedded_config
from memorystore_dev.devcluster.pki import PKI
from memorystore_dev.qdrant import QdrantServer
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)


def tls_config(tmp_path: Path, qdrant: QdrantServer, ca: Path) -> ServiceConfig:
    """The service on `qdrant`, verifying it against the CA in the file `ca`."""
    server = qdrant.service_config(ca=ca)
    return embedded_config(tmp_path / "data", vector_store=ServiceVectorStore(server=server))


def add_and_find(service: ServiceThread, user: str, text: str) -> None:
    headers = {"Authorization": f"Token {service.api_key}"}
    with httpx.Client(base_url=service.url, headers=headers, timeout=60) as http:
        body = {"messages": [{"role": "user", "content": text}], "user_id": user, "infer": False}
        assert http.post("/v3/memories/add/", json=body).status_code == 200
        found = http.post("/v3/memories/search/", json={"query": text, "user_id": user})
        assert found.status_code == 200, found.text
        assert text in [r["memory"] for r in found.json()["results"]]


def followed(service: ServiceThread, changes: int) -> None:
    """Until the service has handed `changes` new secret values over (ops/secret_files.py)."""
    files = service.app.state.services.secret_files
    wait_for(lambda: files.reloads >= changes, timeout=30, every=0.2)


@pytest.fixture(scope="module")
def tls_qdrant() -> QdrantServer:
    with QdrantServer(tls=True, cert_ttl=1) as qdrant:
        yield qdrant


def test_the_service_verifies_the_server_against_the_ca_it_is_given(tmp_path, tls_qdrant):
    assert tls_qdrant.ca is not None
    cfg = tls_config(tmp_path, tls_qdrant, tls_qdrant.ca)
    with ServiceThread(cfg) as service:
        add_and_find(service, "alice", "I keep bees in Porto")


def test_a_server_it_cannot_verify_is_named_in_readyz_not_trusted(tmp_path, tls_qdrant):
    other = PKI(tmp_path / "other-ca")  # a CA that did not sign the server's certificate
    cfg = tls_config(tmp_path, tls_qdrant, other.ca.cert)
    with UvicornThread(create_app(cfg)) as server:
        refused = wait_for(
            lambda: (
                (r := httpx.get(f"{server.url}/readyz", timeout=10)).status_code == 503
                and "cannot be reached" in r.json()["reason"]
                and r
            ),
            timeout=60,
        )
        assert f"Qdrant server at {tls_qdrant.url}" in refused.json()["reason"]


@pytest.mark.parametrize(
    ("ca", "url_scheme", "problem"),
    [
        ("not a certificate", "https", "vectorStore.server.ca: not a PEM CA certificate"),
        (None, "http", "`ca` is set but `url` is not https"),
    ],
)
def test_a_ca_that_cannot_verify_fails_at_start_up_naming_the_field(
    tmp_path, tls_qdrant, ca, url_scheme, problem
):
    pem = ca if ca is not None else tls_qdrant.ca.read_text()  # type: ignore[union-attr]
    (tmp_path / "ca.crt").write_text(pem)
    url = tls_qdrant.url.replace("https://", f"{url_scheme}://")
    fields = {"url": url, "ca": {"file": str(tmp_path / "ca.crt")}}
    with pytest.raises((ConfigError, ValueError), match=problem):
        cfg = embedded_config(
            tmp_path / "data", vector_store=ServiceVectorStore(server=ServerQdrant(**fields))
        )
        ServiceThread(cfg)


def test_a_renewed_ca_and_certificate_reach_both_sides_without_a_failed_request(tmp_path):
    with QdrantServer(tls=True, cert_ttl=1) as qdrant:
        assert qdrant.ca is not None
        old_ca = qdrant.ca.read_text()
        ca_file = tmp_path / "qdrant-ca.crt"  # the file the operator's Secret would update
        ca_file.write_text(old_ca)
        cfg = tls_config(tmp_path, qdrant, ca_file)
        with ServiceThread(cfg) as service:
            add_and_find(service, "bob", "my sister lives in Oslo")
            failures: list[str] = []
            stop = threading.Event()

            def search() -> None:
                headers = {"Authorization": f"Token {service.api_key}"}
                with httpx.Client(base_url=service.url, headers=headers, timeout=60) as http:
                    while not stop.is_set():
                        body = {"query": "sister", "user_id": "bob"}
                        response = http.post("/v3/memories/search/", json=body)
                        if response.status_code != 200 or not response.json()["results"]:
                            failures.append(f"{response.status_code} {response.text[:120]}")
                        time.sleep(0.05)

            reader = threading.Thread(target=search)
            reader.start()
            try:
                # 1. the service trusts the old and the new CA (a bundle, as the operator
                #    writes it before it renews the server's certificate)
                new = PKI(tmp_path / "new-ca")
                bundle = old_ca + new.ca.cert.read_text()
                staged = ca_file.with_suffix(".new")
                staged.write_text(bundle)
                staged.replace(ca_file)
                followed(service, 1)  # the secret files are stat'ed every 5 s
                # 2. the server's certificate is re-issued by the new CA, in place
                qdrant.reissue(new)
                time.sleep(3)  # Qdrant re-reads it after cert_ttl (1 s)
                # 3. the old CA is dropped: only the new one verifies the server now
                staged.write_text(new.ca.cert.read_text())
                staged.replace(ca_file)
                followed(service, 2)
                time.sleep(1)  # searches on the new CA alone
            finally:
                stop.set()
                reader.join(timeout=60)
            assert failures == [], failures[:3]
            old_only = httpx.Client(verify=qdrant.verify(), timeout=10)
            with old_only, pytest.raises(httpx.ConnectError):  # the old CA verifies no more
                old_only.get(f"{qdrant.url}/readyz")
            add_and_find(service, "bob", "my brother lives in Rome")  # and nothing was lost
            headers = {"Authorization": f"Token {service.api_key}"}
            listed = httpx.post(
                f"{service.url}/v3/memories/",
                json={"filters": {"user_id": "bob"}},
                headers=headers,
                timeout=60,
            ).json()
            assert {r["memory"] for r in listed["results"]} >= {"my sister lives in Oslo"}
