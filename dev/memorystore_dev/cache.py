"""Where the developer tooling keeps what is slow to make: one folder for all of it.

`${XDG_CACHE_HOME:-~/.cache}/memorystore` (an unset or relative XDG_CACHE_HOME means
~/.cache, as the XDG spec says). The pinned Kubernetes tools, the image engine's data-root,
the pgvector build and the previous release each keep a folder under it; nothing assumes
any of them exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cache_home"]


def cache_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        base = Path(xdg)
    else:
        base = (Path(env["HOME"]) if env.get("HOME") else Path.home()) / ".cache"
    return base / "memorystore"
