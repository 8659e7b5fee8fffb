"""The image builds (images/builder.py): only the Dockerfile's targets are built."""

from __future__ import annotations

import pytest

from memorystore_dev.devcluster.images import ImageBuilder


def test_an_unknown_target_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="'debug' is not one of memory-service, operator"):
        ImageBuilder(cache=tmp_path).build("debug")
