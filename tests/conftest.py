"""Shared test set-up. mem0 reads MEM0_DIR at import: point it at a throwaway dir first."""

import os
import tempfile

os.environ["MEM0_TELEMETRY"] = "False"
os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="memorystore-tests-mem0-")
