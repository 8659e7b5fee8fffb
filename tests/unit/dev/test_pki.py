"""The local control plane's certificates: what the API server and clients rely on."""

from __future__ import annotations

import ipaddress

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from memorystore_dev.devcluster.pki import PKI


def load(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_server_and_client_certificates_chain_to_the_ca(tmp_path):
    pki = PKI(tmp_path)
    ca = load(pki.ca.cert)
    server = load(
        pki.issue("apiserver", "kube-apiserver", server_names=["127.0.0.1", "kubernetes"]).cert
    )
    client = load(pki.issue("admin", "kubernetes-admin", "system:masters").cert)

    for leaf in (server, client):
        leaf.verify_directly_issued_by(ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "kubernetes" in sans.get_values_for_type(x509.DNSName)
    usage = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    # Kubernetes reads the user from CN and groups from O
    assert (
        client.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value
        == "system:masters"
    )
    assert (tmp_path / "admin.key").stat().st_mode & 0o777 == 0o600


def test_service_account_keys_are_an_rsa_pair(tmp_path):
    pair = PKI(tmp_path).service_account_keys()
    assert b"BEGIN PUBLIC KEY" in pair.cert.read_bytes()
    assert b"BEGIN PRIVATE KEY" in pair.key.read_bytes()
