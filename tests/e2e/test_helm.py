"""The user's first commands, for real: `helm install`, the operator under the chart's
ServiceAccount, `kubectl apply -f examples/memorystore.yaml`, `helm upgrade`, `helm uninstall`.

The chart's Deployment is scheduled on a simulated node, which runs no containers, so the
operator itself runs as a local process — authenticated with a token of the chart's
ServiceAccount (TokenRequest), so the chart's RBAC is exactly what it has: a permission the
chart lacks makes the store never become Ready and this test fail. (A token was chosen over
`--as` impersonation: it is the identity an in-cluster pod gets.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from memorystore.operator import names
from memorystore.operator.crd import CRD_NAME, CRD_PATH
from memorystore_dev.devcluster.target import Kube
from memorystore_dev.operator_process import start_operator, stop_operator
from support.helm import helm, service_account_kubeconfig
from support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

ROOT = CRD_PATH.parents[1]
CHART = ROOT / "charts" / "memorystore"
EXAMPLE = ROOT / "examples" / "memorystore.yaml"
RELEASE = "memorystore"


@pytest.fixture
def system_namespace(kube: Kube, namespace: str) -> Iterator[str]:
    name = f"{namespace[:50]}-sys"  # created by `helm install --create-namespace`
    yield name
    helm(kube, "uninstall", RELEASE, "-n", name, check=False)
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_helm_install_apply_the_example_upgrade_and_uninstall(
    kube: Kube, namespace: str, system_namespace: str, tmp_path: Path
):
    # 1. helm install, watching the tenant namespace (a Role there, not cluster-wide)
    install = helm(
        kube,
        "install",
        RELEASE,
        str(CHART),
        "-n",
        system_namespace,
        "--create-namespace",
        "--set",
        f"watch.namespaces={{{namespace}}}",
        "--take-ownership",  # other suites may have applied the same CRD with kubectl
    )
    next_step = f"kubectl apply -n {namespace} -f examples/memorystore.yaml"
    assert next_step in install.stdout, "NOTES tells the next step"
    kube.wait_established(CRD_NAME)
    deployment = kube.get("deployment", RELEASE, "-n", system_namespace)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["operator", f"--namespace={namespace}"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]

    # 2. the operator, as the chart's ServiceAccount
    kubeconfig = service_account_kubeconfig(kube, system_namespace, account, tmp_path / "sa")
    denied = kube.kubectl(
        "auth",
        "can-i",
        "delete",
        "secrets",
        "-n",
        namespace,
        f"--as=system:serviceaccount:{system_namespace}:{account}",
        check=False,
    )
    assert denied.stdout.strip() == "no", "least privilege: no delete on Secrets"
    log = tmp_path / "operator.log"
    proc = start_operator(kubeconfig, namespace, log, resync_seconds=2)
    try:
        # 3. kubectl apply -f examples/memorystore.yaml → Ready, with the endpoint
        kube.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
        store = yaml.safe_load(EXAMPLE.read_text())["metadata"]["name"]

        def ready() -> dict | None:
            status = kube.get("mstore", store, "-n", namespace).get("status") or {}
            return status if status.get("phase") == "Ready" else None

        status = wait_for(ready, timeout=120)
        assert status["endpoint"] == names.memory_endpoint(store, namespace)
        assert "Forbidden" not in log.read_text(), "the chart's RBAC covers what it does"
    finally:
        stop_operator(proc)
        print(log.read_text()[-3000:])

    # 6. helm upgrade with changed values reaches the operator's Deployment
    helm(
        kube,
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        system_namespace,
        "--reuse-values",
        "--set",
        "images.memoryService=registry.example/memory-service:9.9.9",
    )
    upgraded = kube.get("deployment", RELEASE, "-n", system_namespace)
    env = {
        e["name"]: e.get("value")
        for e in upgraded["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["MEMORYSTORE_SERVICE_IMAGE"] == "registry.example/memory-service:9.9.9"

    # helm uninstall: the operator and its RBAC go, the CRD and the stores stay
    helm(kube, "uninstall", RELEASE, "-n", system_namespace)
    gone = kube.kubectl("get", "deployment", RELEASE, "-n", system_namespace, check=False)
    assert gone.returncode != 0
    assert (
        kube.kubectl(
            "get", "serviceaccount", account, "-n", system_namespace, check=False
        ).returncode
        != 0
    )
    kube.kubectl("get", "crd", CRD_NAME)
    kube.kubectl("get", "mstore", store, "-n", namespace)
