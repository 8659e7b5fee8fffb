"""The retrieval rules (service/retrieval.py): what is indexed, and how candidates are fused."""

from __future__ import annotations

from memorystore.service.retrieval import PREV_KEY, fuse, index_texts
from memorystore.spec import RetrievalSettings

ON = RetrievalSettings()
PLAIN = RetrievalSettings(hybrid=False, neighbour_weight=0, context=False)


def test_context_indexes_speaker_date_and_the_previous_memory():
    texts = index_texts("I went hiking.", "Mel", "8 May 2023", "Caroline: Any plans?", ON)
    assert texts.dense == "Caroline: Any plans?\nMel: I went hiking."
    assert texts.lexical == "(8 May 2023) Mel: I went hiking."
    first = index_texts("Hello.", None, None, None, ON)
    assert (first.dense, first.lexical) == ("Hello.", "Hello.")
    off = index_texts("I went hiking.", "Mel", "8 May 2023", "Caroline: Any plans?", PLAIN)
    assert (off.dense, off.lexical) == ("I went hiking.", "I went hiking.")


def test_keyword_only_hits_join_the_ranking_and_meet_the_same_floor():
    dense = [("a", 0.9, {}), ("b", 0.5, {})]
    lexical = [("c", 12.0, {}), ("a", 3.0, {}), ("d", 8.0, {})]
    settings = RetrievalSettings(neighbour_weight=0)
    hits = fuse(dense, lexical, {"c": 0.45, "d": 0.1}, settings, threshold=0.2, top_k=10)
    # a: dense 1 + lexical 0; c: dense 0 (below the dense range) + lexical 1; d: under the floor
    assert [h.id for h in hits] == ["a", "c", "b"]
    assert [h.cosine for h in hits] == [0.9, 0.45, 0.5]
    assert all(0.0 <= h.score <= 1.0 for h in hits)


def test_dense_only_keeps_the_dense_order():
    dense = [("a", 0.9, {}), ("b", 0.7, {}), ("c", 0.6, {})]
    hits = fuse(dense, [], {}, PLAIN, threshold=0.0, top_k=2)
    assert [h.id for h in hits] == ["a", "b"]


def test_a_neighbour_lifts_the_turn_next_to_a_strong_match():
    # b follows a, d follows c; a is the best match, so b (its neighbour) passes c
    payload = {"a": {}, "b": {PREV_KEY: "a"}, "c": {}, "d": {PREV_KEY: "c"}}
    dense = [(i, s, payload[i]) for i, s in (("a", 1.0), ("c", 0.62), ("b", 0.6), ("d", 0.0))]
    without = fuse(dense, [], {}, RetrievalSettings(hybrid=False, neighbour_weight=0), 0.0, 4)
    assert [h.id for h in without] == ["a", "c", "b", "d"]
    lifted = fuse(dense, [], {}, RetrievalSettings(hybrid=False, neighbour_weight=0.3), 0.0, 4)
    assert [h.id for h in lifted] == ["a", "b", "c", "d"]


def test_ties_break_on_id_so_the_same_query_gives_the_same_order():
    dense = [("b", 0.5, {}), ("a", 0.5, {})]
    assert [h.id for h in fuse(dense, [], {}, PLAIN, 0.0, 2)] == ["a", "b"]
