"""MemoryStore: long-term memory for every tenant's AgentScope agents."""

from importlib.metadata import version as _installed_version

__all__ = ["__version__"]

# the installed distribution's, which VERSION stamps (memorystore_dev.version)
__version__ = _installed_version("memorystore")
