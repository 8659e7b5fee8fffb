"""Shared test set-up. mem0 reads MEM0_DIR at import: point it at a throwaway dir first."""

import contextlib
import os
import tempfile
from collections.abc import Generator
from pathlib import PurePosixPath
from typing import Any

import pytest

os.environ["MEM0_TELEMETRY"] = "False"
os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="memorystore-tests-mem0-")

# `make test` runs the suite in pytest-xdist workers. Two groups each stay in one worker, in
# collection order: the tests that use the machine itself (the image builder's dockerd, the
# real node, the policy enforcer's iptables chain: one host lock) and the simulated-node
# cluster tests (one control plane per worker that runs them). Everything else is spread
# over the workers as they free up.
MACHINE_MODULES = {
    "tests/e2e/test_images.py",
    "tests/e2e/test_netpol_real_node.py",
    "tests/e2e/test_operator_netpol_real_node.py",
    "tests/e2e/test_real_node.py",
    "tests/e2e/test_walk_real_node.py",
    "tests/integration/test_netpol_enforcer.py",
}
GROUPS = ("machine", "cluster")
# Modules whose module-scoped fixture costs more than their tests (a 10,000-memory store, its
# backup and a clean restore): one worker runs all of the module's tests, so the fixture is
# built once, not once in every worker that runs one of them.
ONE_WORKER_MODULES = {
    "tests/integration/test_backup_races.py",
}
# Cluster tests on a control plane of their own (they change what the shared one holds: the
# CRDs' versions): a unit of their own, so they run beside the cluster group, not in its
# worker; ordered with it (they need its tools).
OWN_CLUSTER_MODULES = {
    "tests/e2e/test_upgrade.py",
}


def scheduling_group(nodeid: str) -> str:
    """The scheduling unit of a test: "machine", "cluster", its module (ONE_WORKER_MODULES,
    OWN_CLUSTER_MODULES), or the test itself."""
    module = nodeid.split("::", 1)[0]
    if module in MACHINE_MODULES:
        return "machine"
    if module in OWN_CLUSTER_MODULES:
        return module
    if PurePosixPath(module).parent.name == "e2e":
        return "cluster"
    if module in ONE_WORKER_MODULES:
        return module
    return nodeid


def groups_can_start() -> bool:
    """Whether the groups' pinned tools are built already (a warm machine): then the groups
    go first, each in a worker of its own, the rest around them, and nothing long is left
    to run alone at the end. On a cold machine they go last, so that the other workers run
    what needs no tool while the tools build in the background (`make test`)."""
    from memorystore_dev.devcluster.netpol import ENFORCER
    from memorystore_dev.devcluster.target import CLIENT_TOOLS, CLUSTER_TOOLS, REAL_NODE_TOOLS
    from memorystore_dev.devcluster.tools import all_cached

    return all_cached([*CLUSTER_TOOLS, *CLIENT_TOOLS, *REAL_NODE_TOOLS, ENFORCER])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One order for the whole session. The machine group runs its real-node tests last
    (their session fixture holds the machine-wide host lock until the group ends, and the
    other machine tests, e.g. the enforcer's, take that lock too). The tests outside the
    groups run slow ones before fast, so none of them starts last and runs alone. The groups
    go first when their tools are built (`groups_can_start`), else last.

    A test that uses the real node outside the machine group would wait for the other
    worker's host lock for the whole run: it is refused instead."""
    if _groups_first(config):
        order = ["machine", "real node", "cluster", "slow", "fast"]
    else:
        order = ["slow", "fast", "cluster", "machine", "real node"]

    def kind(item: pytest.Item) -> str:
        group = scheduling_group(item.nodeid)
        if "real_node" in getattr(item, "fixturenames", ()):
            if group != "machine":
                raise pytest.UsageError(f"{item.nodeid} uses real_node: add it to MACHINE_MODULES")
            return "real node"
        if group in GROUPS:
            return group
        if group in OWN_CLUSTER_MODULES:
            return "cluster"
        return "slow" if item.get_closest_marker("slow") is not None else "fast"

    items.sort(key=lambda item: order.index(kind(item)))


# Decided once, in the process that starts the workers, and handed to each: workers that
# sorted differently (a tool finishing its build between two collections) would be refused.
GROUPS_FIRST = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.stash[GROUPS_FIRST] = groups_can_start()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["groups_first"] = node.config.stash[GROUPS_FIRST]


def _groups_first(config: pytest.Config) -> bool:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return bool(workerinput["groups_first"])
    return config.stash[GROUPS_FIRST]


def pytest_report_header(config: pytest.Config) -> str:
    where = "first" if _groups_first(config) else "last (their tools are not built yet)"
    return f"scheduling: the machine and cluster groups run {where}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """After a group's last test in this worker, release what the group started (its
    control plane, the real node: support.group_resources) instead of at the session's end."""
    try:
        return (yield)
    finally:
        group = scheduling_group(item.nodeid)
        if group in GROUPS and (nextitem is None or scheduling_group(nextitem.nodeid) != group):
            from support import group_resources

            group_resources.release()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    # Groups by module path, not by the xdist_group mark: pytest 9.2 ignores the node-id
    # suffix that --dist loadgroup relies on (pytest-xdist issue 1386, open).
    from xdist.scheduler import LoadScopeScheduling

    class ByResource(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_group(nodeid)

    # Scopes in the order pytest_collection_modifyitems gives, not the largest first (the
    # default would start the two groups before everything else).
    config.option.loadscopereorder = False
    return ByResource(config, log)


def tools_needed(item: pytest.Item) -> list[str]:
    """The pinned tools a test's fixtures will ask `ensure_tools` for (none: not a cluster test)."""
    from memorystore_dev.devcluster.netpol import ENFORCER
    from memorystore_dev.devcluster.target import CLIENT_TOOLS, CLUSTER_TOOLS, REAL_NODE_TOOLS

    fixtures = set(getattr(item, "fixturenames", ()))
    if "real_node" in fixtures:
        return CLUSTER_TOOLS + CLIENT_TOOLS + REAL_NODE_TOOLS
    if item.nodeid.startswith("tests/integration/test_netpol_enforcer.py"):
        return [*CLUSTER_TOOLS, ENFORCER]
    if "kube" in fixtures:
        return CLIENT_TOOLS if os.environ.get("KUBECONFIG") else CLUSTER_TOOLS + CLIENT_TOOLS
    if "helm" in fixtures:
        return ["helm"]
    if "promtool" in fixtures:
        return ["promtool"]
    return []


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Wait for (or build) the tools a test needs before its timeout starts: `make test`
    builds them in the background, and on a cold machine the Kubernetes build alone takes
    longer than a test may. Outermost, so it runs before pytest-timeout arms its timer. A
    failed build is left to the test's own fixture, which fails with the build's message."""
    if needed := tools_needed(item):
        from memorystore_dev.devcluster.tools import ensure_tools

        with contextlib.suppress(Exception):
            ensure_tools(needed, log=lambda _: None)
    return (yield)


@pytest.fixture(scope="module")
def qdrant_server() -> Generator[Any, None, None]:
    """A real Qdrant server (the vendored binary) with an API key, one per test module (it
    starts in under a second; a module's collections are its own)."""
    from memorystore_dev.qdrant import QdrantServer

    with QdrantServer() as server:
        yield server


def _absent_vendor_file(reason: str) -> None:
    """A vendored file (memorystore_dev.vendor) is not on this machine: skip saying which,
    except under CI=true, where ../shared is beside the checkout and its absence a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: ../shared/vendor must be beside the checkout)")
    pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """Fixtures that start a vendored server (Qdrant, PostgreSQL's pgvector) raise
    VendorMissing where ../shared is absent: that is a skip, not an error."""
    from memorystore_dev.vendor import VendorMissing

    try:
        return (yield)
    except VendorMissing as exc:
        _absent_vendor_file(str(exc))
        raise  # unreachable: skip and fail raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """The same for a test that starts one itself."""
    from memorystore_dev.vendor import VendorMissing

    try:
        return (yield)
    except VendorMissing as exc:
        _absent_vendor_file(str(exc))
        raise
