"""Per-language mean vectors of the offline embedders, to take their language bias out.

A small multilingual model places every Chinese text near every other Chinese text and
every English text near English: measured on `memorystore bench multilingual` with
multilingual-e5-small, a Chinese query found the English memory that answers it in its top 5
for 2 % of queries. Subtracting from each vector the mean vector of its language (and
normalising again) removes most of that shared component (Libovický et al., "On the Language
Neutrality of Pre-trained Multilingual Representations", 2020).

The means come from `calibration.json`, a corpus written for this purpose (not the
benchmark's data), and are checked in as `language_means.json` so start-up embeds nothing;
`python -m memorystore.service.retrieval.language_means --write` recomputes them after the
corpus or a model changes, and a unit test fails when the file is stale. The language of a
text is its script: any Han character makes it Chinese (mixed Chinese/English text included,
and so is Japanese with kanji), anything else uses the English mean; more languages are a
corpus addition and one regeneration.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from memorystore.rules.scripts import HAN

HERE = Path(__file__).parent
CORPUS = HERE / "calibration.json"
MEANS = HERE / "language_means.json"
LANGUAGES = ("zh", "en")
REGENERATE_COMMAND = (
    "PYTHONSAFEPATH=1 .venv/bin/python -m memorystore.service.retrieval.language_means --write"
)
_HAN = re.compile(f"[{HAN}]")


def language(text: str) -> str:
    return "zh" if _HAN.search(text) else "en"


def corpus() -> dict[str, list[str]]:
    """The calibration sentences per language (mixed text counts as Chinese)."""
    raw = json.loads(CORPUS.read_text(encoding="utf-8"))
    return {"zh": [*raw["zh"], *raw["mixed"]], "en": list(raw["en"])}


def corpus_digest() -> str:
    return hashlib.sha256(CORPUS.read_bytes()).hexdigest()


def compute(embed_passages: Any) -> dict[str, list[float]]:
    """Each language's mean of unit-length passage vectors."""
    out = {}
    for lang, texts in corpus().items():
        vecs = np.asarray(embed_passages(texts), dtype=np.float64).reshape(len(texts), -1)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        out[lang] = [round(float(x), 7) for x in vecs.mean(axis=0)]
    return out


@functools.cache
def means(provider: str) -> dict[str, np.ndarray]:
    """The checked-in means of one offline embedder; KeyError when it has none."""
    table = json.loads(MEANS.read_text(encoding="utf-8"))[provider]
    return {lang: np.asarray(table[lang], dtype=np.float32) for lang in LANGUAGES}


def centre(texts: list[str], vectors: np.ndarray, table: dict[str, np.ndarray]) -> np.ndarray:
    """Subtract each text's language mean from its unit vector, then normalise again."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms > 0, norms, 1.0)
    shifted = unit - np.stack([table[language(t)] for t in texts])
    norms = np.linalg.norm(shifted, axis=1, keepdims=True)
    return shifted / np.where(norms > 0, norms, 1.0)


def fresh_table() -> dict[str, Any]:
    """What `language_means.json` should hold: the means of every offline embedder."""
    from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS

    table: dict[str, Any] = {"corpus_sha256": corpus_digest()}
    for name, cls in OFFLINE_EMBEDDERS.items():
        model = cls.load_model(1, cls.runtime_of({}))
        table[name] = compute(lambda texts, cls=cls, model=model: cls.passages(model, texts))
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {MEANS.name}")
    args = parser.parse_args()
    text = json.dumps(fresh_table(), indent=1) + "\n"
    if args.write:
        MEANS.write_text(text, encoding="utf-8")
        print(f"wrote {MEANS}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
