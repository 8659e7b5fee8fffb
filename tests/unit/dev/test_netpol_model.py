"""The NetworkPolicy oracle (tests/support/netpol_model.py): the documented examples, the
algebraic laws of the semantics, and what the product's own policies admit by it.

The oracle decides what the real enforcer must do in the differential test, so it is checked
here on its own first: a wrong oracle would make that test agree with a wrong enforcer.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.operator import names
from memorystore.operator.builders.model import Owner
from memorystore.operator.builders.network import memory_network_policy, qdrant_network_policy
from memorystore.spec import MemoryStoreSpec
from support.netpol_model import (
    ContainerPort,
    External,
    Pod,
    allowed,
    policy_types,
    selector_matches,
)
from support.netpol_scenarios import (
    NS_LABELS,
    POD_LABELS,
    PROBES,
    Scenario,
    expression,
    labels,
    policy,
    scenarios,
    selector,
)


def verdicts(s: Scenario, policies: Any = None) -> dict[tuple[str, str, str, int], bool]:
    """Every (source, destination, protocol, port) of the scenario → allowed?"""
    chosen = s.policies if policies is None else policies
    return {
        (a.name, b.name, proto, port): allowed(chosen, s.namespaces, a, b, port, proto)
        for a, b in itertools.permutations(s.pods, 2)
        for proto, port in PROBES
    }


def _policy(namespace: str, spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


# --- the examples of the Kubernetes documentation -------------------------------------------

DOCS_POLICY = _policy(
    "default",
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [
            {
                "from": [
                    {"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}},
                    {"namespaceSelector": {"matchLabels": {"project": "myproject"}}},
                    {"podSelector": {"matchLabels": {"role": "frontend"}}},
                ],
                "ports": [{"protocol": "TCP", "port": 6379}],
            }
        ],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}], "ports": [{"port": 5978}]}],
    },
    "test-network-policy",
)
NAMESPACES = {"default": {}, "myproject": {"project": "myproject"}, "other": {}}
DB = Pod("default", "db", "10.1.0.5", {"role": "db"})
FRONTEND = Pod("default", "frontend", "10.1.0.6", {"role": "frontend"})
OTHER_FRONTEND = Pod("other", "frontend", "10.1.0.7", {"role": "frontend"})
IN_PROJECT = Pod("myproject", "anything", "10.1.0.8", {})


@pytest.mark.parametrize(
    ("source", "port", "expected"),
    [
        (FRONTEND, 6379, True),  # podSelector: this namespace's frontends
        (FRONTEND, 6380, False),  # only the listed port
        (OTHER_FRONTEND, 6379, False),  # a podSelector alone never reaches another namespace
        (IN_PROJECT, 6379, True),  # namespaceSelector: every pod there
        (External("172.17.0.9"), 6379, True),  # ipBlock
        (External("172.17.1.9"), 6379, False),  # … minus except
        (External("10.9.9.9"), 6379, False),
        (Pod("default", "x", "10.1.0.9", {}), 6379, False),  # unlabelled pod
    ],
)
def test_the_documented_ingress_example(source, port, expected):
    assert allowed([DOCS_POLICY], NAMESPACES, source, DB, port) is expected


def test_the_documented_egress_example():
    assert allowed([DOCS_POLICY], NAMESPACES, DB, External("10.0.0.7"), 5978)
    assert not allowed([DOCS_POLICY], NAMESPACES, DB, External("10.0.0.7"), 5979)
    assert not allowed([DOCS_POLICY], NAMESPACES, DB, External("10.0.1.7"), 5978)
    assert not allowed([DOCS_POLICY], NAMESPACES, DB, FRONTEND, 80)  # egress-isolated
    # a UDP connection on the egress port: `ports` entries default to TCP
    assert not allowed([DOCS_POLICY], NAMESPACES, DB, External("10.0.0.7"), 5978, "UDP")


def test_policy_types_default_as_the_api_server_does():
    assert policy_types(_policy("n", {"podSelector": {}})) == {"Ingress"}
    assert policy_types(_policy("n", {"podSelector": {}, "egress": [{}]})) == {"Ingress", "Egress"}
    # an empty egress list is no egress section (the API server's `len(egress) != 0`)
    assert policy_types(_policy("n", {"podSelector": {}, "egress": []})) == {"Ingress"}
    explicit = {"podSelector": {}, "policyTypes": ["Egress"], "ingress": [{}]}
    assert policy_types(_policy("n", explicit)) == {"Egress"}


def test_named_ports_resolve_on_the_destination_with_their_protocol():
    ports = (ContainerPort(9000, "TCP", "web"), ContainerPort(53, "UDP", "dns"))
    server = Pod("n", "s", "10.0.0.1", {"app": "s"}, ports)
    client = Pod("n", "c", "10.0.0.2", {})
    named = [{"ports": [{"port": "web"}, {"port": "dns", "protocol": "UDP"}]}]
    pol = _policy("n", {"podSelector": {"matchLabels": {"app": "s"}}, "ingress": named})
    assert allowed([pol], {}, client, server, 9000)
    assert not allowed([pol], {}, client, server, 9001)
    assert allowed([pol], {}, client, server, 53, "UDP")
    assert not allowed([pol], {}, client, server, 53)  # "dns" is UDP only
    # a name the destination does not have admits nothing
    unknown = _policy("n", {"podSelector": {}, "ingress": [{"ports": [{"port": "nope"}]}]})
    assert not allowed([unknown], {}, client, server, 9000)


def test_end_port_is_an_inclusive_range():
    pol = _policy("n", {"podSelector": {}, "ingress": [{"ports": [{"port": 80, "endPort": 82}]}]})
    a, b = Pod("n", "a", "10.0.0.1", {}), Pod("n", "b", "10.0.0.2", {})
    assert [allowed([pol], {}, a, b, p) for p in (79, 80, 81, 82, 83)] == [
        False,
        True,
        True,
        True,
        False,
    ]


# --- laws -----------------------------------------------------------------------------------


@given(scenarios())
def test_with_no_policy_everything_is_allowed(s):
    assert all(verdicts(s, ()).values())


@given(scenarios(), st.randoms(use_true_random=False))
def test_the_order_of_policies_does_not_matter(s, rnd):
    shuffled = list(s.policies)
    rnd.shuffle(shuffled)
    assert verdicts(s, shuffled) == verdicts(s)


@given(scenarios(), st.sampled_from(["np-a", "np-b"]))
def test_a_deny_all_ingress_policy_isolates_its_namespace_and_adds_nothing(s, ns):
    """Alone it refuses every connection into `ns`; beside other policies it changes only
    the pods no other policy isolated yet (those lose all ingress), and nothing elsewhere."""
    deny = _policy(ns, {"podSelector": {}, "policyTypes": ["Ingress"]}, "deny-all")
    pods = {p.name: p for p in s.pods}
    alone = verdicts(s, [deny])
    assert all(v is (pods[k[1]].namespace != ns) for k, v in alone.items())
    before, after = verdicts(s), verdicts(s, [*s.policies, deny])
    for key, verdict in after.items():
        dst = pods[key[1]]
        was_isolated = any(
            p["metadata"]["namespace"] == ns
            and selector_matches(p["spec"]["podSelector"], dst.labels)
            and "Ingress" in policy_types(p)
            for p in s.policies
        )
        if dst.namespace == ns and not was_isolated:
            assert verdict is False, key
        else:
            assert verdict == before[key], key


@given(scenarios(), st.sampled_from(["np-a", "np-b"]))
def test_an_allow_all_ingress_rule_leaves_only_the_sources_egress_to_decide(s, ns):
    open_all = _policy(ns, {"podSelector": {}, "ingress": [{}]}, "allow-all")
    with_open = verdicts(s, [*s.policies, open_all])
    pods = {p.name: p for p in s.pods}
    egress_view = [
        {**p, "spec": {**p["spec"], "policyTypes": ["Egress"]}}
        for p in s.policies
        if "Egress" in policy_types(p)
    ]
    for (src, dst, proto, port), verdict in with_open.items():
        if pods[dst].namespace != ns:
            continue
        egress_only = allowed(
            egress_view,
            s.namespaces,
            pods[src],
            pods[dst],
            port,
            proto,
        )
        assert verdict == egress_only


@given(scenarios(max_policies=2), policy(9))
def test_policies_are_additive_for_pods_already_isolated(s, extra):
    """A further policy can only add to what an already-isolated pod admits."""
    before, after = verdicts(s), verdicts(s, [*s.policies, extra])
    pods = {p.name: p for p in s.pods}

    def isolated(pod: Pod, direction: str) -> bool:
        return any(
            p["metadata"]["namespace"] == pod.namespace
            and selector_matches(p["spec"]["podSelector"], pod.labels)
            and direction in policy_types(p)
            for p in s.policies
        )

    for (src, dst, proto, port), was in before.items():
        touches_egress = "Egress" in policy_types(extra) and (
            extra["metadata"]["namespace"] == pods[src].namespace
            and selector_matches(extra["spec"]["podSelector"], pods[src].labels)
        )
        touches_ingress = "Ingress" in policy_types(extra) and (
            extra["metadata"]["namespace"] == pods[dst].namespace
            and selector_matches(extra["spec"]["podSelector"], pods[dst].labels)
        )
        if (not touches_egress or isolated(pods[src], "Egress")) and (
            not touches_ingress or isolated(pods[dst], "Ingress")
        ):
            assert after[(src, dst, proto, port)] >= was, (src, dst, proto, port)
        if not touches_egress and not touches_ingress:
            assert after[(src, dst, proto, port)] == was  # a policy acts on its pods only


@given(scenarios())
def test_a_pod_only_peer_never_admits_a_pod_of_another_namespace(s):
    """What the product relies on: no namespaceSelector = the policy's own namespace."""
    for pol in s.policies:
        ns = pol["metadata"]["namespace"]
        narrowed = copy.deepcopy(pol)
        narrowed["spec"]["policyTypes"] = ["Ingress"]
        narrowed["spec"]["podSelector"] = {}  # isolate every pod of `ns`
        rules = [
            {**r, "from": [p for p in r.get("from") or [] if set(p) == {"podSelector"}]}
            for r in pol["spec"].get("ingress") or []
        ]
        narrowed["spec"]["ingress"] = [r for r in rules if r["from"]]
        for src, dst in itertools.permutations(s.pods, 2):
            if dst.namespace == ns and src.namespace != ns:
                for proto, port in PROBES:
                    assert not allowed([narrowed], s.namespaces, src, dst, port, proto)


@given(labels(POD_LABELS), st.sampled_from(sorted(POD_LABELS)), st.data())
def test_match_labels_equal_in_expressions(lbls, key, data):
    value = data.draw(st.sampled_from(POD_LABELS[key]))
    as_labels = {"matchLabels": {key: value}}
    as_expression = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    assert selector_matches(as_labels, lbls) == selector_matches(as_expression, lbls)
    assert selector_matches(as_labels, lbls) == (lbls.get(key) == value)


@given(labels(NS_LABELS), expression(NS_LABELS))
def test_each_operator_means_what_the_api_says(lbls, expr):
    key, op, values = expr["key"], expr["operator"], expr.get("values", [])
    expected = {
        "In": lbls.get(key) in values,
        "NotIn": lbls.get(key) not in values,  # an absent key is "not in"
        "Exists": key in lbls,
        "DoesNotExist": key not in lbls,
    }[op]
    assert selector_matches({"matchExpressions": [expr]}, lbls) is expected


@given(labels(POD_LABELS), selector(POD_LABELS), selector(POD_LABELS))
@settings(max_examples=200)
def test_labels_and_expressions_are_anded(lbls, a, b):
    both = {
        "matchLabels": {**a.get("matchLabels", {}), **b.get("matchLabels", {})},
        "matchExpressions": a.get("matchExpressions", []) + b.get("matchExpressions", []),
    }
    if (
        a.get("matchLabels")
        and b.get("matchLabels")
        and set(a["matchLabels"]) & set(b["matchLabels"])
    ):
        return  # merging conflicting matchLabels is not an AND
    assert selector_matches(both, lbls) == (selector_matches(a, lbls) and selector_matches(b, lbls))


def test_an_empty_selector_matches_everything_and_a_missing_one_nothing():
    assert selector_matches({}, {}) and selector_matches({}, {"a": "b"})
    assert not selector_matches(None, {"a": "b"})


# --- the product's policies -----------------------------------------------------------------

OWNER = Owner(name="acme", namespace="tenants", uid="u", generation=1)
SERVICE = Pod("tenants", "svc", "10.244.0.20", names.selector_labels("acme", names.MEMORY_SERVICE))
QDRANT = Pod("tenants", "qdrant-0", "10.244.0.30", names.selector_labels("acme", names.QDRANT))
CLIENT = Pod("tenants", "agent", "10.244.0.40", {"memorystore.dev/client": "acme"})
UNLABELLED = Pod("tenants", "stranger", "10.244.0.41", {})
OTHER_STORE = Pod("tenants", "other", "10.244.0.42", {"memorystore.dev/client": "globex"})
ELSEWHERE = Pod("elsewhere", "agent", "10.244.0.43", {"memorystore.dev/client": "acme"})
CHAT = Pod("tenants", "chat", "10.244.0.44", {"tier": "agents", "app": "chat-agent"})
TENANTS = {"tenants": {}, "elsewhere": {}}


def _product_policies(raw: dict[str, Any]) -> list[dict[str, Any]]:
    spec = MemoryStoreSpec.model_validate(raw)
    return [memory_network_policy(OWNER, spec), qdrant_network_policy(OWNER)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (CLIENT, True),
        (UNLABELLED, False),
        (OTHER_STORE, False),
        (ELSEWHERE, False),  # the right label in another namespace
        (CHAT, False),  # allowedAgentPods not set
        (QDRANT, False),
    ],
)
def test_the_memory_service_admits_only_its_agents_on_its_port(source, expected):
    policies = _product_policies({})
    assert allowed(policies, TENANTS, source, SERVICE, names.SERVICE_PORT) is expected
    assert not allowed(policies, TENANTS, source, SERVICE, names.SERVICE_PORT + 1)
    assert not allowed(policies, TENANTS, source, SERVICE, names.SERVICE_PORT, "UDP")


def test_allowed_agent_pods_add_exactly_their_labels():
    raw = {"allowedAgentPods": {"matchLabels": {"tier": "agents", "app": "chat-agent"}}}
    policies = _product_policies(raw)
    assert allowed(policies, TENANTS, CHAT, SERVICE, names.SERVICE_PORT)
    half = Pod("tenants", "half", "10.244.0.45", {"tier": "agents"})
    assert not allowed(policies, TENANTS, half, SERVICE, names.SERVICE_PORT)
    moved = Pod("elsewhere", "chat", "10.244.0.46", dict(CHAT.labels))
    assert not allowed(policies, TENANTS, moved, SERVICE, names.SERVICE_PORT)


@pytest.mark.parametrize("source", [CLIENT, UNLABELLED, OTHER_STORE, ELSEWHERE])
def test_only_the_memory_service_reaches_qdrant(source):
    policies = _product_policies({})
    for port in (names.QDRANT_HTTP_PORT, names.QDRANT_GRPC_PORT):
        assert allowed(policies, TENANTS, SERVICE, QDRANT, port)
        assert not allowed(policies, TENANTS, source, QDRANT, port)
    peer = Pod("tenants", "qdrant-1", "10.244.0.31", dict(QDRANT.labels))
    assert allowed(policies, TENANTS, peer, QDRANT, names.QDRANT_P2P_PORT)
    assert not allowed(policies, TENANTS, SERVICE, QDRANT, names.QDRANT_P2P_PORT)
