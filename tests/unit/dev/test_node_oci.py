"""The image archives the harness writes (node/oci.py): what containerd imports, byte for byte
reproducible."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from memorystore_dev.devcluster.node import oci


def _members(tar: Path) -> dict[str, bytes]:
    with tarfile.open(tar) as archive:
        return {
            m.name: archive.extractfile(m).read()  # type: ignore[union-attr]
            for m in archive.getmembers()
            if m.isfile()
        }


def test_a_docker_archive_has_manifest_config_and_one_reproducible_layer(tmp_path: Path):
    binary = tmp_path / "prog"
    binary.write_bytes(b"\x7fELF fake")
    first = oci.write_docker_archive(
        tmp_path / "a.tar", "memorystore.local/x:1", {"/bin/prog": binary}, ["/bin/prog"]
    )
    members = _members(first)
    manifest = json.loads(members["manifest.json"])
    assert manifest[0]["RepoTags"] == ["memorystore.local/x:1"]
    config = json.loads(members[manifest[0]["Config"]])
    assert config["config"]["Entrypoint"] == ["/bin/prog"]
    assert config["os"] == "linux" and config["architecture"] == "amd64"
    layer = members[manifest[0]["Layers"][0]]
    # The config names the layer by the digest of its (uncompressed) bytes, as docker does.
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as inner:
        prog = inner.getmember("bin/prog")
        assert prog.mode == 0o755 and prog.mtime == 0 and prog.uid == 0
        assert inner.getmember("bin").isdir()
    second = oci.write_docker_archive(
        tmp_path / "b.tar", "memorystore.local/x:1", {"/bin/prog": binary}, ["/bin/prog"]
    )
    assert first.read_bytes() == second.read_bytes()


def test_an_image_reference_without_a_tag_is_refused(tmp_path: Path):
    with pytest.raises(oci.ImageError, match="explicit tag"):
        oci.write_docker_archive(tmp_path / "x.tar", "localhost:5000/x", {"/x": b""}, ["/x"])
