"""The operator's own certificates for a store: a private CA, the memory service's serving
certificate and the managed Qdrant's (server and peer client at once). Pure functions: no
I/O, and the clock comes in as `now`, so every renewal decision is unit-tested at any point of
a certificate's life.

The apply layer reads the two Secrets, asks `plan` what must change, and writes only that.
Keys are generated here (EC P-256) and leave only as the PEM text the plan hands over for a
Secret: no reason, log line or exception built here contains key material.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from memorystore.operator.names import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY

CA_VALIDITY = dt.timedelta(days=3650)
# Issued certificates start a little in the past: a node whose clock lags the operator's
# must not see a certificate that is not valid yet.
BACKDATE = dt.timedelta(minutes=5)
# A stored certificate valid for longer than durationDays plus this was issued under a
# longer duration: it is re-issued so a shortened duration takes effect now.
DURATION_SLACK = dt.timedelta(days=1)
ORGANIZATION = "memorystore"


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, as PEM text (the key never in a repr)."""

    cert: str
    key: str = field(repr=False)


@dataclass(frozen=True)
class Plan:
    """What the TLS Secrets must become. `None`: leave that Secret as it is.

    `ca_cert` is the CA every agent must trust after this reconcile (the client ConfigMap's
    ca.crt). The reasons say why a Secret is written, for the operator's log; they never
    contain key material."""

    ca_cert: str
    ca_data: dict[str, str] | None = field(default=None, repr=False)
    ca_reason: str | None = None
    tls_data: dict[str, str] | None = field(default=None, repr=False)
    tls_reason: str | None = None


# --- issuing --------------------------------------------------------------------------------


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]),
        ]
    )


def _key_usage(*, sign_certs: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=sign_certs,
        crl_sign=sign_certs,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def issue_ca(store: str, now: dt.datetime, validity: dt.timedelta = CA_VALIDITY) -> Issued:
    """A self-signed CA for one store: it signs that store's serving certificates only."""
    key = _new_key()
    name = _name(f"memorystore {store} CA")
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        # path length 0: it can sign leaf certificates, never another CA
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(sign_certs=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(_cert_pem(cert), _key_pem(key))


def issue_serving(
    ca: Issued,
    dns_names: Sequence[str],
    now: dt.datetime,
    validity: dt.timedelta,
    client_auth: bool = False,
) -> Issued:
    """A server certificate for `dns_names`, signed by `ca`, valid for `validity` (never
    beyond the CA's own expiry: a leaf that outlives its CA fails verification anyway);
    `client_auth`: also a client's (Qdrant's peers present it to each other, mutual TLS)."""
    usages = [ExtendedKeyUsageOID.SERVER_AUTH]
    if client_auth:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    ca_cert = x509.load_pem_x509_certificate(ca.cert.encode())
    ca_key = _load_key(ca.key)
    if ca_key is None:
        raise ValueError("the CA key is not an unencrypted EC or RSA key")
    key = _new_key()
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    try:
        ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
    except x509.ExtensionNotFound:  # a CA from elsewhere may lack one
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_names[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(sign_certs=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
        .add_extension(aki, critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Issued(_cert_pem(cert), _key_pem(key))


# --- checking what is stored ----------------------------------------------------------------


def _load_cert(pem: str) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(pem.encode())
    except ValueError:
        return None


SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def _load_key(pem: str) -> SigningKey | None:
    """An unencrypted EC or RSA key (what the operator and cert-manager write), else None."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):  # TypeError: an encrypted key
        return None
    return key if isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) else None


def _same_public_key(cert: x509.Certificate, key: SigningKey) -> bool:
    form = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*form) == key.public_key().public_bytes(*form)


def _day(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pair_problem(
    cert_pem: str | None, key_pem: str | None, what: str, cert_name: str, key_name: str
) -> tuple[str, x509.Certificate | None]:
    """(why the stored pair is unusable, None) or ("", the certificate): present, parsable,
    and the key belongs to the certificate."""
    if not cert_pem or not key_pem:
        return f"there is no {what} yet", None
    cert, key = _load_cert(cert_pem), _load_key(key_pem)
    if cert is None:
        return f"the stored {cert_name} cannot be parsed", None
    if key is None:
        return (
            f"the stored {key_name} cannot be parsed (an unencrypted EC or RSA key is expected)",
            None,
        )
    if not _same_public_key(cert, key):
        return f"the stored {key_name} does not belong to the stored {cert_name}", None
    return "", cert


def ca_problem(
    cert_pem: str | None, key_pem: str | None, now: dt.datetime, min_remaining: dt.timedelta
) -> str | None:
    """Why the stored CA cannot sign the next serving certificate (None: it can)."""
    problem, cert = _pair_problem(cert_pem, key_pem, "CA", "CA certificate", "CA key")
    if cert is None:
        return problem
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return "the stored CA certificate is not a CA (no basic constraints)"
    if not constraints.ca:
        return "the stored CA certificate is not a CA"
    if cert.not_valid_after_utc - now < min_remaining:
        return f"the CA expires on {_day(cert.not_valid_after_utc)}"
    return None


def serving_problem(
    cert_pem: str | None,
    key_pem: str | None,
    ca_cert_pem: str,
    dns_names: Sequence[str],
    now: dt.datetime,
    renew_before: dt.timedelta,
    duration: dt.timedelta,
) -> str | None:
    """Why the stored serving certificate must be (re-)issued (None: keep it)."""
    problem, cert = _pair_problem(cert_pem, key_pem, "serving certificate", "certificate", "key")
    if cert is None:
        return problem
    ca_cert = _load_cert(ca_cert_pem)
    if ca_cert is None:
        return "the CA certificate cannot be parsed"
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return "the stored certificate is not signed by the store's CA"
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        stored_names = sans.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        stored_names = []
    if sorted(stored_names) != sorted(dns_names):
        return "the certificate's DNS names differ from the Service's"
    not_before, not_after = cert.not_valid_before_utc, cert.not_valid_after_utc
    if not_before > now + BACKDATE:
        return f"the certificate is not valid before {_day(not_before)}"
    if not_after <= now:
        return f"the certificate expired on {_day(not_after)}"
    if not_after - now < renew_before:
        return f"the certificate expires on {_day(not_after)}, within the renewal window"
    if not_after - not_before > duration + BACKDATE + DURATION_SLACK:
        return "the certificate is valid for longer than spec.tls.durationDays"
    return None


def _text(data: Mapping[str, str] | None, key: str) -> str | None:
    return (data or {}).get(key) or None


def plan(
    ca_data: Mapping[str, str] | None,
    tls_data: Mapping[str, str] | None,
    *,
    store: str,
    dns_names: Sequence[str],
    now: dt.datetime,
    duration_days: int,
    renew_before_days: int,
    client_auth: bool = False,
) -> Plan:
    """What the CA Secret and the serving-certificate Secret must hold after this reconcile.

    `ca_data` and `tls_data` are the Secrets' decoded data (None: the Secret does not
    exist). The CA is replaced only when unusable or too close to its own expiry to cover a
    full serving certificate; the serving certificate when `serving_problem` says so, or
    when its bundled ca.crt is not the current CA."""
    duration = dt.timedelta(days=duration_days)
    renew_before = dt.timedelta(days=renew_before_days)
    ca_cert, ca_key = _text(ca_data, CA_CERT), _text(ca_data, CA_KEY)
    ca_reason = ca_problem(ca_cert, ca_key, now, duration)
    ca_out: dict[str, str] | None = None
    if ca_reason is not None:
        new_ca = issue_ca(store, now)
        ca_cert, ca_key = new_ca.cert, new_ca.key
        ca_out = {CA_CERT: new_ca.cert, CA_KEY: new_ca.key}
    assert ca_cert is not None and ca_key is not None
    tls_reason = serving_problem(
        _text(tls_data, TLS_CERT),
        _text(tls_data, TLS_KEY),
        ca_cert,
        dns_names,
        now,
        renew_before,
        duration,
    )
    tls_out: dict[str, str] | None = None
    if tls_reason is not None:
        serving = issue_serving(Issued(ca_cert, ca_key), dns_names, now, duration, client_auth)
        tls_out = {TLS_CERT: serving.cert, TLS_KEY: serving.key, CA_CERT: ca_cert}
    elif _text(tls_data, CA_CERT) != ca_cert:
        tls_reason = "its ca.crt is not the store's CA certificate"
        assert tls_data is not None
        tls_out = {**tls_data, CA_CERT: ca_cert}
    return Plan(ca_cert, ca_out, ca_reason, tls_out, tls_reason)


def serial(cert_pem: str) -> int:
    """The serial number of a PEM certificate (tests and logs tell certificates apart by it)."""
    return x509.load_pem_x509_certificate(cert_pem.encode()).serial_number
