"""The text rules are usable by the agent side without mem0: importing them loads neither
mem0 nor the service."""

from __future__ import annotations

import subprocess
import sys

IMPORTS = (
    "memorystore.rules.dedup",
    "memorystore.rules.statements",
    "memorystore.rules.supersede",
    "memorystore.recall",
)


def test_the_rules_load_neither_mem0_nor_the_service():
    code = (
        f"import sys\nimport {', '.join(IMPORTS)}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith('mem0')}"
        " | {m for m in sys.modules if m.startswith('memorystore.service')}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
