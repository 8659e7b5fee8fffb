"""The operator's certificates: issuing, every reason to renew (and not to), the plan the apply
layer follows, the TLS children the builders render, and the status they lead to."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from memorystore.operator import names, tls
from memorystore.operator.builders import desired_children
from memorystore.operator.builders.configs import (
    config_checksum,
    render_service_config,
    service_config,
)
from memorystore.operator.builders.model import Images, Keys, Owner
from memorystore.operator.builders.secrets import ca_secret, tls_certificate, tls_secret
from memorystore.operator.status import READY, SERVICE_READY, Observed, Workload, compute_status
from memorystore.spec import MemoryStoreSpec, MemoryStoreStatus, Phase

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
DNS = names.memory_dns_names("acme", "tenants")
DURATION, RENEW = 90 * DAY, 30 * DAY
OWNER = Owner("acme", "tenants", "0b6f1c9e-4c1d-4c57-9d55-3a1f0c2d7e11", 1)
KEYS = Keys(service_api_key="svc-key-Zm9vYmFy", qdrant_api_key="qdrant-key-cXV1eA")


@pytest.fixture(scope="module")
def ca() -> tls.Issued:
    return tls.issue_ca("acme", NOW)


@pytest.fixture(scope="module")
def serving(ca: tls.Issued) -> tls.Issued:
    return tls.issue_serving(ca, DNS, NOW, DURATION)


def cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def problem(
    ca: tls.Issued, leaf: tls.Issued | None, now: dt.datetime = NOW, **overrides: object
) -> str | None:
    args: dict[str, object] = {
        "cert_pem": leaf.cert if leaf else None,
        "key_pem": leaf.key if leaf else None,
        "ca_cert_pem": ca.cert,
        "dns_names": DNS,
        "now": now,
        "renew_before": RENEW,
        "duration": DURATION,
    }
    args.update(overrides)
    return tls.serving_problem(**args)  # type: ignore[arg-type]


# --- issuing --------------------------------------------------------------------------------


def test_the_ca_is_a_ten_year_ec_ca_that_can_sign_leaves_only(ca: tls.Issued):
    c = cert(ca.cert)
    assert c.issuer == c.subject
    c.verify_directly_issued_by(c)  # self-signed
    constraints = c.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca and constraints.value.path_length == 0
    usage = c.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    assert isinstance(c.public_key(), ec.EllipticCurvePublicKey)
    assert c.public_key().curve.name == "secp256r1"
    assert c.not_valid_after_utc - NOW == dt.timedelta(days=3650)
    assert c.not_valid_before_utc < NOW  # back-dated for clock skew
    key = serialization.load_pem_private_key(ca.key.encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert tls.ca_problem(ca.cert, ca.key, NOW, DURATION) is None


def test_the_serving_certificate_names_the_service_and_is_signed_by_the_ca(
    ca: tls.Issued, serving: tls.Issued
):
    assert DNS == [
        "acme-memory",
        "acme-memory.tenants",
        "acme-memory.tenants.svc",
        "acme-memory.tenants.svc.cluster.local",
    ]
    c = cert(serving.cert)
    c.verify_directly_issued_by(cert(ca.cert))
    sans = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == DNS
    assert not c.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    eku = c.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert c.not_valid_after_utc - NOW == DURATION
    assert problem(ca, serving) is None


def test_qdrants_certificate_covers_the_service_and_every_peer_both_ways(ca: tls.Issued):
    """Qdrant's peers present their certificate to each other (mutual TLS on the peer port),
    so it is a client's too; one wildcard covers every pod behind the headless Service."""
    plan = tls.plan(
        {names.CA_CERT: ca.cert, names.CA_KEY: ca.key},
        None,
        store="acme",
        dns_names=names.qdrant_dns_names("acme", "tenants"),
        now=NOW,
        duration_days=90,
        renew_before_days=30,
        client_auth=True,
    )
    assert plan.ca_data is None and plan.tls_data is not None, "the store's CA signs it"
    c = cert(plan.tls_data[names.TLS_CERT])
    c.verify_directly_issued_by(cert(ca.cert))
    sans = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "*.acme-qdrant-headless.tenants.svc" in sans.get_values_for_type(x509.DNSName)
    assert "acme-qdrant.tenants.svc" in sans.get_values_for_type(x509.DNSName)
    eku = c.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert plan.tls_data[names.CA_CERT] == ca.cert


def test_a_serving_certificate_never_outlives_its_ca():
    short_ca = tls.issue_ca("acme", NOW, validity=10 * DAY)
    leaf = tls.issue_serving(short_ca, DNS, NOW, DURATION)
    assert cert(leaf.cert).not_valid_after_utc == cert(short_ca.cert).not_valid_after_utc


def test_each_issue_is_a_new_key_and_serial(ca: tls.Issued, serving: tls.Issued):
    again = tls.issue_serving(ca, DNS, NOW, DURATION)
    assert again.key != serving.key
    assert tls.serial(again.cert) != tls.serial(serving.cert)


def test_a_key_never_appears_in_a_repr(ca: tls.Issued):
    assert "PRIVATE KEY" not in repr(ca)
    first = tls.plan(None, None, **plan_args())
    assert "PRIVATE KEY" not in repr(first)


# --- when a stored serving certificate is renewed ---------------------------------------------


def test_renewal_happens_inside_the_window_and_not_before(ca: tls.Issued, serving: tls.Issued):
    expiry = NOW + DURATION
    assert problem(ca, serving, now=expiry - RENEW - dt.timedelta(seconds=1)) is None
    assert problem(ca, serving, now=expiry - RENEW) is None  # exactly renewBefore left: keep
    reason = problem(ca, serving, now=expiry - RENEW + dt.timedelta(seconds=1))
    assert reason is not None and "within the renewal window" in reason
    assert "expired" in (problem(ca, serving, now=expiry) or "")
    assert "expired" in (problem(ca, serving, now=expiry + 400 * DAY) or "")


def test_a_certificate_from_the_future_is_renewed(ca: tls.Issued):
    future = tls.issue_serving(ca, DNS, NOW + 2 * DAY, DURATION)
    assert "not valid before" in (problem(ca, future) or "")


def test_changed_names_renew(ca: tls.Issued, serving: tls.Issued):
    moved = names.memory_dns_names("acme", "elsewhere")
    assert "DNS names differ" in (problem(ca, serving, dns_names=moved) or "")
    assert "DNS names differ" in (problem(ca, serving, dns_names=DNS[:3]) or "")
    # the same names in another order are the same certificate
    assert problem(ca, serving, dns_names=list(reversed(DNS))) is None


def test_a_certificate_another_ca_signed_is_renewed(serving: tls.Issued):
    other = tls.issue_ca("acme", NOW)  # same subject name, different key
    assert "not signed by the store's CA" in (problem(other, serving) or "")


def test_a_shortened_duration_renews_at_once(ca: tls.Issued, serving: tls.Issued):
    assert "longer than spec.tls.durationDays" in (
        problem(ca, serving, duration=30 * DAY, renew_before=10 * DAY) or ""
    )
    assert problem(ca, serving, duration=DURATION + DAY) is None  # longer is fine


@pytest.mark.parametrize(
    ("cert_pem", "key_pem", "needle"),
    [
        (None, None, "no serving certificate yet"),
        ("", "", "no serving certificate yet"),
        ("not a certificate", "KEY", "certificate cannot be parsed"),
        ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "K", "cannot be parsed"),
        ("SERVING", "my-secret-key-material", "key cannot be parsed"),
        ("SERVING", "OTHER_KEY", "does not belong to the stored certificate"),
        ("SERVING", "ENCRYPTED_KEY", "key cannot be parsed"),
        ("SERVING", "RSA_KEY", "does not belong to the stored certificate"),
    ],
)
def test_a_broken_stored_pair_is_renewed_and_the_reason_echoes_nothing(
    ca: tls.Issued, serving: tls.Issued, cert_pem, key_pem, needle
):
    other = ec.generate_private_key(ec.SECP256R1())
    fixtures = {
        "SERVING": serving.cert,
        "OTHER_KEY": tls._key_pem(other),
        "ENCRYPTED_KEY": other.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pw"),
        ).decode(),
        "RSA_KEY": rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode(),
    }
    cert_pem, key_pem = fixtures.get(cert_pem, cert_pem), fixtures.get(key_pem, key_pem)
    reason = tls.serving_problem(cert_pem, key_pem, ca.cert, DNS, NOW, RENEW, DURATION)
    assert reason is not None and needle in reason
    for secret in (key_pem, "my-secret-key-material", "BEGIN"):
        if secret:
            assert secret not in reason


def test_an_unparsable_ca_certificate_renews_the_leaf(serving: tls.Issued):
    assert "CA certificate cannot be parsed" in (
        tls.serving_problem(serving.cert, serving.key, "junk", DNS, NOW, RENEW, DURATION) or ""
    )


# --- when the CA itself is replaced -----------------------------------------------------------


def _self_signed_leaf() -> tls.Issued:
    """A certificate whose key matches but which is no CA (a leaf stored as the CA)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "x")])
    c = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW - DAY)
        .not_valid_after(NOW + 400 * DAY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]),
            False,
        )
        .sign(key, hashes.SHA256())
    )
    return tls.Issued(tls._cert_pem(c), tls._key_pem(key))


def test_ca_problems(ca: tls.Issued, serving: tls.Issued):
    assert tls.ca_problem(None, None, NOW, DURATION) == "there is no CA yet"
    assert "cannot be parsed" in (tls.ca_problem("junk", ca.key, NOW, DURATION) or "")
    assert "cannot be parsed" in (tls.ca_problem(ca.cert, "junk", NOW, DURATION) or "")
    other = tls.issue_ca("acme", NOW)
    assert "does not belong" in (tls.ca_problem(ca.cert, other.key, NOW, DURATION) or "")
    leaf = _self_signed_leaf()
    assert "not a CA" in (tls.ca_problem(leaf.cert, leaf.key, NOW, DURATION) or "")
    # too close to its own end to cover a full serving certificate
    late = NOW + dt.timedelta(days=3650) - DURATION + DAY
    assert "the CA expires on" in (tls.ca_problem(ca.cert, ca.key, late, DURATION) or "")
    assert tls.ca_problem(ca.cert, ca.key, late - 2 * DAY, DURATION) is None


def test_an_rsa_ca_is_kept_and_signs_leaves():
    """A CA put in `<store>-ca` by hand (e.g. RSA 2048 from an existing PKI) is used, not
    replaced: only an unusable CA is."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "corporate CA")])
    c = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(7)
        .not_valid_before(NOW - DAY)
        .not_valid_after(NOW + 1000 * DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())  # no subject key identifier, as some CAs have
    )
    ca = tls.Issued(
        tls._cert_pem(c),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
    )
    assert tls.ca_problem(ca.cert, ca.key, NOW, DURATION) is None
    planned = tls.plan({"ca.crt": ca.cert, "ca.key": ca.key}, None, **plan_args())
    assert planned.ca_data is None and planned.ca_cert == ca.cert
    cert(planned.tls_data["tls.crt"]).verify_directly_issued_by(c)


# --- the plan ---------------------------------------------------------------------------------


def plan_args(now: dt.datetime = NOW, **overrides: object) -> dict[str, object]:
    args: dict[str, object] = {
        "store": "acme",
        "dns_names": DNS,
        "now": now,
        "duration_days": 90,
        "renew_before_days": 30,
    }
    args.update(overrides)
    return args


def test_first_reconcile_issues_both_and_the_second_writes_nothing():
    first = tls.plan(None, None, **plan_args())
    assert first.ca_data is not None and first.tls_data is not None
    assert first.ca_reason == "there is no CA yet"
    assert first.tls_reason == "there is no serving certificate yet"
    assert set(first.ca_data) == {"ca.crt", "ca.key"}
    assert set(first.tls_data) == {"tls.crt", "tls.key", "ca.crt"}
    assert first.tls_data["ca.crt"] == first.ca_data["ca.crt"] == first.ca_cert
    cert(first.tls_data["tls.crt"]).verify_directly_issued_by(cert(first.ca_cert))

    again = tls.plan(first.ca_data, first.tls_data, **plan_args(NOW + DAY))
    assert (again.ca_data, again.tls_data, again.ca_reason, again.tls_reason) == (
        None,
        None,
        None,
        None,
    )
    assert again.ca_cert == first.ca_cert


def test_near_expiry_renews_the_leaf_under_the_same_ca():
    first = tls.plan(None, None, **plan_args())
    later = NOW + 61 * DAY  # 29 days left, renewBeforeDays 30
    renewed = tls.plan(first.ca_data, first.tls_data, **plan_args(later))
    assert renewed.ca_data is None and renewed.ca_cert == first.ca_cert
    assert renewed.tls_data is not None and "renewal window" in (renewed.tls_reason or "")
    new = cert(renewed.tls_data["tls.crt"])
    assert new.serial_number != tls.serial(first.tls_data["tls.crt"])
    assert new.not_valid_after_utc == later + DURATION
    new.verify_directly_issued_by(cert(first.ca_cert))


def test_a_replaced_ca_reissues_the_leaf_in_the_same_plan():
    first = tls.plan(None, None, **plan_args())
    broken = {**first.ca_data, "ca.key": "garbage"}
    replaced = tls.plan(broken, first.tls_data, **plan_args())
    assert replaced.ca_data is not None and replaced.ca_cert != first.ca_cert
    assert replaced.tls_data is not None
    assert replaced.tls_reason == "the stored certificate is not signed by the store's CA"
    cert(replaced.tls_data["tls.crt"]).verify_directly_issued_by(cert(replaced.ca_cert))


def test_a_stale_bundled_ca_is_rewritten_without_a_new_certificate():
    first = tls.plan(None, None, **plan_args())
    stale = {**first.tls_data, "ca.crt": "an old CA"}
    fixed = tls.plan(first.ca_data, stale, **plan_args())
    assert fixed.ca_data is None and fixed.tls_data is not None
    assert fixed.tls_data == first.tls_data  # same certificate and key, the CA put back
    assert "ca.crt" in (fixed.tls_reason or "")


def test_a_tampered_leaf_is_reissued():
    first = tls.plan(None, None, **plan_args())
    foreign = tls.issue_serving(tls.issue_ca("acme", NOW), DNS, NOW, DURATION)
    tampered = {**first.tls_data, "tls.crt": foreign.cert, "tls.key": foreign.key}
    fixed = tls.plan(first.ca_data, tampered, **plan_args())
    assert fixed.tls_data is not None and fixed.tls_data["tls.crt"] != foreign.cert


# --- the children the builders render ---------------------------------------------------------


def spec(**raw: object) -> MemoryStoreSpec:
    return MemoryStoreSpec.model_validate(raw)


def find(children: list[dict], kind: str, name: str) -> dict:
    (found,) = [c for c in children if c["kind"] == kind and c["metadata"]["name"] == name]
    return found


def test_the_tls_secrets_hold_what_the_plan_says():
    first = tls.plan(None, None, **plan_args())
    ca = ca_secret(OWNER, first.ca_data, owned=False)
    assert ca["metadata"]["name"] == "acme-ca" and ca["type"] == "Opaque"
    assert "ownerReferences" not in ca["metadata"]  # Retain: survives the store, like the keys
    assert "immutable" not in ca  # it may be replaced when unusable
    assert ca_secret(OWNER, first.ca_data, owned=True)["metadata"]["ownerReferences"]
    decoded = {k: base64.b64decode(v).decode() for k, v in ca["data"].items()}
    assert decoded == first.ca_data
    serving = tls_secret(OWNER, first.tls_data)
    assert serving["metadata"]["name"] == "acme-tls"
    assert serving["type"] == "kubernetes.io/tls"
    assert serving["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    decoded = {k: base64.b64decode(v).decode() for k, v in serving["data"].items()}
    assert decoded == first.tls_data


def test_private_keys_never_reach_a_config_map_or_the_pods():
    first = tls.plan(None, None, **plan_args())
    children = desired_children(OWNER, spec(), Images(), KEYS, ca_cert=first.ca_cert)
    text = json.dumps(children)
    for key in (first.ca_data["ca.key"], first.tls_data["tls.key"]):
        assert key not in text
        assert base64.b64encode(key.encode()).decode() not in text
    client_cm = find(children, "ConfigMap", "acme-client")
    assert client_cm["data"]["ca.crt"] == first.ca_cert  # public: agents verify with it
    deployment = find(children, "Deployment", "acme-memory")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"] == {
        "defaultMode": 0o440,
        "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
        "secretName": "acme-tls",
    }
    assert "acme-ca" not in json.dumps(deployment)  # the CA key is mounted nowhere


def test_the_service_serves_the_mounted_certificate_and_https_is_everywhere():
    children = desired_children(OWNER, spec(), Images(), KEYS, ca_cert="CA")
    cfg = service_config(OWNER, spec())
    assert cfg.tls is not None
    deployment = find(children, "Deployment", "acme-memory")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["tls"] == {
        "mountPath": "/var/run/secrets/memorystore/tls",
        "name": "tls",
        "readOnly": True,
    }
    assert (cfg.tls.cert_file, cfg.tls.key_file) == (
        "/var/run/secrets/memorystore/tls/tls.crt",
        "/var/run/secrets/memorystore/tls/tls.key",
    )
    service = find(children, "Service", "acme-memory")
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 8765, "protocol": "TCP", "targetPort": "https"}
    ]
    client = yaml.safe_load(find(children, "ConfigMap", "acme-client")["data"]["client.yaml"])
    assert client["endpoint"] == "https://acme-memory.tenants.svc:8765"
    assert client["tls"] == {"caFile": "/etc/memorystore/client/ca.crt"}


def test_a_renewed_certificate_or_a_new_ca_does_not_restart_the_pods():
    one = desired_children(OWNER, spec(), Images(), KEYS, ca_cert="CA one")
    two = desired_children(OWNER, spec(), Images(), KEYS, ca_cert="CA two")
    assert find(one, "Deployment", "acme-memory") == find(two, "Deployment", "acme-memory")
    text = render_service_config(OWNER, service_config(OWNER, spec()))
    template = find(one, "Deployment", "acme-memory")["spec"]["template"]["metadata"]
    assert template["annotations"] == {"memorystore.dev/config-checksum": config_checksum(text)}
    # only the client ConfigMap follows the CA
    assert find(one, "ConfigMap", "acme-client") != find(two, "ConfigMap", "acme-client")


def test_tls_off_is_plain_http_with_nothing_to_mount():
    off = spec(tls={"enabled": False})
    children = desired_children(OWNER, off, Images(), KEYS, ca_cert="ignored")
    assert service_config(OWNER, off).tls is None
    deployment = find(children, "Deployment", "acme-memory")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "tls" not in {v["name"] for v in pod["volumes"]}
    assert "tls" not in {m["name"] for m in container["volumeMounts"]}
    assert container["ports"][0]["name"] == "http"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    client_cm = find(children, "ConfigMap", "acme-client")
    assert set(client_cm["data"]) == {"client.yaml"}
    client = yaml.safe_load(client_cm["data"]["client.yaml"])
    assert client["endpoint"] == "http://acme-memory.tenants.svc:8765" and "tls" not in client


def test_a_cert_manager_issuer_without_a_ca_falls_back_to_the_system_cas():
    managed = spec(tls={"issuerRef": {"name": "letsencrypt", "kind": "ClusterIssuer"}})
    children = desired_children(OWNER, managed, Images(), KEYS, ca_cert=None)
    client_cm = find(children, "ConfigMap", "acme-client")
    assert set(client_cm["data"]) == {"client.yaml"}
    client = yaml.safe_load(client_cm["data"]["client.yaml"])
    assert client["endpoint"].startswith("https://") and "tls" not in client


def test_the_cert_manager_certificate():
    managed = spec(
        tls={
            "issuerRef": {"name": "tenant-ca", "kind": "ClusterIssuer"},
            "durationDays": 30,
            "renewBeforeDays": 10,
        }
    )
    certificate = tls_certificate(OWNER, managed)
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["kind"] == "Certificate"
    assert certificate["metadata"]["name"] == "acme-tls"
    assert certificate["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    assert certificate["spec"] == {
        "commonName": "acme-memory",
        "dnsNames": DNS,
        "duration": "720h",
        "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "tenant-ca"},
        "privateKey": {"algorithm": "ECDSA", "rotationPolicy": "Always", "size": 256},
        "renewBefore": "240h",
        "secretName": "acme-tls",
        "secretTemplate": {"labels": names.labels("acme", names.MEMORY_SERVICE)},
        "usages": ["digital signature", "server auth"],
    }


def test_renew_before_must_be_shorter_than_the_duration_naming_the_field():
    with pytest.raises(ValueError, match=r"spec\.tls\.renewBeforeDays \(30\) must be less"):
        spec(tls={"durationDays": 30})
    with pytest.raises(ValueError, match="durationDays"):
        spec(tls={"durationDays": 0})
    assert spec(tls={"durationDays": 31}).tls.renew_before_days == 30


# --- status -----------------------------------------------------------------------------------


def _ready(kind: str, name: str) -> Workload:
    return Workload(
        kind,
        name,
        {
            "metadata": {"generation": 1},
            "spec": {"replicas": 1},
            "status": {"readyReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1},
        },
    )


@pytest.mark.parametrize("reason", ["CertManagerMissing", "CertificatePending"])
def test_a_missing_certificate_blocks_ready_with_its_reason(reason: str):
    message = "spec.tls.issuerRef names ClusterIssuer x, but cert-manager is not installed"
    observed = Observed(
        generation=1,
        suspended=False,
        vector_store=_ready("StatefulSet", "acme-qdrant"),
        service=_ready("Deployment", "acme-memory"),  # whatever the pods report
        endpoint="https://acme-memory.tenants.svc:8765",
        tls_pending=(reason, message),
    )
    status = compute_status(observed, MemoryStoreStatus(), "2026-11-30T12:00:00Z")
    service = next(c for c in status.conditions if c.type == SERVICE_READY)
    ready = next(c for c in status.conditions if c.type == READY)
    assert (service.status, service.reason, service.message) == ("False", reason, message)
    assert (ready.status, ready.reason) == ("False", reason)
    assert status.phase == Phase.PENDING
