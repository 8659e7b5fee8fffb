"""HTTPS between agents and the memory service, with the operator's own certificates.

The real service (uvicorn, embedded Qdrant, real mem0) serves a certificate issued by
`memorystore.operator.tls` for the in-cluster names; agents reach it by those names
(`support.cluster_dns` routes them to loopback, nothing else is substituted) and verify it
against the store's CA, as the client ConfigMap tells them to. The certificate is renewed
under the running service — in-process and through the real `memorystore serve` — and new
connections get the new one without a restart.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from agentscope.middleware import Mem0Middleware
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from memorystore.config import ConfigError, Listen, ServerTLS
from memorystore.middleware import MemoryMiddlewareFactory
from memorystore.middleware.client import MemoryServiceError
from memorystore.middleware.factory import _mem0_client_type
from memorystore.operator import names, tls
from memorystore.service.ops.runner import ServiceThread, embedded_config, wait_until_ready
from memorystore.service.ops.tls import CertificateReloader
from support.agent_memory import chat, client_config, key_file, stored
from support.cluster_dns import cluster_dns, loopback_address

pytestmark = pytest.mark.timeout(180)

HOST = f"{names.memory_service_name('acme')}.tenants.svc"
ENDPOINT = names.memory_endpoint("acme", "tenants")  # https://acme-memory.tenants.svc:8765
PORT = names.SERVICE_PORT
DNS = names.memory_dns_names("acme", "tenants")
PREFERENCE = "Please make my charts in dark mode by default."


@dataclass
class PKI:
    """The store's CA, a serving certificate on disk (the mounted Secret) and the agent's
    ca.crt (the mounted client ConfigMap)."""

    dir: Path
    ca: tls.Issued
    serving: tls.Issued
    cert_file: Path
    key_file: Path
    ca_file: Path

    @property
    def server_tls(self) -> ServerTLS:
        return ServerTLS(cert_file=str(self.cert_file), key_file=str(self.key_file))

    def issue(self, names_: list[str] = DNS) -> tls.Issued:
        return tls.issue_serving(self.ca, names_, dt.datetime.now(dt.UTC), dt.timedelta(days=90))

    def install(self, issued: tls.Issued) -> None:
        """What kubelet does on renewal: both files replaced (atomically, each)."""
        for path, text in ((self.cert_file, issued.cert), (self.key_file, issued.key)):
            tmp = path.with_suffix(".new")
            tmp.write_text(text)
            tmp.replace(path)


def make_pki(root: Path) -> PKI:
    now = dt.datetime.now(dt.UTC)
    ca = tls.issue_ca("acme", now)
    serving = tls.issue_serving(ca, DNS, now, dt.timedelta(days=90))
    (root / "tls").mkdir(parents=True)
    (root / "agent").mkdir()
    pki = PKI(
        root,
        ca,
        serving,
        root / "tls" / "tls.crt",
        root / "tls" / "tls.key",
        root / "agent" / "ca.crt",
    )
    pki.install(serving)
    pki.ca_file.write_text(ca.cert)
    return pki


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def https_service(tmp_path: Path, pki: PKI) -> Iterator[ServiceThread]:
    address = loopback_address(PORT)
    cfg = embedded_config(
        tmp_path / "data", tls=pki.server_tls, listen=Listen(host=address, port=PORT)
    )
    with ServiceThread(cfg, tls_reload_seconds=0.2) as svc:
        assert svc.url == f"https://{address}:{PORT}"
        with cluster_dns({HOST: address, "evil-memory.tenants.svc": address}):
            yield svc


def served_serial(ca_pem: str, host: str = HOST) -> int:
    """A new TLS connection, verified like an agent's; the serial the server presented."""
    context = ssl.create_default_context(cadata=ca_pem)
    with (
        socket.create_connection((host, PORT), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as conn,
    ):
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def wait_for_serial(ca_pem: str, serial: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while served_serial(ca_pem) != serial:
        assert time.monotonic() < deadline, f"serial {serial} not served after {timeout} s"
        time.sleep(0.1)


def agent_config(pki: PKI, svc: ServiceThread, tmp_path: Path, **fields: object):
    return client_config(
        ENDPOINT, key_file(tmp_path, svc.api_key), tls={"caFile": str(pki.ca_file)}, **fields
    )


def verified_http(pki: PKI, svc: ServiceThread) -> httpx.Client:
    return httpx.Client(
        base_url=ENDPOINT,
        headers={"Authorization": f"Token {svc.api_key}"},
        verify=ssl.create_default_context(cafile=str(pki.ca_file)),
        timeout=30,
    )


# --- agents over verified HTTPS ---------------------------------------------------------------


async def test_an_agent_remembers_across_sessions_over_verified_https(
    https_service: ServiceThread, pki: PKI, tmp_path: Path
):
    factory = MemoryMiddlewareFactory(agent_config(pki, https_service, tmp_path))
    try:
        assert isinstance(factory.client.verify, ssl.SSLContext)
        await chat(factory, PREFERENCE, ["Noted."], session="s1")
        _, model, _ = await chat(factory, "Draw me a chart.", ["Dark chart."], session="s2")
        (call,) = model.calls
        assert any(PREFERENCE in text for text in call.texts("user")), "recalled over HTTPS"
    finally:
        await factory.aclose()
    with verified_http(pki, https_service) as http:
        assert PREFERENCE in stored(http, user_id="alice")


async def test_the_stock_mem0_flavor_verifies_the_same_way(
    https_service: ServiceThread, pki: PKI, tmp_path: Path
):
    cfg = agent_config(pki, https_service, tmp_path, mode="static_control")
    factory = MemoryMiddlewareFactory(cfg, flavor="mem0")
    try:
        (middleware,) = await factory("alice", "assistant", "s1")
        assert isinstance(middleware, Mem0Middleware)
        await chat(factory, PREFERENCE, ["Noted."], session="s1")
    finally:
        await factory.aclose()
    with verified_http(pki, https_service) as http:
        assert PREFERENCE in stored(http, user_id="alice")
    # mem0's client on its own, with another store's CA: its constructor's ping is refused
    other = ssl.create_default_context(cadata=tls.issue_ca("beta", dt.datetime.now(dt.UTC)).cert)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        _mem0_client_type()(api_key=https_service.api_key, host=ENDPOINT, verify=other)


async def test_a_service_the_ca_did_not_sign_is_refused_and_gets_nothing(
    https_service: ServiceThread, pki: PKI, tmp_path: Path
):
    """Another store's CA (an impostor with its own valid-looking certificate, seen from the
    agent's side): the agent refuses the connection before sending its key or any memory."""
    impostor_ca = tmp_path / "other-ca.crt"
    impostor_ca.write_text(tls.issue_ca("acme", dt.datetime.now(dt.UTC)).cert)
    key = key_file(tmp_path, https_service.api_key)
    strict = MemoryMiddlewareFactory(
        client_config(ENDPOINT, key, tls={"caFile": str(impostor_ca)}, failOpen=False)
    )
    try:
        with pytest.raises(MemoryServiceError, match="CERTIFICATE_VERIFY_FAILED"):
            await strict("alice", "assistant", "s1")
        with pytest.raises(MemoryServiceError, match="CERTIFICATE_VERIFY_FAILED"):
            await strict.client.add(
                [{"role": "user", "content": "secret plan"}], {"user_id": "alice"}, infer=False
            )
    finally:
        await strict.aclose()
    lenient = MemoryMiddlewareFactory(
        client_config(ENDPOINT, key, tls={"caFile": str(impostor_ca)})
    )
    try:
        assert await lenient("alice", "assistant", "s1") == []  # fail-open: memory off
    finally:
        await lenient.aclose()
    with verified_http(pki, https_service) as http:
        assert stored(http, user_id="alice") == []


async def test_a_certificate_for_another_name_is_refused(
    https_service: ServiceThread, pki: PKI, tmp_path: Path
):
    """The right CA, the wrong name: what a store's certificate presented for another
    Service would look like. Hostname verification refuses it."""
    key = key_file(tmp_path, https_service.api_key)
    cfg = client_config(
        "https://evil-memory.tenants.svc:8765",
        key,
        tls={"caFile": str(pki.ca_file)},
        failOpen=False,
    )
    factory = MemoryMiddlewareFactory(cfg)
    try:
        with pytest.raises(MemoryServiceError, match=r"Hostname mismatch|CERTIFICATE_VERIFY"):
            await factory("alice", "assistant", "s1")
    finally:
        await factory.aclose()


async def test_verification_off_accepts_any_certificate_with_a_warning(
    https_service: ServiceThread, tmp_path: Path, caplog
):
    key = key_file(tmp_path, https_service.api_key)
    with caplog.at_level(logging.WARNING, logger="memorystore.middleware"):
        factory = MemoryMiddlewareFactory(client_config(ENDPOINT, key, tls={"verify": False}))
    try:
        assert "TLS verification is OFF" in caplog.text
        assert len(await factory("alice", "assistant", "s1")) == 1
    finally:
        await factory.aclose()


def test_plain_http_to_the_https_port_gets_no_service(https_service: ServiceThread):
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://{HOST}:{PORT}/v1/ping/", timeout=5)


# --- renewal without restart ------------------------------------------------------------------


def test_a_renewed_certificate_is_served_to_new_connections_without_restart(
    https_service: ServiceThread, pki: PKI, caplog
):
    reloader = https_service.tls
    assert reloader is not None
    assert served_serial(pki.ca.cert) == tls.serial(pki.serving.cert)
    thread = https_service.thread
    with verified_http(pki, https_service) as http:  # one keep-alive connection throughout
        assert http.get("/v1/ping/").status_code == 200

        renewed = pki.issue()
        # half-written: the new certificate with the old key. Refused, the old one stays.
        pki.cert_file.write_text(renewed.cert)
        with caplog.at_level(logging.WARNING, logger="memorystore.service.ops.tls"):
            deadline = time.monotonic() + 5
            while "keeping the current TLS certificate" not in caplog.text:
                assert time.monotonic() < deadline, "the mismatched pair was not noticed"
                time.sleep(0.1)
        assert "tls.keyFile" in caplog.text and "PRIVATE KEY" not in caplog.text
        assert served_serial(pki.ca.cert) == tls.serial(pki.serving.cert)
        assert reloader.reloads == 0

        pki.key_file.write_text(renewed.key)  # the pair is whole again: served from now on
        wait_for_serial(pki.ca.cert, tls.serial(renewed.cert), timeout=5)
        assert reloader.reloads == 1
        assert http.get("/v1/ping/").status_code == 200
    assert https_service.thread is thread and thread.is_alive()  # no restart


def _expiry_metric(http: httpx.Client) -> float | None:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("memorystore_tls_certificate_expiry_timestamp_seconds "):
            return float(line.split()[1])
    return None


def test_metrics_show_when_the_served_certificate_expires_and_follow_a_renewal(
    https_service: ServiceThread, pki: PKI
):
    """CertificateExpiringSoon's input: the notAfter of the certificate being served."""
    with verified_http(pki, https_service) as http:
        served = x509.load_pem_x509_certificate(pki.serving.cert.encode())
        assert _expiry_metric(http) == served.not_valid_after_utc.timestamp()
        renewed = tls.issue_serving(
            pki.ca, DNS, dt.datetime.now(dt.UTC), dt.timedelta(days=30)
        )  # a shorter one, so the change shows
        pki.install(renewed)
        wait_for_serial(pki.ca.cert, tls.serial(renewed.cert), timeout=5)
        later = x509.load_pem_x509_certificate(renewed.cert.encode()).not_valid_after_utc
        assert _expiry_metric(http) == later.timestamp()
        assert later < served.not_valid_after_utc


# --- start-up refuses a bad pair, naming the file ---------------------------------------------


def _encrypted(key_pem: str) -> str:
    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    ).decode()


def test_a_bad_pair_is_refused_naming_the_file_and_never_echoing_it(pki: PKI):
    other = pki.issue()
    cases = [
        ("missing-cert", pki.dir / "absent.crt", pki.key_file, "tls.certFile: cannot read"),
        ("missing-key", pki.cert_file, pki.dir / "absent.key", "tls.keyFile: cannot read"),
        ("garbage-cert", pki.key_file, pki.key_file, "holds no PEM certificate"),
        ("garbage-key", pki.cert_file, pki.cert_file, "holds no unencrypted PEM private key"),
    ]
    mismatched = pki.dir / "other.key"
    mismatched.write_text(other.key)
    cases.append(("other-key", pki.cert_file, mismatched, "is not the key of the certificate"))
    encrypted = pki.dir / "encrypted.key"
    encrypted.write_text(_encrypted(pki.serving.key))
    cases.append(("encrypted", pki.cert_file, encrypted, "holds no unencrypted PEM private key"))
    for case, cert_file, key_file_, needle in cases:
        with pytest.raises(ConfigError) as raised:
            CertificateReloader(ServerTLS(cert_file=str(cert_file), key_file=str(key_file_)))
        message = str(raised.value)
        assert needle in message, case
        assert str(key_file_) in message or str(cert_file) in message, case
        for secret in (pki.serving.key, other.key, "PRIVATE KEY", "BEGIN"):
            assert secret not in message, case


# --- the real `memorystore serve` -------------------------------------------------------------


def serve_config(tmp_path: Path, pki: PKI, address: str, key_path: Path | None = None) -> Path:
    config = tmp_path / "service.yaml"
    config.write_text(
        f"apiKey: {{env: TLS_TEST_KEY}}\ndataDir: {tmp_path / 'data'}\n"
        f"listen: {{host: '{address}', port: {PORT}}}\n"
        f"tls: {{certFile: {pki.cert_file}, keyFile: {key_path or pki.key_file}}}\n"
    )
    return config


def serve(config: Path, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "memorystore", "serve", "--config", str(config)],
        env={**os.environ, "TLS_TEST_KEY": "t" * 40},
        text=True,
        **kwargs,  # type: ignore[arg-type]
    )


def test_serve_refuses_to_start_with_a_key_that_is_not_the_certificates(tmp_path: Path, pki: PKI):
    wrong = tmp_path / "wrong.key"
    wrong.write_text(
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    proc = serve(
        serve_config(tmp_path, pki, loopback_address(PORT), wrong),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert f"tls.keyFile: {wrong} is not the key of the certificate" in err
    assert "PRIVATE KEY" not in out + err and "t" * 40 not in out + err


def test_serve_speaks_https_and_reloads_a_renewed_certificate(tmp_path: Path, pki: PKI):
    address = loopback_address(PORT)
    log = (tmp_path / "serve.log").open("w")
    proc = serve(serve_config(tmp_path, pki, address), stdout=log, stderr=subprocess.STDOUT)
    try:
        with cluster_dns({HOST: address}):
            verify = ssl.create_default_context(cafile=str(pki.ca_file))
            wait_until_ready(ENDPOINT, proc, verify=verify)
            assert served_serial(pki.ca.cert) == tls.serial(pki.serving.cert)
            renewed = pki.issue()
            pki.install(renewed)
            # the CLI polls every 10 s
            wait_for_serial(pki.ca.cert, tls.serial(renewed.cert), timeout=30)
            ping = httpx.get(
                f"{ENDPOINT}/v1/ping/",
                headers={"Authorization": f"Token {'t' * 40}"},
                verify=verify,
            )
            assert ping.status_code == 200
        assert proc.poll() is None, "the same process serves the new certificate"
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    text = (tmp_path / "serve.log").read_text()
    assert "PRIVATE KEY" not in text and "t" * 40 not in text
