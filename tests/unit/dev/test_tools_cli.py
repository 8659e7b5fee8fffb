"""`python -m memorystore_dev.devcluster.tools` (tools/cli.py)."""

from __future__ import annotations

from memorystore_dev.devcluster import versions
from memorystore_dev.devcluster.tools import cli


def test_print_versions_lists_every_pin(capsys):
    assert cli.main(["--print-versions"]) == 0
    out = capsys.readouterr().out
    for tool, version in versions.TOOL_VERSIONS.items():
        assert tool in out
        assert version in out
