"""The hostPath provisioner (node/provisioner.py): its volumes, and its refusal to delete
outside its root."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore_dev.devcluster.node.provisioner import (
    PROVISIONER,
    HostPathProvisioner,
    storage_class,
    volume_for,
)


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
