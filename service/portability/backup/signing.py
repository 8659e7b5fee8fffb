"""Backups are signed, and a restore believes a backup only on its signature (or when told to).

Why: the manifest lists every file's size and SHA-256, but whoever writes the files can
compute those too, so a checksum alone proves nothing about where a backup came from. The
manifest is therefore signed, HMAC-SHA256 with the store's backup key (a Secret the operator
creates and mounts; outside a cluster a key generated once in the data directory), and the
signature vouches for every byte through the checksums. Someone who can write the backup
volume but not read the key cannot make a backup a restore accepts.

`manifest.sig` is one JSON object, `{"algorithm": "HMAC-SHA256", "key_id", "mac"}`: the MAC
of manifest.json's exact bytes, and the key's id (an HMAC of a constant with the key, not
the key) so that a refusal can say whether a backup was signed with another key or changed
after it was signed. A restore refuses an unsigned or mis-signed backup unless told to trust
it (`memorystore restore --trust-unsigned`, `spec.restore.trustUnsigned`), and says which.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path

from memorystore.config import ConfigError, SecretSource, ServiceConfig
from memorystore.service.portability.backup.files import MANIFEST, SIGNATURE, BackupError

__all__ = [
    "ALGORITHM",
    "DEFAULT_KEY_FILE",
    "MIN_KEY_CHARS",
    "TRUST_HINT",
    "VerifyingKey",
    "key_id",
    "sign",
    "signing_key",
    "signing_source",
    "verify",
    "verifying_key",
]

log = logging.getLogger("memorystore.service")

ALGORITHM = "HMAC-SHA256"
DEFAULT_KEY_FILE = "backup-signing-key"  # in the data directory, when backup.signingKey is unset
MIN_KEY_CHARS = 32
TRUST_HINT = (
    "restore it anyway only if you know where it comes from: `memorystore restore "
    "--trust-unsigned` (spec.restore.trustUnsigned in a MemoryStore)"
)
_KEY_ID_INPUT = b"memorystore.backup key id"


def signing_source(cfg: ServiceConfig) -> SecretSource:
    """Where the key backups are signed with comes from: backup.signingKey, else a key
    generated once (mode 0600) in the data directory."""
    configured = cfg.backup.signing_key if cfg.backup is not None else None
    if configured is not None:
        return configured
    return SecretSource(file=str(Path(cfg.data_dir) / DEFAULT_KEY_FILE), generate=True)


def _checked(value: str, field: str) -> bytes:
    if len(value) < MIN_KEY_CHARS:
        raise ConfigError(
            f"{field}: a backup signing key must have at least {MIN_KEY_CHARS} characters, "
            f"not {len(value)}"
        )
    return value.encode("utf-8")


def signing_key(cfg: ServiceConfig) -> bytes:
    """The key to sign with, read now (generated when configured so); ConfigError naming
    the field when it cannot be read or is too short (the service checks it at start-up)."""
    source = signing_source(cfg)
    return _checked(source.resolve("backup.signingKey").get_secret_value(), "backup.signingKey")


class VerifyingKey:
    """The key a restore verifies with, or none, and where it was looked for."""

    def __init__(self, key: bytes | None, where: str) -> None:
        self.key = key
        self.where = where


def verifying_key(cfg: ServiceConfig, key_file: Path | None = None) -> VerifyingKey:
    """The key a restore checks a backup's signature with: `--key FILE`, else
    backup.signingKey, else the data directory's generated key if it exists (never made
    here: a restore writes nothing before the backup is checked)."""
    if key_file is not None:
        source, field = SecretSource(file=str(key_file)), "--key"
    elif cfg.backup is not None and cfg.backup.signing_key is not None:
        source, field = cfg.backup.signing_key, "backup.signingKey"
    else:
        path = Path(cfg.data_dir) / DEFAULT_KEY_FILE
        source, field = SecretSource(file=str(path), optional=True), str(path)
    where = f"{field} ({source.file})" if source.file and field != source.file else field
    value = source.read(field)
    if value is None:
        return VerifyingKey(None, where)
    return VerifyingKey(_checked(value.get_secret_value(), field), where)


def key_id(key: bytes) -> str:
    """A short public name for a key: an HMAC of a constant with it (not the key's hash)."""
    return hmac.new(key, _KEY_ID_INPUT, hashlib.sha256).hexdigest()[:16]


def _mac(manifest: bytes, key: bytes) -> str:
    return hmac.new(key, manifest, hashlib.sha256).hexdigest()


def sign(manifest: bytes, key: bytes) -> bytes:
    """`manifest.sig`'s content for these exact manifest bytes."""
    body = {"algorithm": ALGORITHM, "key_id": key_id(key), "mac": _mac(manifest, key)}
    return (json.dumps(body, sort_keys=True) + "\n").encode()


def _parse(signature: bytes) -> tuple[str, str] | None:
    """(key_id, mac) of a signature file, or None when it is not one this service writes."""
    try:
        body = json.loads(signature)
    except ValueError:
        return None
    if not isinstance(body, dict) or set(body) != {"algorithm", "key_id", "mac"}:
        return None
    kid, mac = body["key_id"], body["mac"]
    if body["algorithm"] != ALGORITHM or not isinstance(kid, str) or not isinstance(mac, str):
        return None
    return kid[:64], mac[:128]


def verify(
    manifest: bytes, signature: bytes | None, key: VerifyingKey, trust_unsigned: bool
) -> str:
    """How far the backup is to be believed, as one line for the restore's summary; a
    BackupError naming why when it is not signed with `key` and not trusted explicitly."""
    problem = None
    parsed = None if signature is None else _parse(signature)
    if signature is None:
        problem = f"the backup is unsigned (it has no {SIGNATURE})"
    elif parsed is None:
        problem = f"{SIGNATURE} is not a signature this service writes ({ALGORITHM})"
    elif key.key is None:
        problem = (
            f"the backup is signed (key id {parsed[0]}), but there is no backup signing key "
            f"to verify it with: looked for {key.where}"
        )
    elif parsed[0] != key_id(key.key):
        problem = (
            f"the backup was signed with another key (key id {parsed[0]}), not the backup "
            f"key this restore verifies with (key id {key_id(key.key)}, {key.where}): give "
            "the key it was signed with (--key FILE)"
        )
    elif not hmac.compare_digest(parsed[1], _mac(manifest, key.key)):
        problem = (
            f"{MANIFEST} does not match its signature: the manifest was changed after the "
            "backup was signed"
        )
    if problem is None:
        assert parsed is not None
        return f"signed, verified with key id {parsed[0]}"
    if not trust_unsigned:
        raise BackupError(f"refused: {problem}; {TRUST_HINT}")
    log.warning("restore of an unverified backup, trusted explicitly: %s", problem)
    return f"not verified ({problem}); trusted explicitly (--trust-unsigned)"
