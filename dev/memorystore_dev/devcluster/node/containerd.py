"""The node's containerd: its config, the `ctr` client, and importing images into it.

Why its own: Debian's containerd runs with its root, state and socket in the cluster's
workdir, the CRI plugin pointed at the node's CNI network and the harness's pause image, and
no other listener (ttrpc, debug, metrics) so nothing of it is reachable from outside. Images
are imported, never pulled: no registry is reachable here.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from memorystore_dev.devcluster.node.cni import CNI_BIN

__all__ = ["containerd_config", "ctr", "import_image"]


def containerd_config(wd: Path, cni: Path, socket: Path, pause_ref: str) -> str:
    """config.toml of the node's containerd: root and state under `wd`, CRI socket `socket`."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{wd / "root"}"
state = "{wd / "state"}"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{socket}"

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{wd / "opt"}"

[{cri}]
  sandbox_image = "{pause_ref}"
  # CAP_SYS_RESOURCE is not in this machine's bounding set: a negative oom_score_adj fails.
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  discard_unpacked_layers = false

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
  Root = "{wd / "runc"}"

[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{cni / "net.d"}"
  max_conf_num = 1
"""


def ctr(socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`ctr` against the node's containerd, in the kubelet's namespace (k8s.io)."""
    return subprocess.run(
        ["ctr", f"--address={socket}", "--namespace=k8s.io", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def import_image(socket: Path, tar: Path) -> None:
    """Import a docker-archive or OCI tar into the node's containerd (namespace k8s.io)."""
    proc = ctr(socket, "images", "import", "--no-unpack=false", str(tar))
    if proc.returncode != 0:
        proc = ctr(socket, "images", "import", str(tar))
    if proc.returncode != 0:
        raise RuntimeError(f"ctr images import {tar} failed: {proc.stderr.strip()}")
