"""The pure parts of the real node's NetworkPolicy enforcer
(dev/memorystore_dev/devcluster/netpol.py): the queue rule it installs, the command it runs, the
rights it is given, and bad input."""

from __future__ import annotations

import ipaddress
import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from memorystore_dev.devcluster import netpol, versions
from memorystore_dev.devcluster.node import host
from memorystore_dev.devcluster.tools.groups import group_of

BINARY = Path("/cache/kube-network-policies-v0.8.0/kube-network-policies")
RUN_DIR = Path("/tmp/cluster/node/kube-network-policies/run")


def test_the_enforcer_is_a_pinned_tool_built_like_the_others():
    group = group_of("kube-network-policies")
    assert group.module == "sigs.k8s.io/kube-network-policies"
    assert group.version == versions.KUBE_NETWORK_POLICIES == "v0.8.0"
    assert group.packages == {"kube-network-policies": "sigs.k8s.io/kube-network-policies/cmd"}


def test_the_queue_rule_takes_only_new_connections_of_the_pods_and_fails_open():
    rules = netpol.queue_rules("10.244.0.0/24", 100)
    assert rules == [
        "-A MEMORYSTORE-NODE-NETPOL -s 10.244.0.0/24 -m conntrack --ctstate NEW "
        "-j NFQUEUE --queue-num 100 --queue-bypass",
        "-A MEMORYSTORE-NODE-NETPOL -d 10.244.0.0/24 -m conntrack --ctstate NEW "
        "-j NFQUEUE --queue-num 100 --queue-bypass",
    ]


def test_the_install_script_is_one_mangle_transaction_jumped_to_last():
    script = netpol.install_script("10.244.0.0/24", 7)
    lines = script.splitlines()
    assert lines[0] == "*mangle"  # not filter: an ACCEPT verdict must not skip filter FORWARD
    assert lines[1] == ":MEMORYSTORE-NODE-NETPOL - [0:0]"
    assert lines[2:4] == netpol.queue_rules("10.244.0.0/24", 7)
    # appended: the real node's guard chain stays first and drops what leaves the pods
    assert lines[4] == "-A FORWARD -j MEMORYSTORE-NODE-NETPOL"
    assert lines[5] == "COMMIT" and script.endswith("COMMIT\n")
    # no flush, no policy change, nothing outside the harness's own chain and one jump
    assert not any(line.startswith(("-F", "-X", "-P", "-D", "-I")) for line in lines)


def test_the_chain_is_swept_by_the_real_nodes_journal_teardown():
    # teardown.teardown removes every MEMORYSTORE-NODE* chain of every table after a SIGKILL.
    assert netpol.CHAIN.startswith("MEMORYSTORE-NODE")
    assert netpol.TABLE in host.IPTABLES_TABLES


@given(st.integers(0, 65535), st.integers(8, 32), st.integers(0, 2**32 - 1))
def test_any_valid_pod_cidr_and_queue_give_rules_naming_exactly_them(queue, prefix, address):
    net = ipaddress.ip_network((address, prefix), strict=False)
    rules = netpol.queue_rules(str(net), queue)
    assert len(rules) == 2
    for rule in rules:
        words = rule.split()
        assert words[words.index("--queue-num") + 1] == str(queue)
        assert str(net) in words
        assert "--queue-bypass" in words and "NEW" in words


@pytest.mark.parametrize(
    ("cidr", "message"),
    [
        ("10.244.0.1/24", "10.244.0.1/24"),  # host bits set: a typo, not a network
        ("fd00::/64", "not IPv4"),
        ("0.0.0.0/0", "wider than /8"),
        ("10.0.0.0/7", "wider than /8"),
        ("pods", "'pods'"),
        ("", "pod_cidr"),
    ],
)
def test_a_bad_pod_cidr_is_refused_naming_it(cidr, message):
    with pytest.raises(ValueError, match="pod_cidr") as err:
        netpol.queue_rules(cidr, 100)
    assert message in str(err.value)


@pytest.mark.parametrize("queue", [-1, 65536, True, "100", 1.0, None])
def test_a_bad_queue_number_is_refused_naming_it(queue):
    with pytest.raises(ValueError, match=r"queue .* is not an NFQUEUE number"):
        netpol.queue_rules("10.244.0.0/24", queue)
    with pytest.raises(ValueError, match="NFQUEUE number"):
        netpol.NetworkPolicyEnforcer(BINARY, queue=queue)


def _argv(**overrides: object) -> list[str]:
    args: dict[str, object] = {
        "binary": BINARY,
        "run_dir": RUN_DIR,
        "api_server": "https://127.0.0.1:41234",
        "node_name": "real-node-1",
        "queue": 100,
        "run_mount": "/run",
    }
    args.update(overrides)
    return netpol.launch_argv(**args)  # type: ignore[arg-type]


def test_the_command_runs_the_enforcer_in_its_own_mount_namespace_with_in_cluster_env():
    argv = _argv()
    assert argv[:3] == [
        "env",
        "KUBERNETES_SERVICE_HOST=127.0.0.1",
        "KUBERNETES_SERVICE_PORT=41234",
    ]
    assert argv[3:8] == ["unshare", "--mount", "--propagation", "private", "--"]
    # sh -c SCRIPT $0 $1 $2 BINARY ARGS…: bind RUN_DIR over /run, then exec the enforcer
    script, dollar0, source, target = argv[10:14]
    assert argv[8:10] == ["sh", "-c"]
    assert shlex.split(script)[:5] == ["mount", "--bind", "--", "$1", "$2"]
    assert "exec" in script
    assert (dollar0, source, target) == ("kube-network-policies", str(RUN_DIR), "/run")
    assert argv[14] == str(BINARY)
    flags = argv[15:]
    assert "--hostname-override=real-node-1" in flags
    assert "--disable-nri" in flags
    assert "--nfqueue-id=100" in flags
    # metrics never listen beyond loopback
    assert "--metrics-bind-address=127.0.0.1:0" in flags
    assert not any(f.startswith("--fail-open") for f in flags)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"api_server": "http://127.0.0.1:1"}, "https"),
        ({"api_server": "127.0.0.1:6443"}, "api_server"),
        ({"node_name": ""}, "node_name"),
        ({"queue": 70000}, "NFQUEUE"),
    ],
)
def test_a_bad_command_input_is_refused_naming_it(override, message):
    with pytest.raises(ValueError, match=message):
        _argv(**override)


def test_the_enforcer_may_only_read_pods_namespaces_and_policies():
    objects = dict(netpol.rbac_objects())
    role = objects["/apis/rbac.authorization.k8s.io/v1/clusterroles"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    reads = {
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
        ("networking.k8s.io", "networkpolicies", "list"),
        ("networking.k8s.io", "networkpolicies", "watch"),
    }
    verbs = ("create", "patch", "update")
    events = {(g, "events", v) for g in ("", "events.k8s.io") for v in verbs}
    assert granted == reads | events  # no secrets, no writes to anything but events, no "*"
    binding = objects["/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": netpol.SERVICE_ACCOUNT, "namespace": netpol.NAMESPACE}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_bound_queues_reads_the_kernels_table():
    # the line this machine showed with kube-network-policies reading queue 100
    text = "  100  22459     0 2   128     0     0        0  1\n    7  1 0 2 65531 0 0 3 1\n"
    assert netpol.bound_queues(text) == {100, 7}
    assert netpol.bound_queues("") == set()
    assert netpol.bound_queues("garbage line\n\n") == set()


def _kubeconfig(tmp_path: Path, user: dict[str, str]) -> Path:
    path = tmp_path / "admin.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {
                            "server": "https://127.0.0.1:6443",
                            "certificate-authority": "/p/ca.crt",
                        },
                    }
                ],
                "users": [{"name": "user", "user": user}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
                "current-context": "local",
            }
        )
    )
    return path


def test_the_admin_kubeconfig_the_harness_writes_is_read(tmp_path):
    files = {"client-certificate": "/p/admin.crt", "client-key": "/p/admin.key"}
    assert netpol.kubeconfig_files(_kubeconfig(tmp_path, files)) == (
        "https://127.0.0.1:6443",
        Path("/p/ca.crt"),
        Path("/p/admin.crt"),
        Path("/p/admin.key"),
    )


def test_a_kubeconfig_without_certificate_files_is_refused_naming_it(tmp_path):
    path = _kubeconfig(tmp_path, {"token": "s3cr3t-token-value"})
    with pytest.raises(netpol.EnforcerError, match=r"admin\.kubeconfig: needs") as err:
        netpol.kubeconfig_files(path)
    assert "s3cr3t" not in str(err.value)  # the credential never reaches the message


def test_every_real_node_enforces_network_policies_unless_told_not_to():
    from memorystore_dev.devcluster.node import NODE_TOOLS, HostProcess, RealNode

    assert netpol.ENFORCER in NODE_TOOLS  # built, cached and checked with the node's tools
    extra = HostProcess("extra", argv=lambda info: ["/bin/true"])
    node = RealNode({netpol.ENFORCER: BINARY}, addons=[extra])
    assert [a.name for a in node.addons] == [netpol.ENFORCER, "extra"]  # first up, last down
    assert isinstance(node.addons[0], netpol.NetworkPolicyEnforcer)
    assert node.addons[0].binary == BINARY
    assert RealNode({}, addons=[extra], network_policies=False).addons == [extra]
