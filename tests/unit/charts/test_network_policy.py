"""The operator pods' NetworkPolicy, as the pinned helm renders it in each install mode.

Ingress: the health port (kubelet's probes) and the metrics port, nothing else. Egress:
cluster DNS, the API server's ports (its addresses when given) and the memory services of
the watched namespaces on the service's port, nothing else: in particular no rule that
would let the operator reach an address a tenant writes (it never calls one: the last test
checks the operator's code for every outgoing HTTP call). Enforced on a real node by
tests/e2e/test_operator_netpol_real_node.py.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest
from unit.charts.helm_chart import (
    CLUSTER_WIDE,
    NAMESPACE,
    NAMESPACED,
    WATCHED,
    of_kind,
    one,
    render,
)

import memorystore.operator
from memorystore.operator import names

MODES = {"default": [], "namespaces": NAMESPACED, "cluster-wide": CLUSTER_WIDE}


def policy(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objects, "NetworkPolicy")


def ports(rule: dict[str, Any]) -> set[tuple[Any, str]]:
    return {(p["port"], p["protocol"]) for p in rule["ports"]}


@pytest.mark.parametrize("mode", MODES)
def test_it_selects_exactly_the_operators_pods_and_both_directions(helm: Path, mode: str):
    objects = render(helm, *MODES[mode])
    spec = policy(objects)["spec"]
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    assert policy(objects)["metadata"]["namespace"] == NAMESPACE


def test_ingress_is_the_health_and_metrics_ports_only(helm: Path):
    spec = policy(render(helm))["spec"]
    assert [ports(rule) for rule in spec["ingress"]] == [{(8080, "TCP")}, {(9090, "TCP")}]
    assert all("from" not in rule for rule in spec["ingress"])  # kubelet and Prometheus
    scraper = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
    narrowed = policy(
        render(
            helm,
            "--set",
            "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels"
            r".kubernetes\.io/metadata\.name=mon",
        )
    )["spec"]
    assert narrowed["ingress"][1]["from"] == [scraper]
    assert "from" not in narrowed["ingress"][0], "the probes come from the node"
    no_metrics = policy(render(helm, "--set", "metrics.enabled=false"))["spec"]
    assert [ports(rule) for rule in no_metrics["ingress"]] == [{(8080, "TCP")}]
    moved = policy(render(helm, "--set", "health.port=8181", "--set", "metrics.port=9191"))
    assert [ports(rule) for rule in moved["spec"]["ingress"]] == [
        {(8181, "TCP")},
        {(9191, "TCP")},
    ]


@pytest.mark.parametrize("mode", MODES)
def test_egress_is_dns_the_api_server_and_the_watched_memory_services(helm: Path, mode: str):
    dns, api, services = policy(render(helm, *MODES[mode]))["spec"]["egress"]
    assert ports(dns) == {(53, "UDP"), (53, "TCP")} and "to" not in dns
    assert ports(api) == {(443, "TCP"), (6443, "TCP")} and "to" not in api
    assert ports(services) == {(names.SERVICE_PORT, "TCP")}
    (peer,) = services["to"]
    # the labels every store's memory-service pods carry, whatever the store's name
    store_pods = names.selector_labels("any-store", names.MEMORY_SERVICE)
    assert peer["podSelector"]["matchLabels"] == {
        k: v for k, v in store_pods.items() if k != "app.kubernetes.io/instance"
    }
    if mode == "cluster-wide":
        assert peer["namespaceSelector"] == {}
    else:
        (expression,) = peer["namespaceSelector"]["matchExpressions"]
        watched = WATCHED if mode == "namespaces" else [NAMESPACE]
        assert expression == {
            "key": "kubernetes.io/metadata.name",
            "operator": "In",
            "values": watched,
        }


def test_the_api_server_can_be_narrowed_to_its_addresses(helm: Path):
    values = [
        "--set",
        "networkPolicy.apiServer.cidrs={10.0.0.10/32,10.0.0.11/32}",
        "--set",
        "networkPolicy.apiServer.ports={6443}",
    ]
    _, api, _ = policy(render(helm, *values))["spec"]["egress"]
    assert ports(api) == {(6443, "TCP")}
    assert api["to"] == [
        {"ipBlock": {"cidr": "10.0.0.10/32"}},
        {"ipBlock": {"cidr": "10.0.0.11/32"}},
    ]


def test_it_can_be_turned_off(helm: Path):
    assert not of_kind(render(helm, "--set", "networkPolicy.enabled=false"), "NetworkPolicy")


# --- the operator calls no address a tenant wrote --------------------------------------------

# The only modules of the operator that send HTTP requests of their own (the API server is
# reached through lightkube), and what each sends them to: never a URL from a spec.
HTTP_CALLERS = {
    # the memory service's Service URL (names.memory_endpoint), for backups
    "memorystore.operator.backup_service",
    # the store's own memory-service pods' /readyz, at the pod IP the API server reports
    "memorystore.operator.readiness",
}


# (httpx2 is lightkube's transport: the operator imports it for its error type only, and
# every lightkube call goes to the API server)
_CLIENTS = {"httpx", "aiohttp", "requests", "socket", "urllib.request", "http.client"}


def _imports_http_client(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found = {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found = {node.module or ""}
        else:
            continue
        if {n for n in found if n in _CLIENTS or n.split(".")[0] in _CLIENTS}:
            return True
    return False


def test_only_two_modules_make_http_requests_and_neither_reads_a_tenant_url():
    callers = {
        module.name
        for module in pkgutil.walk_packages(memorystore.operator.__path__, "memorystore.operator.")
        if _imports_http_client(Path(importlib.import_module(module.name).__file__ or ""))
    }
    assert callers == HTTP_CALLERS
    for name in HTTP_CALLERS:  # neither reads where a spec says a store is
        tree = ast.parse(Path(importlib.import_module(name).__file__ or "").read_text())
        read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert not read & {"vector_store", "external", "url", "history_db"}, name
