"""The language means the offline embedders are centred with (`retrieval/language_means.py`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mem0.configs.embeddings.base import BaseEmbedderConfig

from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS
from memorystore.service.retrieval import language_means

# How far a fresh computation of the same means may fall from the checked-in one: the
# embedders' float kernels differ between CPUs (AVX2 vs AVX-512 gave differences up to 7.9e-5
# per component), while a changed corpus is caught by its checksum and a changed model moves
# the means by orders of magnitude more (components are ~5e-2).
KERNEL_TOLERANCE = 5e-4


def test_the_checked_in_means_are_a_fresh_computation():
    """Stale means (a corpus or model change without regenerating) fail here, not in recall."""
    checked_in = json.loads(language_means.MEANS.read_text(encoding="utf-8"))
    fresh = language_means.fresh_table()
    assert checked_in["corpus_sha256"] == fresh["corpus_sha256"], (
        f"calibration.json changed; regenerate with `{language_means.REGENERATE_COMMAND}`"
    )
    for name in OFFLINE_EMBEDDERS:
        for lang in language_means.LANGUAGES:
            np.testing.assert_allclose(
                checked_in[name][lang],
                fresh[name][lang],
                atol=KERNEL_TOLERANCE,
                err_msg=f"{name}/{lang} is stale: run `{language_means.REGENERATE_COMMAND}`",
            )


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("我住在杭州", "zh"),
        ("用matplotlib画图", "zh"),
        ("I live in Hangzhou", "en"),
        ("🙂", "en"),
        ("", "en"),
        ("𠀋", "zh"),  # a Han character outside the basic plane
    ],
)
def test_a_text_with_any_han_character_is_chinese(text: str, lang: str):
    assert language_means.language(text) == lang


@given(st.lists(st.text(max_size=30), min_size=1, max_size=5))
def test_centred_vectors_are_unit_length_and_never_nan(texts: list[str]):
    table = {"zh": np.full(4, 0.5, np.float32), "en": np.full(4, -0.5, np.float32)}
    vecs = np.tile(np.asarray([2.0, 2.0, 2.0, 2.0], np.float32), (len(texts), 1))  # unit: 0.5s
    out = language_means.centre(texts, vecs, table)
    assert not np.isnan(out).any()
    for text, row in zip(texts, out, strict=True):
        # the zh mean equals the vector itself: nothing is left, and it stays all zeros
        expected = 0.0 if language_means.language(text) == "zh" else 1.0
        assert np.linalg.norm(row) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", sorted(OFFLINE_EMBEDDERS))
def test_centring_takes_the_language_mean_out(name: str):
    cls = OFFLINE_EMBEDDERS[name]
    raw = cls(BaseEmbedderConfig(model_kwargs={}))
    centred = cls(BaseEmbedderConfig(model_kwargs={"language_centering": True}))
    texts = ["用户住在杭州。", "The user lives in Hangzhou."]
    plain = np.asarray(raw.embed_batch(texts))
    moved = np.asarray(centred.embed_batch(texts))
    table = language_means.means(name)
    for i, lang in enumerate(("zh", "en")):
        shifted = plain[i] / np.linalg.norm(plain[i]) - table[lang]
        np.testing.assert_allclose(moved[i], shifted / np.linalg.norm(shifted), atol=1e-5)
    # what centring is for: a fact is nearer its translation than an unrelated same-language one
    other = np.asarray(centred.embed_batch(["我明天下午要去看牙医。"]))[0]
    assert moved[0] @ moved[1] > moved[0] @ other
