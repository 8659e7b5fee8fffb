"""Where the checkout is, for tests that read its files (examples, charts, docs, data)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
