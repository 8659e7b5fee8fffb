"""The image harness's errors: a failed step names itself and the log file that says why."""

from __future__ import annotations

__all__ = ["ImageBuildError", "MissingPackageError"]


class ImageBuildError(RuntimeError):
    """A step failed; the message names the step and the log file that says why."""


class MissingPackageError(ImageBuildError):
    """A Debian package the harness needs is not installed."""
