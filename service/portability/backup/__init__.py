"""Whole-store backups and restores: the format and target (`files.py`), signing
(`signing.py`), taking one (`take.py`), reading one through its checks (`reader.py`,
`records.py`) and restoring it (`restore.py`). This is the surface the API, the CLI and the
benchmarks use."""

from memorystore.service.portability.backup.files import (
    ERASURES,
    FILES,
    FORMAT,
    HISTORY,
    LEGACY_FORMAT,
    MANIFEST,
    MEMORIES,
    POSTGRES_REFUSAL,
    SESSIONS,
    SIGNATURE,
    VECTORS,
    BackupError,
    name_problem,
)
from memorystore.service.portability.backup.restore import MARKER, pending_restore, restore
from memorystore.service.portability.backup.signing import DEFAULT_KEY_FILE, signing_key
from memorystore.service.portability.backup.take import (
    clean_partials,
    describe,
    remove,
    take,
    take_stopped,
)

__all__ = [
    "DEFAULT_KEY_FILE",
    "ERASURES",
    "FILES",
    "FORMAT",
    "HISTORY",
    "LEGACY_FORMAT",
    "MANIFEST",
    "MARKER",
    "MEMORIES",
    "POSTGRES_REFUSAL",
    "SESSIONS",
    "SIGNATURE",
    "VECTORS",
    "BackupError",
    "clean_partials",
    "describe",
    "name_problem",
    "pending_restore",
    "remove",
    "restore",
    "signing_key",
    "take",
    "take_stopped",
]
