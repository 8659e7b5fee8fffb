"""The tool builder's one error: every failed step names the tool and why it failed."""

from __future__ import annotations

__all__ = ["BuildError"]


class BuildError(RuntimeError):
    """A tool could not be resolved, built or run; the message says which tool and why."""
