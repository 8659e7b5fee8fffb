"""memorystore_dev.vendor: vendored files are found beside the checkout or where the variable
says, and a file that is not the pinned one is refused by name."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from memorystore_dev import vendor


def _vendor_with(tmp_path: Path, name: str, content: bytes, pinned: bytes | None = None) -> Path:
    folder = tmp_path / "vendor" / "qdrant"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(content)
    digest = hashlib.sha256(content if pinned is None else pinned).hexdigest()
    (folder / "SHA256SUMS").write_text(f"{digest}  {name}\n")
    return tmp_path / "vendor"


def test_the_default_folder_is_shared_vendor_beside_the_checkout(monkeypatch):
    monkeypatch.delenv(vendor.ENV, raising=False)
    assert vendor.vendor_dir() == vendor.CHECKOUT.parent / "shared" / "vendor"


def test_a_missing_file_names_itself_the_folder_and_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(vendor.ENV, str(tmp_path))
    with pytest.raises(vendor.VendorMissing) as caught:
        vendor.vendored(vendor.QDRANT_BINARY_GZ)
    message = str(caught.value)
    assert vendor.QDRANT_BINARY_GZ in message and str(tmp_path) in message
    assert vendor.ENV in message


def test_a_file_with_the_pinned_checksum_is_handed_out(monkeypatch, tmp_path):
    monkeypatch.setenv(vendor.ENV, str(_vendor_with(tmp_path, "x.bin", b"right")))
    assert vendor.vendored("qdrant/x.bin").read_bytes() == b"right"


def test_a_file_with_another_checksum_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(vendor.ENV, str(_vendor_with(tmp_path, "x.bin", b"wrong", b"right")))
    with pytest.raises(vendor.VendorError, match=r"x\.bin: sha256 .* but .* is pinned"):
        vendor.vendored("qdrant/x.bin")


def test_a_file_no_checksum_pins_is_refused(monkeypatch, tmp_path):
    root = _vendor_with(tmp_path, "x.bin", b"right")
    (root / "qdrant" / "other.bin").write_bytes(b"unpinned")
    monkeypatch.setenv(vendor.ENV, str(root))
    with pytest.raises(vendor.VendorError, match=r"pins no checksum for other\.bin"):
        vendor.vendored("qdrant/other.bin")


def test_a_gzip_that_unpacks_to_another_binary_is_refused(monkeypatch, tmp_path):
    packed = gzip.compress(b"not qdrant")
    root = _vendor_with(tmp_path, Path(vendor.QDRANT_BINARY_GZ).name, packed)
    inner = f"qdrant (the binary inside {Path(vendor.QDRANT_BINARY_GZ).name})"
    with (root / "qdrant" / "SHA256SUMS").open("a") as sums:
        sums.write(f"{hashlib.sha256(b'the real one').hexdigest()}  {inner}\n")
    monkeypatch.setenv(vendor.ENV, str(root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(vendor.VendorError, match="unpacks to sha256"):
        vendor.qdrant_binary()
    assert not list((tmp_path / "cache").rglob("qdrant")), "nothing half-checked is cached"
