"""Shared test set-up. mem0 reads MEM0_DIR at import: point it at a throwaway dir first."""

import os
import tempfile
from pathlib import PurePosixPath

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
    "tests/e2e/test_real_node.py",
    "tests/e2e/test_walk_real_node.py",
    "tests/integration/test_netpol_enforcer.py",
}


def scheduling_group(nodeid: str) -> str:
    """The scheduling unit of a test: "machine", "cluster", or the test itself."""
    module = nodeid.split("::", 1)[0]
    if module in MACHINE_MODULES:
        return "machine"
    if PurePosixPath(module).parent.name == "e2e":
        return "cluster"
    return nodeid


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """One order for the whole session: slow tests outside the groups first, so none of them
    starts last and runs alone; real-node tests last, because their session fixture holds
    the machine-wide host lock until the session ends and the other machine tests (e.g. the
    enforcer's) take that lock too.

    A test that uses the real node outside the machine group would wait for the other
    worker's host lock for the whole run: it is refused instead."""

    def rank(item: pytest.Item) -> int:
        if "real_node" in getattr(item, "fixturenames", ()):
            if scheduling_group(item.nodeid) != "machine":
                raise pytest.UsageError(f"{item.nodeid} uses real_node: add it to MACHINE_MODULES")
            return 2
        grouped = scheduling_group(item.nodeid) != item.nodeid
        return 1 if grouped or item.get_closest_marker("slow") is None else 0

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    # Groups by module path, not by the xdist_group mark: pytest 9.2 ignores the node-id
    # suffix that --dist loadgroup relies on (pytest-xdist issue 1386, open).
    from xdist.scheduler import LoadScopeScheduling

    class ByResource(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_group(nodeid)

    return ByResource(config, log)
