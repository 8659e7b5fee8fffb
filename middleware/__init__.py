"""The agent side: `create_app(extra_agent_middlewares=MemoryMiddlewareFactory.from_env())`.

`settings` (mounted config + MEMORYSTORE_* toggles) → `factory` (one per process, one shared
`client` with a `breaker`) → `memory` (the per-run middleware) with its `tools`;
`session_end` consolidates a session when AgentScope deletes it.
"""

from memorystore.middleware.factory import MemoryMiddlewareFactory
from memorystore.middleware.memory import MemoryMiddleware
from memorystore.middleware.session_end import SessionEndMiddleware

__all__ = ["MemoryMiddleware", "MemoryMiddlewareFactory", "SessionEndMiddleware"]
