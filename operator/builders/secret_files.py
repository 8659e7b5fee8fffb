"""The secrets the memory service reads, as mounted files: which Secret key becomes which file.

Why files: an environment variable is shown by `kubectl describe pod`, copied into crash
dumps and inherited by every child process; a mounted Secret is none of these, and kubelet
updates the file in place when the Secret changes. So no container the operator creates has
a secret in its environment (tests/unit/operator/test_secret_files.py checks every builder's
output and every golden manifest). The service's own key, its TLS pair and the backup key
are whole-Secret mounts of their own (memory_service.py); this module covers one key each of
the Secrets a spec names, plus the managed Qdrant's API key from the keys Secret.

One table (`service_secret_files`) feeds both the pod spec (volumes and mounts) and the
config file (`{file: PATH}`, configs.py reads the same paths), so the two cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memorystore.operator import names
from memorystore.operator.builders.model import Owner
from memorystore.operator.builders.paths import (
    EMBEDDER_KEY_FILE,
    HISTORY_DSN_FILE,
    LLM_KEY_FILE,
    QDRANT_CA_FILE,
    QDRANT_KEY_FILE,
    SECRET_FILE_MODE,
    VECTOR_DSN_FILE,
)
from memorystore.spec import MemoryStoreSpec

__all__ = ["SecretFile", "secret_mounts", "secret_volumes", "service_secret_files"]


@dataclass(frozen=True)
class SecretFile:
    """One key of a Secret, mounted read-only as the file `path` (its own directory)."""

    secret: str
    key: str
    path: str

    @property
    def volume(self) -> str:
        """The volume's name: the file's directory name (unique per purpose)."""
        return self.path.rsplit("/", 2)[1]

    @property
    def directory(self) -> str:
        return self.path.rsplit("/", 1)[0]

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[1]


def service_secret_files(owner: Owner, spec: MemoryStoreSpec) -> list[SecretFile]:
    """Every secret the memory service reads from a Secret key (besides its own key, its
        certificate and the backup key; a Qdrant CA is no secret but is read and followed the same
    way), in a fixed order. Needs a spec `check_spec` accepted."""
    files: list[SecretFile] = []
    vs = spec.vector_store
    if vs.managed is not None:
        files.append(
            SecretFile(names.keys_secret_name(owner.name), names.QDRANT_API_KEY, QDRANT_KEY_FILE)
        )
        if vs.managed.tls:  # the CA only: the certificate's key stays in the Qdrant pods
            tls = names.qdrant_tls_secret_name(owner.name)
            files.append(SecretFile(tls, names.CA_CERT, QDRANT_CA_FILE))
    elif vs.external is not None:
        if vs.external.api_key_secret_ref is not None:
            ref = vs.external.api_key_secret_ref
            files.append(SecretFile(ref.name, ref.key, QDRANT_KEY_FILE))
        if vs.external.ca_secret_ref is not None:
            ref = vs.external.ca_secret_ref
            files.append(SecretFile(ref.name, ref.key, QDRANT_CA_FILE))
    if spec.embedder.api_key_secret_ref is not None:
        ref = spec.embedder.api_key_secret_ref
        files.append(SecretFile(ref.name, ref.key, EMBEDDER_KEY_FILE))
    if spec.llm is not None and spec.llm.api_key_secret_ref is not None:
        ref = spec.llm.api_key_secret_ref
        files.append(SecretFile(ref.name, ref.key, LLM_KEY_FILE))
    if spec.history_db.postgres is not None:
        ref = spec.history_db.postgres.dsn_secret_ref
        files.append(SecretFile(ref.name, ref.key, HISTORY_DSN_FILE))
    if vs.postgres is not None and vs.postgres.dsn_secret_ref is not None:
        ref = vs.postgres.dsn_secret_ref
        files.append(SecretFile(ref.name, ref.key, VECTOR_DSN_FILE))
    return files


def secret_volumes(files: list[SecretFile]) -> list[dict[str, Any]]:
    """One Secret volume per file, holding only that key (no other key of the Secret is
    mounted), 0440: root and the pod's fsGroup read it, nobody writes it."""
    return [
        {
            "name": f.volume,
            "secret": {
                "defaultMode": SECRET_FILE_MODE,
                "items": [{"key": f.key, "path": f.file_name}],
                "secretName": f.secret,
            },
        }
        for f in files
    ]


def secret_mounts(files: list[SecretFile]) -> list[dict[str, Any]]:
    """The directory of each file, read-only. Whole directories, no subPath: kubelet then
    replaces the file in place when the Secret changes."""
    return [{"mountPath": f.directory, "name": f.volume, "readOnly": True} for f in files]
