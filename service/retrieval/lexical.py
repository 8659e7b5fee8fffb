"""The keyword half of hybrid search: how text becomes BM25 terms, the same on every store.

Both vector stores take their sparse vectors from here (a Qdrant server only applies IDF),
so a memory is tokenised the same way on the embedded engine and on a server.

- `multilingual` (the default): the engine's multilingual tokenizer, which segments Chinese
  into words with a dictionary ("我住在杭州" → 住, 杭州) and splits mixed script
  at the script boundary ("用matplotlib画图" → matplotlib, 画图); Latin text is split on
  word boundaries and English-stemmed; English and Chinese stopwords are dropped. Bare
  numbers are not terms ("in 2022" has none, "note 105" only `note`): which memory a number
  names is left to the dense leg.
- `word`: the engine's default English word tokenizer (what every store used before the
  setting existed). A run of CJK characters is one token, so "杭州" never matches "我住在杭州".
"""

from __future__ import annotations

import functools
from typing import Any

import qdrant_edge as qe

from memorystore.spec import LexicalTokenizer


def bm25_config(tokenizer: LexicalTokenizer) -> qe.Bm25Config:
    if tokenizer == LexicalTokenizer.WORD:
        return qe.Bm25Config()
    return qe.Bm25Config(
        tokenizer=qe.TokenizerType.Multilingual,
        stopwords=qe.StopwordsSet(languages={qe.Language.English, qe.Language.Chinese}),
        stemmer=qe.SnowballParams(qe.SnowballLanguage.English),
    )


@functools.cache
def encoder(tokenizer: LexicalTokenizer) -> qe.Bm25:
    """One encoder per tokenizer and process (it holds the stemmer and stopword tables)."""
    return qe.Bm25(bm25_config(LexicalTokenizer(tokenizer)))


def keyword_text(payload: dict[str, Any]) -> str:
    """What a stored memory is keyword-indexed from (both stores and mem0 read the same)."""
    return str(payload.get("text_lemmatized") or payload.get("data") or "")


def terms(text: str, tokenizer: LexicalTokenizer) -> frozenset[int]:
    """The hashed terms a text is indexed under (what a query must share to match it)."""
    if not text:
        return frozenset()
    return frozenset(encoder(tokenizer).embed_query(text).indices)
