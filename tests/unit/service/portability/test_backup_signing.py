"""Backup signatures (service/portability/backup/signing.py): the manifest's HMAC with the
store's backup key, where the key comes from, and every way a signature fails, said apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.config import ConfigError, SecretSource, ServiceBackup, ServiceConfig
from memorystore.service.portability.backup import BackupError, signing

KEY = b"k" * 40
OTHER = b"o" * 40
MANIFEST = b'{"format": "memorystore.backup/2", "name": "b"}\n'


def config(tmp_path: Path, **backup: object) -> ServiceConfig:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "api").write_text("service-key-0123456789")
    fields: dict[str, object] = {
        "data_dir": str(tmp_path / "data"),
        "api_key": SecretSource(file=str(tmp_path / "api")),
    }
    if backup:
        fields["backup"] = ServiceBackup(path=str(tmp_path / "target"), **backup)
    return ServiceConfig(**fields)


def key_of(value: bytes | None, where: str = "test") -> signing.VerifyingKey:
    return signing.VerifyingKey(value, where)


def test_a_signed_manifest_verifies_and_names_its_key():
    signature = signing.sign(MANIFEST, KEY)
    assert set(json.loads(signature)) == {"algorithm", "key_id", "mac"}
    said = signing.verify(MANIFEST, signature, key_of(KEY), trust_unsigned=False)
    assert said == f"signed, verified with key id {signing.key_id(KEY)}"
    assert KEY.decode() not in signature.decode(), "a signature holds no key"


@pytest.mark.parametrize(
    ("signature", "key", "reason"),
    [
        (None, KEY, "the backup is unsigned"),
        (b"not json", KEY, "not a signature this service writes"),
        (b'{"algorithm": "none", "key_id": "x", "mac": "y"}', KEY, "not a signature"),
        (signing.sign(MANIFEST, OTHER), KEY, "signed with another key"),
        (signing.sign(MANIFEST, KEY), None, "no backup signing key to verify it with"),
        (signing.sign(MANIFEST + b" ", KEY), KEY, "the manifest was changed after"),
    ],
)
def test_each_failure_is_refused_saying_which(
    signature: bytes | None, key: bytes | None, reason: str
):
    with pytest.raises(BackupError, match=reason) as caught:
        signing.verify(MANIFEST, signature, key_of(key), trust_unsigned=False)
    assert "--trust-unsigned" in str(caught.value)
    trusted = signing.verify(MANIFEST, signature, key_of(key), trust_unsigned=True)
    assert reason.split(" (")[0] in trusted and "trusted explicitly" in trusted


@settings(max_examples=200, deadline=None)
@given(manifest=st.binary(max_size=300), flip=st.integers(0, 299), bit=st.integers(0, 7))
def test_any_changed_byte_of_the_manifest_breaks_the_signature(manifest, flip, bit):
    signature = signing.sign(manifest, KEY)
    assert signing.verify(manifest, signature, key_of(KEY), False).startswith("signed")
    if not manifest:
        return
    changed = bytearray(manifest)
    changed[flip % len(manifest)] ^= 1 << bit
    with pytest.raises(BackupError, match="changed after the backup was signed"):
        signing.verify(bytes(changed), signature, key_of(KEY), False)


def test_the_default_key_is_generated_once_in_the_data_dir_private(tmp_path: Path):
    cfg = config(tmp_path, signing_key=None)
    first = signing.signing_key(cfg)
    path = tmp_path / "data" / signing.DEFAULT_KEY_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    assert signing.signing_key(cfg) == first and len(first) >= signing.MIN_KEY_CHARS


def test_a_short_or_missing_key_is_a_config_error_naming_the_field(tmp_path: Path):
    short = tmp_path / "short"
    short.write_text("tiny")
    with pytest.raises(ConfigError, match=r"backup.signingKey: .* at least 32 characters"):
        signing.signing_key(config(tmp_path, signing_key=SecretSource(file=str(short))))
    missing = SecretSource(file=str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match=r"backup\.signingKey"):
        signing.signing_key(config(tmp_path, signing_key=missing))


def test_a_restore_looks_for_its_key_in_order_and_never_makes_one(tmp_path: Path):
    given_file = tmp_path / "given"
    given_file.write_text("g" * 40)
    configured = tmp_path / "configured"
    configured.write_text("c" * 40)
    cfg = config(tmp_path, signing_key=SecretSource(file=str(configured)))
    assert signing.verifying_key(cfg, given_file).key == b"g" * 40
    assert signing.verifying_key(cfg).key == b"c" * 40
    bare = config(tmp_path / "bare")
    found = signing.verifying_key(bare)
    assert found.key is None and signing.DEFAULT_KEY_FILE in found.where
    assert not (tmp_path / "bare" / "data").exists(), "a restore writes nothing to look"
    (tmp_path / "bare" / "data").mkdir()
    (tmp_path / "bare" / "data" / signing.DEFAULT_KEY_FILE).write_text("d" * 40)
    assert signing.verifying_key(bare).key == b"d" * 40
