"""What a memory records it was indexed with (`service/retrieval/reindex.py`), and what counts as a
change of its dense vector."""

from __future__ import annotations

from memorystore.service.retrieval.reindex import _dense_part, index_version, legacy_version
from memorystore.spec import RetrievalSettings


def test_the_default_version_names_tokenizer_context_and_centring():
    assert index_version(RetrievalSettings()) == "multilingual/context/centred"
    plain = RetrievalSettings(tokenizer="word", context=False, language_centering=False)
    assert index_version(plain) == "word/plain/raw"
    assert index_version(RetrievalSettings(), centred=False) == "multilingual/context/raw"


def test_memories_from_before_versions_count_as_word_terms_and_raw_vectors():
    assert legacy_version(RetrievalSettings()) == "word/context/raw"
    assert legacy_version(RetrievalSettings(context=False)) == "word/plain/raw"


def test_only_context_and_centring_change_the_dense_vector():
    base = index_version(RetrievalSettings())
    tokenizer_only = index_version(RetrievalSettings(tokenizer="word"))
    assert _dense_part(base) == _dense_part(tokenizer_only)
    assert _dense_part(base) != _dense_part(index_version(RetrievalSettings(context=False)))
    assert _dense_part(base) != _dense_part(legacy_version(RetrievalSettings()))
