"""Long-lived probe pods on the real node, for the NetworkPolicy tests that run there
(tests/e2e/test_netpol_real_node.py: the stores' policies; test_operator_netpol_real_node.py:
the operator's). Each pod serves one TCP port (`nodeprobe serve:PORT`, its readiness a TCP
probe) and probes run inside it by `kubectl exec`, so each pod's address is in the API
before it connects: the enforcer knows who is asking."""

from __future__ import annotations

import json
import re
from typing import Any

from memorystore_dev.devcluster.node import REAL_NODE_TAINT
from support.real_node import RealNodeRun

__all__ = ["Pods", "probe_pod", "without_owner"]


def probe_pod(name: str, image: str, port: int, labels: dict[str, str]) -> dict[str, Any]:
    """A long-lived probe pod on the real node, serving `port` (its probes run by exec)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": {"memorystore.dev/node": "real"},
            "tolerations": [{**REAL_NODE_TAINT, "operator": "Equal"}],
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "args": [f"serve:{port}"],
                    "ports": [{"containerPort": port}],
                    "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
                }
            ],
        },
    }


def without_owner(obj: dict[str, Any]) -> dict[str, Any]:
    """A builder's object minus its owner reference (no MemoryStore owns it here, and the
    garbage collector deletes what a missing owner owns)."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "ownerReferences"}
    return {**obj, "metadata": meta}


class Pods:
    def __init__(self, run: RealNodeRun) -> None:
        self.kube = run.kube
        self.image = run.probe_image

    def start(self, ns: str, name: str, port: int, labels: dict[str, str]) -> str:
        self.kube.apply(json.dumps(probe_pod(name, self.image, port, labels)), "-n", ns)
        return name

    def ready(self, ns: str, name: str) -> str:
        self.kube.kubectl(
            "wait", "--for=condition=Ready", f"pod/{name}", "-n", ns, "--timeout=120s"
        )
        return str(self.kube.get("pod", name, "-n", ns)["status"]["podIP"])

    def check(self, ns: str, name: str, *checks: str) -> bool:
        """Whether every nodeprobe check (e.g. `connect:HOST:PORT`, `api`) passes in the pod."""
        out = self.kube.kubectl("exec", name, "-n", ns, "--", "/nodeprobe", *checks, check=False)
        if out.returncode not in (0, 1) or not re.search(r"^(OK|FAIL) ", out.stdout, re.M):
            raise AssertionError(f"exec into {ns}/{name} failed: {out.stdout}{out.stderr}")
        return out.returncode == 0

    def reaches(self, ns: str, name: str, target: str) -> bool:
        """Whether pod `name` opens a TCP connection to `target` (host:port) within 3 s."""
        return self.check(ns, name, f"connect:{target}")
