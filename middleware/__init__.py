"""The agent side: `create_app(extra_agent_middlewares=MemoryMiddlewareFactory.from_env())`.

`settings` (mounted config + MEMORYSTORE_* toggles) → `factory` (one per process, one shared
`client` with a `breaker`) → `memory` (the per-run middleware) with its `tools`.
"""

from memorystore.middleware.factory import MemoryMiddlewareFactory
from memorystore.middleware.memory import MemoryMiddleware

__all__ = ["MemoryMiddleware", "MemoryMiddlewareFactory"]
