"""What no registry serves, vendored beside the checkout: `../shared/vendor/<name>/`.

Why a module: the Qdrant server binary and pgvector's C source come from there (their READMEs
say how they were made), never from a download site and never through a registry meant for
another kind of package. Every file is checked against its folder's `SHA256SUMS` before use,
so a truncated copy or another build is refused by name instead of half-working. The folder is
found relative to this checkout; `MEMORYSTORE_VENDOR_DIR` points elsewhere (a user's machine).

Where a file is absent, `VendorMissing` says what and where; the tests turn it into a skip with
that reason, except under `CI=true`, where it is a failure (tests/support/vendored.py).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
from pathlib import Path

from memorystore_dev.devcluster.tools import cache_root, file_lock

__all__ = [
    "ENV",
    "PGVECTOR_SOURCE",
    "PGVECTOR_VERSION",
    "QDRANT_BINARY_GZ",
    "QDRANT_VERSION",
    "VendorError",
    "VendorMissing",
    "qdrant_binary",
    "vendor_dir",
    "vendored",
]

ENV = "MEMORYSTORE_VENDOR_DIR"
CHECKOUT = Path(__file__).resolve().parents[2]
QDRANT_VERSION = "1.18.3"
QDRANT_BINARY_GZ = f"qdrant/qdrant-{QDRANT_VERSION}-linux-x86_64.gz"
PGVECTOR_VERSION = "0.8.1"
PGVECTOR_SOURCE = f"pgvector/pgvector-{PGVECTOR_VERSION}.tar.gz"
# pgvector's folder names its checksum in its README only: pinned here, as the harness pins it
PINNED = {PGVECTOR_SOURCE: "5254da7ab5ec6192ac5bc37569294f504ad82ae7a111513ab8a8da8479963bee"}


class VendorError(RuntimeError):
    """A vendored file is there but is not the one pinned (checksum mismatch)."""


class VendorMissing(VendorError):
    """A vendored file is not on this machine: the message names it and the folder searched."""


def vendor_dir() -> Path:
    """`$MEMORYSTORE_VENDOR_DIR`, else `../shared/vendor` beside this checkout."""
    override = os.environ.get(ENV, "")
    return Path(override) if override else CHECKOUT.parent / "shared" / "vendor"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _expected(relative: str) -> str:
    """The pinned checksum of `relative`: its folder's SHA256SUMS, else PINNED."""
    if relative in PINNED:
        return PINNED[relative]
    folder, name = relative.rsplit("/", 1)
    sums = vendor_dir() / folder / "SHA256SUMS"
    for line in sums.read_text().splitlines() if sums.is_file() else []:
        parts = line.split(maxsplit=1)
        if len(parts) == 2 and parts[1].strip() == name:
            return parts[0]
    raise VendorError(f"{sums} pins no checksum for {name}")


def vendored(relative: str) -> Path:
    """The vendored file `relative` (e.g. QDRANT_BINARY_GZ), its checksum verified."""
    path = vendor_dir() / relative
    if not path.is_file():
        raise VendorMissing(
            f"{relative} is not vendored here: looked in {vendor_dir()} "
            f"(set {ENV} to the folder that holds it)"
        )
    expected, actual = _expected(relative), _sha256(path)
    if actual != expected:
        raise VendorError(f"{path}: sha256 {actual}, but {expected} is pinned")
    return path


def qdrant_binary() -> Path:
    """The vendored Qdrant server, unpacked once into the user cache (named by its checksum,
    so another build never reuses a stale binary) and checked against the pinned sha256."""
    source = vendored(QDRANT_BINARY_GZ)
    expected = _expected(f"qdrant/qdrant (the binary inside {Path(QDRANT_BINARY_GZ).name})")
    target = cache_root().parent / f"qdrant-{QDRANT_VERSION}-{expected[:16]}" / "qdrant"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent.parent / f".qdrant-{QDRANT_VERSION}.lock"):
        if target.is_file():
            return target
        partial = target.with_suffix(".partial")
        with gzip.open(source) as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        if (actual := _sha256(partial)) != expected:
            partial.unlink()
            raise VendorError(f"{source} unpacks to sha256 {actual}, but {expected} is pinned")
        partial.chmod(0o755)
        partial.rename(target)
    return target
