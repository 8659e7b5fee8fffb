"""The Helm chart (charts/memorystore), rendered by the pinned helm the project builds.

Lint, render in the three install modes (the default: the release's own namespace; a list
of namespaces; cluster-wide, an explicit opt-in) and check what matters: the operator runs
restricted, its command line parses with the real CLI, its RBAC is exactly the API calls
the operator makes in each mode (the rules are kept below as a literal, each with its source
in the operator code), the CRD is the generated crds/memorystore.yaml and is kept on
uninstall, and every rendered object is valid for the Kubernetes versions the chart supports
(kubernetes-validate's bundled schemas, offline). The operator's NetworkPolicy:
test_network_policy.py; checkov over the chart: test_checkov.py.

A helm that cannot be built is a failure here, never a skip.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import shutil
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, all_versions
from lightkube import codecs
from unit.charts.helm_chart import (
    CHART,
    CLUSTER_WIDE,
    NAMESPACE,
    NAMESPACED,
    RELEASE,
    WATCHED,
    of_kind,
    one,
    render,
    run_helm,
)

import memorystore.operator
from memorystore.cli import build_parser
from memorystore.operator import builders, settings
from memorystore.operator.builders.model import Images, Keys, Owner
from memorystore.operator.builders.secrets import keys_secret
from memorystore.operator.crd import BACKUP_CRD_PATH, CRD_PATH
from memorystore.spec import MemoryStoreSpec
from support.paths import REPO

ROOT = REPO
MODES = {"default": [], "namespaces": NAMESPACED, "cluster-wide": CLUSTER_WIDE}
MONITORED = ["--set", "metrics.serviceMonitor.enabled=true"]

# Only when `make tools` has not built helm yet does the first test wait for a cold build
# (minutes); every helm command itself takes well under a second.
pytestmark = pytest.mark.timeout(1800)

Rules = dict[tuple[str, str], set[str]]

# --- the RBAC the operator needs, and where each permission comes from -------------------
#
# (apiGroup, resource) -> verbs, in every namespace the operator watches.
NAMESPACED_RULES: Rules = {
    # kopf watches the handled resource (handlers.on_change: @kopf.on.create/update/resume),
    # and the resync loop lists the stores (resync.resync: client.list); every reconcile
    # reads the live object first (reconcile.Reconciler._reconcile_live: client.get);
    # patch: kopf keeps its progress and diff-base annotations on the object
    # (handlers.configure: AnnotationsProgressStorage / AnnotationsDiffBaseStorage).
    ("memorystore.dev", "memorystores"): {"get", "list", "watch", "patch"},
    # reconcile.Reconciler._reconcile_live merge-patches MemoryStoreResource.Status when the
    # status changed.
    ("memorystore.dev", "memorystores/status"): {"patch"},
    # Children carry an owner reference with blockOwnerDeletion: true
    # (builders.common.owner_reference); with the OwnerReferencesPermissionEnforcement admission
    # plugin (on in e.g. OpenShift) that needs update on the owner's finalizers: without
    # it no child is ever created there. (That plugin also wants delete on an existing
    # object whose ownerReferences change, which only a deletionPolicy change does, to the
    # keys Secret and the data claim; delete is deliberately not granted.)
    ("memorystore.dev", "memorystores/finalizers"): {"update"},
    # reconcile._event posts a core/v1 Event on a phase change; kopf posts its own
    # warnings as core/v1 Events (settings.posting.level = WARNING).
    ("", "events"): {"create"},
    # apply.ensure_keys: get <store>-keys, create it once, patch its ownerReferences;
    # apply.ensure_service_key: get <store>-service-key (and <store>-client if it was lost),
    # create it, merge-patch it on rotation/expiry;
    # apply.missing_secrets: get each Secret a spec names; the client Secret is applied
    # (apply.apply_changed reads it first: Secrets are not watched, so no list/watch here).
    ("", "secrets"): {"get", "create", "patch"},
    # Server-side apply of every child (apply.apply_changed): an apply PATCH, which the API
    # server also authorizes as create while the object does not exist yet; watch: the
    # children watch (watch.follow, by the managed-by label) keeps the ledger current.
    ("", "configmaps"): {"watch", "create", "patch"},
    ("", "services"): {"watch", "create", "patch"},
    ("networking.k8s.io", "networkpolicies"): {"watch", "create", "patch"},
    ("policy", "poddisruptionbudgets"): {"watch", "create", "patch"},
    # ... plus apply.pending_claims (list by the store's label selector) and
    # backups.claim_exists / backups._preconditions (get spec.backup.volume's claim).
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "create", "patch"},
    # kopf watches MemoryStoreBackups (handlers.on_backup: create/resume) and keeps its
    # annotations on them (patch); backups.get_backup and backups._run_backup read one;
    # backups.keep_schedule lists a store's scheduled ones, creates the one due and deletes
    # those past retention (backups._prune).
    ("memorystore.dev", "memorystorebackups"): {
        "get",
        "list",
        "watch",
        "create",
        "patch",
        "delete",
    },
    # backups._set_status merge-patches a backup's status.
    ("memorystore.dev", "memorystorebackups/status"): {"patch"},
    # backups.service_pods: the restore init container's termination message.
    ("", "pods"): {"list"},
    # ... plus apply.get_workload (the two workloads' readiness for status).
    ("apps", "deployments"): {"get", "watch", "create", "patch"},
    ("apps", "statefulsets"): {"get", "watch", "create", "patch"},
    # apply.ensure_tls (spec.tls.issuerRef): server-side apply of the Certificate; once
    # issuerRef is gone, get the store's Certificate and delete it (apply._retire_certificate).
    # The Secrets it reads and writes (<store>-ca, <store>-tls) are covered above.
    ("cert-manager.io", "certificates"): {"get", "create", "patch", "delete"},
    # apply.apply_if_served: server-side apply of the store's PodMonitor (apply_changed reads
    # it first: PodMonitors are not watched), while monitoring.podMonitors.enabled (default).
    ("monitoring.coreos.com", "podmonitors"): {"get", "create", "patch"},
}
# Outside any namespace, in both modes: kopf's resource observer lists and watches CRDs to
# (re)discover MemoryStores when their CRD appears or changes (kopf/_core/reactor/
# observation.py: resource_observer); without it an operator that starts before the CRD is
# Established serves nothing until restarted. Discovery (/api, /apis) needs no rule.
CRDS = "memorystorebackups.memorystore.dev,memorystores.memorystore.dev"
CLUSTER_RULES: Rules = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    # storage_version.migrate reads which version each of our two CRDs stores and records.
    ("apiextensions.k8s.io", f"customresourcedefinitions named {CRDS}"): {"get"},
}
# Outside any namespace, only cluster-wide: storage_version.migrate sets storedVersions once
# it has rewritten every object (only an operator watching every namespace has seen them).
CLUSTER_WIDE_RULES: Rules = {
    ("apiextensions.k8s.io", f"customresourcedefinitions/status named {CRDS}"): {"patch"},
}
# Outside any namespace, only with --namespace: kopf's namespace observer (observation.py:
# namespace_observer) lists and watches namespaces. Without it kopf logs an error and retries
# with backoff for about 90 s before falling back to the given names, and serves no event
# meanwhile (seen on a real API server). Cluster-wide kopf never lists namespaces.
NAMESPACE_OBSERVER_RULES: Rules = {("", "namespaces"): {"list", "watch"}}
# kopf's share above was read from this version's source; re-check it when kopf moves.
KOPF_VERSION = "1.45.2"
# Methods the operator calls on its lightkube client, and the RBAC verbs each needs.
CLIENT_VERBS = {
    "get": {"get"},
    "list": {"list"},
    "create": {"create"},
    "patch": {"patch"},
    "apply": {"create", "patch"},
    "delete": {"delete"},
    "watch": {"watch"},
}


# --- helpers --------------------------------------------------------------------------------


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (only,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return only


def rules_of(role: dict[str, Any]) -> Rules:
    """A Role's rules as (apiGroup, resource) -> verbs: exactly the access they grant; a rule
    limited to some objects keys "<resource> named <names, sorted>"."""
    granted: Rules = {}
    for rule in role["rules"]:
        assert set(rule) - {"resourceNames"} == {"apiGroups", "resources", "verbs"}, (
            f"no nonResourceURLs expected: {rule}"
        )
        for field in rule.values():
            assert "*" not in field, f"no wildcards: {rule}"
        named = (
            f" named {','.join(sorted(rule['resourceNames']))}" if "resourceNames" in rule else ""
        )
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource + named), set()).update(rule["verbs"])
    return granted


def chart_meta() -> dict[str, Any]:
    return yaml.safe_load((CHART / "Chart.yaml").read_text())


def same(a: Any, b: Any, path: str = "") -> None:
    """Deep equality that tells a bool from a number and a string from either (Python's ==
    does not); an int equals a float of the same value (Go renders 1.0 as 1)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys differ: {sorted(a.keys() ^ b.keys())}"
        for key in a:
            same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, bool) or isinstance(b, bool):
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"
    elif isinstance(a, int | float) and isinstance(b, int | float):
        assert a == b, f"{path}: {a!r} != {b!r}"
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"


# --- lint -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values", [[], NAMESPACED, CLUSTER_WIDE, MONITORED], ids=["default", "ns", "all", "mon"]
)
def test_helm_lint_strict_is_clean(helm: Path, values: list[str]):
    result = run_helm(helm, "lint", "--strict", str(CHART), *values, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


# --- what a default release contains ---------------------------------------------------------


def test_a_default_release_watches_only_its_own_namespace_with_labels_on_everything(
    helm: Path,
):
    objects = render(helm)
    assert sorted(o["kind"] for o in objects) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "CustomResourceDefinition",
        "Deployment",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    assert one(objects, "Role")["metadata"]["namespace"] == NAMESPACE
    app_version = chart_meta()["appVersion"]
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "memorystore"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/part-of"] == "memorystore"
        assert labels["app.kubernetes.io/version"] == app_version
        assert labels["helm.sh/chart"] == f"memorystore-{chart_meta()['version']}"
        if obj["kind"] not in ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    # The operator's pods never match a MemoryStore's children, which share name=memorystore
    # but carry component=qdrant|memory-service|client|keys (operator/names.py).
    assert pod_labels["app.kubernetes.io/component"] == "operator"
    selector = one(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert selector["app.kubernetes.io/component"] == "operator"


def test_the_chart_versions_follow_the_package(helm: Path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart_meta()["appVersion"] == project["version"]
    assert container(render(helm))["image"] == f"ghcr.io/memorystore/operator:{project['version']}"
    pinned = container(render(helm, "--set", "image.tag=0.2.0-rc.1"))
    assert pinned["image"] == "ghcr.io/memorystore/operator:0.2.0-rc.1"


def test_the_operator_runs_restricted(helm: Path):
    deployment = one(render(helm), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 1, "kopf runs standalone: one operator only"
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}, "never two during upgrades"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (operator,) = pod["containers"]
    security = operator["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True
    assert security["privileged"] is False
    assert security["runAsNonRoot"] is True
    # the only writable place: /tmp, an emptyDir
    (mount,) = operator["volumeMounts"]
    assert mount["mountPath"] == "/tmp"
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert "emptyDir" in volume
    assert operator["resources"]["requests"] and operator["resources"]["limits"]["memory"]
    assert pod["serviceAccountName"] == one(render(helm), "ServiceAccount")["metadata"]["name"]


@pytest.mark.parametrize("mode", MODES)
def test_the_command_line_parses_with_the_real_cli_and_the_probes_hit_its_endpoint(
    helm: Path, mode: str
):
    operator = container(render(helm, *MODES[mode]))
    assert operator["command"] == ["memorystore"]
    args = build_parser().parse_args(operator["args"])
    assert args.command == "operator"
    if mode == "cluster-wide":
        assert args.all_namespaces and not args.namespace
    else:
        watched = WATCHED if mode == "namespaces" else [NAMESPACE]
        assert args.namespace == watched and not args.all_namespaces
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert args.metrics_port == ports["metrics"] == 9090
    liveness = re.fullmatch(r"http://0\.0\.0\.0:(\d+)(/\S+)", args.liveness)
    assert liveness, args.liveness
    assert int(liveness[1]) == ports["health"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert operator[probe]["httpGet"] == {"path": liveness[2], "port": "health"}, probe


def test_the_operator_gets_the_children_images_from_the_values(helm: Path):
    env = {e["name"]: e["value"] for e in container(render(helm))["env"] if "value" in e}
    # the chart's defaults are the operator's own
    assert settings.OperatorSettings.from_env(env).images == Images()
    assert env["MEMORYSTORE_SERVICE_IMAGE"] == Images.service
    assert env["MEMORYSTORE_QDRANT_IMAGE"] == Images.qdrant
    custom = render(
        helm,
        "--set",
        "images.memoryService=registry.example.com/ms/memory-service:9.9.9",
        "--set",
        "images.qdrant=registry.example.com/qdrant/qdrant:v9.9.9",
    )
    env = {e["name"]: e["value"] for e in container(custom)["env"] if "value" in e}
    assert settings.OperatorSettings.from_env(env).images == Images(
        service="registry.example.com/ms/memory-service:9.9.9",
        qdrant="registry.example.com/qdrant/qdrant:v9.9.9",
    )
    # the resync period is the variable the operator's settings read
    assert env["MEMORYSTORE_OPERATOR_RESYNC_SECONDS"] == "30"
    assert '"MEMORYSTORE_OPERATOR_RESYNC_SECONDS"' in Path(settings.__file__).read_text()
    assert settings.OperatorSettings.from_env(env).resync_seconds == 30


# --- RBAC -----------------------------------------------------------------------------------


def test_cluster_wide_rbac_is_exactly_what_the_operator_uses(helm: Path):
    objects = render(helm, *CLUSTER_WIDE)
    assert not of_kind(objects, "Role") and not of_kind(objects, "RoleBinding")
    role = one(objects, "ClusterRole")
    assert rules_of(role) == NAMESPACED_RULES | CLUSTER_RULES | CLUSTER_WIDE_RULES
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    account = one(objects, "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": NAMESPACE}
    ]


@pytest.mark.parametrize("mode", ["default", "namespaces"])
def test_namespaced_rbac_is_a_role_per_watched_namespace(helm: Path, mode: str):
    """The default install (the release's namespace) and a list of namespaces: a Role in
    each, and outside them only what kopf needs to discover the CRD and the namespaces."""
    objects = render(helm, *MODES[mode])
    watched = WATCHED if mode == "namespaces" else [NAMESPACE]
    assert rules_of(one(objects, "ClusterRole")) == CLUSTER_RULES | NAMESPACE_OBSERVER_RULES
    account = one(objects, "ServiceAccount")["metadata"]["name"]
    roles = {r["metadata"]["namespace"]: r for r in of_kind(objects, "Role")}
    bindings = {b["metadata"]["namespace"]: b for b in of_kind(objects, "RoleBinding")}
    assert sorted(roles) == sorted(bindings) == sorted(watched)
    for namespace in watched:
        assert rules_of(roles[namespace]) == NAMESPACED_RULES
        assert bindings[namespace]["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": roles[namespace]["metadata"]["name"],
        }
        assert bindings[namespace]["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
        ]


def test_kopfs_share_of_the_rules_was_read_from_the_pinned_kopf():
    assert metadata.version("kopf") == KOPF_VERSION, (
        "kopf changed: re-read which API calls it makes (list/watch/patch of the handled "
        "resource, its status, events, CRD and namespace observation, peering) and update "
        "the chart's RBAC, NAMESPACED_RULES / CLUSTER_RULES and KOPF_VERSION"
    )


OWNER = Owner(
    name="acme", namespace="tenants", uid="0b6f1c9e-0000-4000-8000-3a1f0c2d7e11", generation=1
)
SPECS = {
    "managed": {"deletionPolicy": "Delete"},
    "external": {"vectorStore": {"external": {"url": "https://qdrant.example.com:6333"}}},
}


@pytest.mark.parametrize("spec", SPECS.values(), ids=list(SPECS))
def test_the_rules_cover_every_child_the_builders_make(spec: dict[str, Any]):
    model = MemoryStoreSpec.model_validate(spec)
    keys = Keys("service-key", "qdrant-key")
    children = builders.desired_children(OWNER, model, Images(), keys)
    children.append(keys_secret(OWNER, keys, owned=True))
    for child in children:
        info = type(codecs.from_dict(child))._api_info  # what apply.apply_all sends
        resource = (info.resource.group, info.plural)
        granted = NAMESPACED_RULES.get(resource, set())
        assert CLIENT_VERBS["apply"] <= granted, (
            f"the operator applies {child['kind']} but the chart grants {sorted(granted)} on "
            f"{resource}: add create and patch to the chart's RBAC and to NAMESPACED_RULES"
        )


def _client_calls(module: Any) -> set[str]:
    """Methods called on a name `client` in a module (the operator's lightkube client)."""
    tree = ast.parse(Path(module.__file__).read_text())
    return {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "client"
    }


def _resource_types(module: Any) -> set[tuple[str, str]]:
    """(group, plural) of every lightkube resource type a module's code names, and
    (group, plural/sub) of every subresource it names (e.g. MemoryStoreResource.Status)."""
    names = vars(module)

    def info(node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            value = names.get(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            value = getattr(names.get(node.value.id), node.attr, None)
        else:
            return None
        return getattr(value, "_api_info", None) if isinstance(value, type) else None

    found = set()
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if (api := info(node)) is not None:
            plural = f"{api.plural}/{api.action}" if api.action else api.plural
            found.add((api.resource.group, plural))
    return found


def test_the_rules_cover_every_resource_type_and_call_of_the_operator():
    # every module of the operator, wherever a call moves
    modules = [
        importlib.import_module(module.name)
        for module in pkgutil.iter_modules(memorystore.operator.__path__, "memorystore.operator.")
    ]
    calls = set().union(*(_client_calls(m) for m in modules))
    assert calls <= CLIENT_VERBS.keys(), (
        f"the operator now calls client.{sorted(calls - CLIENT_VERBS.keys())}: add the verbs "
        "to the chart's RBAC, NAMESPACED_RULES and CLIENT_VERBS"
    )
    assert calls == CLIENT_VERBS.keys(), "a call went away: drop the verb it needed"
    types = set().union(*(_resource_types(m) for m in modules))
    assert ("memorystore.dev", "memorystores/status") in types
    assert ("memorystore.dev", "memorystorebackups/status") in types
    granted = {
        (group, resource.split(" named ")[0])
        for group, resource in (NAMESPACED_RULES | CLUSTER_RULES | CLUSTER_WIDE_RULES)
    }
    missing = types - granted
    assert not missing, f"the operator uses {sorted(missing)}, which the chart does not grant"


# --- the CRD --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "generated"),
    [("memorystore-crd.yaml", CRD_PATH), ("memorystorebackup-crd.yaml", BACKUP_CRD_PATH)],
    ids=["memorystore", "memorystorebackup"],
)
def test_the_chart_renders_the_generated_crd_and_keeps_it_on_uninstall(
    helm: Path, file: str, generated: Path
):
    linked = CHART / "files" / file
    assert linked.is_symlink() and linked.resolve() == generated.resolve(), (
        f"the chart must link to the generated crds/{generated.name}, never hold a copy"
    )
    name = yaml.safe_load(generated.read_text())["metadata"]["name"]
    (rendered,) = [
        o
        for o in of_kind(render(helm), "CustomResourceDefinition")
        if o["metadata"]["name"] == name
    ]
    meta = rendered["metadata"]
    assert meta.pop("annotations") == {"helm.sh/resource-policy": "keep"}
    labels = meta.pop("labels")
    assert labels["app.kubernetes.io/component"] == "crd"
    assert labels["app.kubernetes.io/managed-by"] == "Helm"
    same(rendered, yaml.safe_load(generated.read_text()))


def test_the_operator_knows_its_own_pods_for_the_stores_network_policies(helm: Path):
    """The memory services admit the operator's pods (backups): the chart tells it its
    namespace (downward API) and the labels its Deployment selects on."""
    deployment = one(render(helm, "--set", "podLabels.team=memory"), "Deployment")
    env = {e["name"]: e for e in container([deployment])["env"]}
    assert env["MEMORYSTORE_OPERATOR_NAMESPACE"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}
    }
    labels = env["MEMORYSTORE_OPERATOR_POD_LABELS"]["value"]
    pods = settings.OperatorSettings.from_env(
        {"MEMORYSTORE_OPERATOR_NAMESPACE": NAMESPACE, "MEMORYSTORE_OPERATOR_POD_LABELS": labels}
    ).operator_pods
    assert pods is not None and pods.namespace == NAMESPACE
    assert dict(pods.labels) == deployment["spec"]["selector"]["matchLabels"]
    assert dict(pods.labels).items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert '"MEMORYSTORE_OPERATOR_POD_LABELS"' in Path(settings.__file__).read_text()
    # and every variable of ours the chart sets is one the operator's settings read
    assert {name for name in env if name.startswith("MEMORYSTORE_")} <= set(settings.VARIABLES)


def test_the_crd_can_be_left_out(helm: Path):
    objects = render(helm, "--set", "crd.install=false")
    assert not of_kind(objects, "CustomResourceDefinition")
    assert one(objects, "Deployment")


# --- validity against Kubernetes ------------------------------------------------------------


def validated_versions() -> list[str]:
    """The chart's kubeVersion floor and the newest two minors kubernetes-validate ships."""
    floor = re.match(r">=\s*(\d+\.\d+)", chart_meta()["kubeVersion"])
    assert floor, chart_meta()["kubeVersion"]
    minors = sorted(
        {".".join(v.split(".")[:2]) for v in all_versions()},
        key=lambda v: tuple(map(int, v.split("."))),
    )
    return sorted({floor[1], *minors[-2:]}, key=lambda v: tuple(map(int, v.split("."))))


def test_validation_covers_the_floor_and_the_two_newest_versions():
    versions = validated_versions()
    assert len(versions) >= 3 and versions[0] == "1.29", versions
    assert tuple(map(int, versions[-1].split("."))) >= (1, 37), versions


@pytest.mark.parametrize("version", validated_versions())
@pytest.mark.parametrize(
    "values",
    [[], NAMESPACED, CLUSTER_WIDE, [*MONITORED, "--set", "serviceAccount.annotations.a=b"]],
    ids=["default", "namespaced", "cluster-wide", "monitored"],
)
def test_every_rendered_object_is_valid_kubernetes(helm: Path, values: list[str], version: str):
    objects = render(helm, *values)
    for obj in objects:
        if obj["kind"] == "ServiceMonitor":  # the Prometheus Operator's CRD: no schema here
            with pytest.raises(SchemaNotFoundError):
                kubernetes_validate.validate(obj, version, strict=True)
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} on {version}: {where}: {exc}")


# --- metrics --------------------------------------------------------------------------------


def test_metrics_service_and_optional_service_monitor(helm: Path):
    default = render(helm)
    assert not of_kind(default, "ServiceMonitor"), "off by default"
    service = one(default, "Service")
    pod_labels = one(default, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    ]

    monitored = render(helm, *MONITORED, "--set", "metrics.serviceMonitor.labels.release=prom")
    monitor = one(monitored, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        one(monitored, "Service")["metadata"]["labels"].items()
    )
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"

    off = render(helm, "--set", "metrics.enabled=false", *MONITORED)
    assert not of_kind(off, "Service") and not of_kind(off, "ServiceMonitor")
    args = build_parser().parse_args(container(off)["args"])
    assert args.metrics_port == 0
    assert [p["name"] for p in container(off)["ports"]] == ["health"]


def test_the_operator_is_told_how_stores_are_scraped(helm: Path):
    """monitoring.* reaches the operator's settings as the values say (the peers verbatim)."""
    peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
    }
    rendered = render(
        helm, "--set", "monitoring.podMonitors.interval=15s",
        "--set", "monitoring.podMonitors.labels.release=prom",
        "--set-json", f"monitoring.scrapeFrom={json.dumps([peer])}",
    )  # fmt: skip
    env = {e["name"]: e["value"] for e in container(rendered)["env"] if "value" in e}
    monitoring = settings.OperatorSettings.from_env(env).monitoring
    assert monitoring.pod_monitors and monitoring.interval == "15s"
    assert dict(monitoring.labels) == {"release": "prom"}
    assert monitoring.scrapers == (peer,)
    off = render(helm, "--set", "monitoring.podMonitors.enabled=false")
    env = {e["name"]: e["value"] for e in container(off)["env"] if "value" in e}
    assert not settings.OperatorSettings.from_env(env).monitoring.pod_monitors
    rules = rules_of(one(off, "Role"))
    assert ("monitoring.coreos.com", "podmonitors") not in rules  # nothing to grant then


def test_the_dashboard_and_the_alerts_are_shipped_when_asked(helm: Path):
    default = render(helm)
    assert not of_kind(default, "PrometheusRule")
    assert not [c for c in of_kind(default, "ConfigMap") if "dashboard" in c["metadata"]["name"]]
    shipped = render(
        helm, "--set", "monitoring.dashboard.enabled=true",
        "--set", "monitoring.rules.enabled=true", "--set", "monitoring.rules.labels.release=prom",
    )  # fmt: skip
    (dashboard,) = [
        c for c in of_kind(shipped, "ConfigMap") if "dashboard" in c["metadata"]["name"]
    ]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["memorystore.json"]) == json.loads(
        (CHART / "files" / "dashboard.json").read_text()
    )
    rule = one(shipped, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prom"
    # exactly the file promtool checks and tests (tests/unit/charts/test_monitoring.py)
    assert rule["spec"] == yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())


# --- values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        (["--set", "replicas=2"], "additional properties 'replicas' not allowed"),
        (["--set", "watch.namespaces={Tenant_A}"], "watch/namespaces/0"),
        (["--set", "image.pullPolicy=Sometimes"], "image/pullPolicy"),
        (["--set", "metrics.port=0"], "metrics/port"),
        (["--set", "images.qdrant="], "images/qdrant"),
        (["--set", "watch.clusterWide=yes"], "watch/clusterWide"),
        (["--set", "networkPolicy.apiServer.cidrs={example.com}"], "apiServer/cidrs/0"),
        (["--set", "networkPolicy.apiServer.ports={0}"], "apiServer/ports/0"),
        (["--set", "monitoring.scrapeFrom[0].hostNetwork=true"], "scrapeFrom/0"),
        (["--set", "monitoring.podMonitors.interval=often"], "podMonitors/interval"),
    ],
)
def test_values_schema_refuses_bad_values(helm: Path, values: list[str], complaint: str):
    result = run_helm(
        helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *values, check=False
    )
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert complaint in result.stderr, result.stderr


def test_every_value_is_in_the_schema():
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        if "$ref" in node:
            node = schema["definitions"][node["$ref"].rsplit("/", 1)[1]]
        assert "type" in node, f"{path} has no type in values.schema.json"
        if isinstance(value, dict) and "properties" in node:
            assert node.get("additionalProperties") is False, path
            for key, sub in value.items():
                assert key in node["properties"], f"{path}.{key} is not in values.schema.json"
                walk(sub, node["properties"][key], f"{path}.{key}")

    walk(values, schema, "values")


# --- NOTES ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_notes_tell_the_next_step(helm: Path, mode: str, tmp_path: Path):
    # `helm template` does not print NOTES.txt: render it through a throwaway template in a
    # copy of the chart (the link to the CRD copied as the file it points at).
    chart = tmp_path / "memorystore"
    shutil.copytree(CHART, chart, symlinks=False)
    (chart / "templates" / "zz-notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n"
        '  notes: {{ include "memorystore/templates/NOTES.txt" . | quote }}\n'
    )
    rendered = render(helm, *MODES[mode], chart=chart)
    (notes,) = [o for o in rendered if o["metadata"]["name"] == "notes"]
    text = notes["data"]["notes"]
    namespace = {"default": NAMESPACE, "namespaces": WATCHED[0]}.get(mode, "<namespace>")
    assert f"kubectl apply -n {namespace} -f examples/memorystore.yaml" in text
    assert f"kubectl get mstore -n {namespace}" in text
    assert (ROOT / "examples" / "memorystore.yaml").is_file()
    if mode == "cluster-wide":  # the blast radius, said at install time
        assert "every namespace" in text and "Secrets" in text
    else:
        assert f"reconciles the MemoryStores in: {', '.join(WATCHED)}" in text or (
            mode == "default" and f"reconciles the MemoryStores in: {NAMESPACE}" in text
        )


def test_cluster_wide_and_a_namespace_list_exclude_each_other(helm: Path):
    result = run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        *CLUSTER_WIDE,
        "--set",
        "watch.namespaces={tenant-a}",
        check=False,
    )
    assert result.returncode != 0
    assert "watch.clusterWide and watch.namespaces exclude each other" in result.stderr


def test_pod_labels_cannot_break_the_selector(helm: Path):
    objects = render(
        helm,
        "--set",
        "podLabels.team=memory",
        "--set",
        r"podLabels.app\.kubernetes\.io/component=other",
    )
    deployment = one(objects, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["team"] == "memory"
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_an_existing_service_account_must_be_named(helm: Path):
    result = run_helm(
        helm, "template", RELEASE, str(CHART), "--set", "serviceAccount.create=false", check=False
    )
    assert result.returncode != 0 and "serviceAccount.name" in result.stderr
    existing = ["--set", "serviceAccount.create=false", "--set", "serviceAccount.name=op"]
    objects = render(helm, *existing)
    assert not of_kind(objects, "ServiceAccount")
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "op"
    assert one(objects, "ClusterRoleBinding")["subjects"][0]["name"] == "op"


def test_the_health_and_metrics_ports_must_differ(helm: Path):
    result = run_helm(
        helm, "template", RELEASE, str(CHART), "--set", "health.port=9090", check=False
    )
    assert result.returncode != 0 and "must differ" in result.stderr
