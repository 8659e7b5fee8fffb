"""The real node's pure parts and small real pieces: image archives, the provisioner's
volumes and its refusal to delete outside its root, the API relay, requirement messages."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from memorystore_dev.devcluster import node
from memorystore_dev.devcluster.node import oci
from memorystore_dev.devcluster.node.provisioner import (
    PROVISIONER,
    HostPathProvisioner,
    storage_class,
    volume_for,
)


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


def _claim(**spec: object) -> dict:
    return {
        "metadata": {"namespace": "ns", "name": "data", "uid": "u-1"},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}, **spec},
    }


def test_a_provisioned_volume_is_bound_to_its_claim_and_pinned_to_the_node(tmp_path: Path):
    pv = volume_for(
        _claim(accessModes=["ReadWriteOnce"]), "real-node-1", tmp_path / "pvc-u-1", "Delete", "c"
    )
    assert pv["metadata"]["name"] == "pvc-u-1"
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == PROVISIONER
    spec = pv["spec"]
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "data",
        "uid": "u-1",
    }
    assert spec["capacity"] == {"storage": "1Gi"}
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    assert spec["hostPath"] == {"path": str(tmp_path / "pvc-u-1"), "type": "Directory"}
    term = spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchFields"][0]
    assert term == {"key": "metadata.name", "operator": "In", "values": ["real-node-1"]}
    cls = storage_class()
    assert cls["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert cls["volumeBindingMode"] == "WaitForFirstConsumer"
    assert cls["provisioner"] == PROVISIONER


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("pvc-1", "/etc"),  # a PV carrying our annotation but pointing elsewhere
        ("pvc-1", "{root}/../escape/pvc-1"),
        ("pvc-1", "{root}/pvc-2"),  # another volume's folder
        ("pvc-1", "{root}"),
        ("pvc-1", ""),
    ],
)
def test_the_provisioner_deletes_only_the_folder_named_after_the_volume(
    tmp_path: Path, name: str, path: str
):
    root = tmp_path / "volumes"
    for folder in (root / "pvc-1", root / "pvc-2", tmp_path / "escape" / "pvc-1"):
        folder.mkdir(parents=True)
        (folder / "keep").write_text("x")
    prov = HostPathProvisioner(None, root, tmp_path / "log", "n")  # type: ignore[arg-type]
    prov.delete_folder(name, path.format(root=root))
    assert (root / "pvc-1" / "keep").exists()
    assert (root / "pvc-2" / "keep").exists()
    assert (tmp_path / "escape" / "pvc-1" / "keep").exists()
    assert "refused" in (tmp_path / "log").read_text()
    prov.delete_folder("pvc-1", str(root / "pvc-1"))
    assert not (root / "pvc-1").exists()


def test_the_relay_copies_both_ways_and_passes_half_close(tmp_path: Path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    target = server.getsockname()[1]

    def echo_until_eof() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
            conn.sendall(data[::-1])  # answer only after the client's EOF arrived

    threading.Thread(target=echo_until_eof, daemon=True).start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        listen = probe.getsockname()[1]
    relay = subprocess.Popen(
        [sys.executable, "-m", "memorystore_dev.devcluster.node.relay",
         f"127.0.0.1:{listen}", f"127.0.0.1:{target}"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert relay.stdout is not None
        assert "relaying" in relay.stdout.readline()
        payload = bytes(range(256)) * 1000
        with socket.create_connection(("127.0.0.1", listen), timeout=5) as client:
            client.sendall(payload)
            client.shutdown(socket.SHUT_WR)
            got = b""
            while chunk := client.recv(65536):
                got += chunk
        assert got == payload[::-1]
    finally:
        relay.terminate()
        assert relay.wait(timeout=10) == 0
        server.close()


def test_the_relay_refuses_a_bad_address():
    proc = subprocess.run(
        [sys.executable, "-m", "memorystore_dev.devcluster.node.relay", "nohost", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode != 0
    assert "not HOST:PORT: 'nohost'" in proc.stderr


def test_missing_packages_are_named_with_the_make_step(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(node.shutil, "which", lambda cmd, path=None: None)
    monkeypatch.setattr(node, "CNI_BIN", Path("/nonexistent"))
    problems = " ".join(node.missing_requirements({}))
    for package in ("containerd", "runc", "iptables", "conntrack", "ipset"):
        assert f"Debian package {package} is missing" in problems
    assert "containernetworking-plugins" in problems
    assert "make node-deps" in problems
    assert "tool kubelet was not built" in problems


def test_a_start_error_names_the_step_and_the_log():
    err = node.NodeStartError("kubelet", "node not Ready after 120 s", Path("/x/kubelet.log"))
    assert str(err) == (
        "real node: step 'kubelet' failed: node not Ready after 120 s; log: /x/kubelet.log"
    )
