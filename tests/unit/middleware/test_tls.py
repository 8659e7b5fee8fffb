"""The agent side's TLS settings: decided and checked when the factory is built."""

from __future__ import annotations

import datetime as dt
import logging
import re
import ssl
from pathlib import Path

import pytest

from memorystore.config import ClientConfig, ConfigError
from memorystore.middleware import MemoryMiddlewareFactory
from memorystore.middleware.client import tls_verify
from memorystore.operator import tls

HTTPS = "https://acme-memory.tenants.svc:8765"


def config(tmp_path: Path, endpoint: str = HTTPS, **tls_fields: object) -> ClientConfig:
    key = tmp_path / "api-key"
    key.write_text("k" * 40)
    return ClientConfig.model_validate(
        {"endpoint": endpoint, "apiKey": {"file": str(key)}, "tls": tls_fields}
    )


@pytest.fixture(scope="module")
def ca_pem() -> str:
    return tls.issue_ca("acme", dt.datetime.now(dt.UTC)).cert


def test_an_https_endpoint_is_verified_against_the_mounted_ca(tmp_path: Path, ca_pem: str):
    ca = tmp_path / "ca.crt"
    ca.write_text(ca_pem)
    verify = tls_verify(config(tmp_path, caFile=str(ca)))
    assert isinstance(verify, ssl.SSLContext)
    assert verify.verify_mode == ssl.CERT_REQUIRED and verify.check_hostname
    (loaded,) = verify.get_ca_certs()
    assert loaded["subject"] == (
        (("organizationName", "memorystore"),),
        (("commonName", "memorystore acme CA"),),
    )
    # no CA file: the system's CAs (httpx's default), still verified
    assert tls_verify(config(tmp_path)) is True


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "no such file"),
        ("", "it holds no PEM certificate"),
        ("not a certificate\n", "it holds no PEM certificate"),
    ],
    ids=["missing", "empty", "garbage"],
)
def test_an_unusable_ca_file_fails_the_factory_naming_field_and_file(
    tmp_path: Path, content: str | None, reason: str
):
    ca = tmp_path / "ca.crt"
    if content is not None:
        ca.write_text(content)
    cfg = config(tmp_path, caFile=str(ca))
    expected = f"tls.caFile: cannot use the CA file {ca}: {reason}"
    with pytest.raises(ConfigError) as raised:
        tls_verify(cfg)
    assert str(raised.value) == expected
    with pytest.raises(ConfigError, match=r"tls\.caFile"):
        MemoryMiddlewareFactory(cfg)


def test_a_directory_as_ca_file_names_the_file(tmp_path: Path):
    with pytest.raises(
        ConfigError, match=re.escape(f"tls.caFile: cannot use the CA file {tmp_path}")
    ):
        tls_verify(config(tmp_path, caFile=str(tmp_path)))


def test_verification_off_warns_and_needs_no_ca(tmp_path: Path, caplog):
    cfg = config(tmp_path, caFile=str(tmp_path / "absent.crt"), verify=False)
    with caplog.at_level(logging.WARNING, logger="memorystore.middleware"):
        assert tls_verify(cfg) is False
    assert "TLS verification is OFF" in caplog.text and HTTPS in caplog.text
    assert "k" * 40 not in caplog.text


def test_the_toggle_turns_verification_off_at_start_up(tmp_path: Path, caplog):
    key = tmp_path / "api-key"
    key.write_text("k" * 40)
    client_yaml = tmp_path / "client.yaml"
    client_yaml.write_text(
        f"endpoint: {HTTPS}\napiKey: {{file: {key}}}\ntls: {{caFile: {tmp_path / 'absent'}}}\n"
    )
    env = {"MEMORYSTORE_CLIENT_CONFIG": str(client_yaml)}
    with pytest.raises(ConfigError, match=r"tls\.caFile"):
        MemoryMiddlewareFactory.from_env(env)
    with caplog.at_level(logging.WARNING, logger="memorystore.middleware"):
        factory = MemoryMiddlewareFactory.from_env({**env, "MEMORYSTORE_VERIFY_TLS": "false"})
    assert factory.enabled and factory.client is not None and factory.client.verify is False
    assert "MEMORYSTORE_VERIFY_TLS=false" in caplog.text


def test_plain_http_needs_no_tls_settings(tmp_path: Path, caplog):
    cfg = config(tmp_path, "http://127.0.0.1:8765", caFile=str(tmp_path / "absent"), verify=False)
    with caplog.at_level(logging.WARNING, logger="memorystore.middleware"):
        assert tls_verify(cfg) is True
    assert caplog.text == ""
