"""The per-tenant memory service (FastAPI over mem0).

mem0 reads MEM0_TELEMETRY and MEM0_DIR when it is imported, so they are set here, before
any submodule imports it: telemetry is always off, and mem0's directory defaults to one
per user under the temp dir unless the caller (``memorystore serve``) chose one.
"""

import os
import tempfile

os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault(
    "MEM0_DIR", os.path.join(tempfile.gettempdir(), f"memorystore-mem0-{os.getuid()}")
)
