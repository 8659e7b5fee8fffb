"""The retrieval rules (retrieval/indexing.py): what is indexed, and how candidates are fused."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memorystore.service.retrieval.indexing import (
    FACT_GATE,
    PREV_KEY,
    TURN_GATE,
    fuse,
    index_texts,
    is_turn,
    keyword_gate,
    keyword_gates,
)
from memorystore.spec import RetrievalSettings

ON = RetrievalSettings()
PLAIN = RetrievalSettings.mem0_search(context=False)


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
    settings = RetrievalSettings(neighbour_weight=0, lexical_weight=1.0)
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
    without = fuse(
        dense,
        [],
        {},
        RetrievalSettings.mem0_search(),
        0.0,
        4,
    )
    assert [h.id for h in without] == ["a", "c", "b", "d"]
    lifted = fuse(dense, [], {}, RetrievalSettings(hybrid=False, neighbour_weight=0.3), 0.0, 4)
    assert [h.id for h in lifted] == ["a", "b", "c", "d"]


def test_ties_break_on_id_so_the_same_query_gives_the_same_order():
    dense = [("b", 0.5, {}), ("a", 0.5, {})]
    assert [h.id for h in fuse(dense, [], {}, PLAIN, 0.0, 2)] == ["a", "b"]


# --- the keyword gate ------------------------------------------------------------------------

Q = frozenset({1, 2, 3})  # query terms; 1 is common, 2 and 3 are distinctive


def test_no_query_terms_or_no_keyword_hit_means_no_keyword_score():
    assert keyword_gate(frozenset(), {"a": frozenset({1})}, ["a"], FACT_GATE) == 0.0
    assert keyword_gate(Q, {"a": frozenset({1})}, [], FACT_GATE) == 0.0


def test_a_hit_sharing_only_a_common_word_opens_no_gate():
    pool = {f"m{i}": frozenset({1, 10 + i}) for i in range(20)}  # every memory has term 1
    assert keyword_gate(Q, pool, ["m0", "m1"], FACT_GATE) == 0.0
    assert keyword_gate(Q, pool, ["m0", "m1"], TURN_GATE) == 0.0


def test_a_hit_with_every_query_term_opens_it_fully():
    pool = {f"m{i}": frozenset({1, 10 + i}) for i in range(20)} | {"x": frozenset({1, 2, 3})}
    assert keyword_gate(Q, pool, ["x", "m0"], FACT_GATE) == 1.0


def test_the_gate_ramps_between_the_floor_and_full():
    pool = {f"m{i}": frozenset({10 + i}) for i in range(20)} | {"x": frozenset({2, 3, 4})}
    query = frozenset({2, 3, 4, 5})  # x holds three of four terms: about 2/3 of the weight
    partly = keyword_gate(query, pool, ["x"], FACT_GATE)
    assert 0.0 < partly < 1.0
    # a conversation turn's keyword evidence counts earlier than a fact's
    assert keyword_gate(query, pool, ["x"], TURN_GATE) > partly


def test_each_keyword_hit_gets_the_gate_of_its_kind():
    pool = {f"m{i}": frozenset({10 + i}) for i in range(20)}
    pool |= {"fact": frozenset({2}), "turn": frozenset({2})}
    hits = [("fact", {}), ("turn", {"actor_id": "Mel"})]
    gates = keyword_gates(frozenset({2, 3}), pool, hits)
    assert gates["fact"] < gates["turn"], gates  # the same evidence, counted for a turn only
    assert is_turn({PREV_KEY: "a"}) and is_turn({"actor_id": "Mel"}) and not is_turn({})


@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12),
    st.lists(st.floats(0.1, 30.0), min_size=1, max_size=12),
)
def test_with_the_gate_shut_keyword_hits_never_move_dense_results(dense_scores, bm25_scores):
    """A weak keyword signal cannot push dense's best result down: the dense order stays."""
    dense = [(f"d{i}", s, {}) for i, s in enumerate(dense_scores)]
    lexical = [(f"d{i}" if i % 2 else f"k{i}", s, {}) for i, s in enumerate(bm25_scores)]
    cosines = {f"k{i}": 0.0 for i in range(len(bm25_scores))}
    settings = RetrievalSettings(neighbour_weight=0)
    shut = fuse(dense, lexical, cosines, settings, 0.0, 50, gates={})
    plain = fuse(dense, [], {}, settings, 0.0, 50)
    dense_ids = {i for i, _, _ in dense}
    assert [h.id for h in shut if h.id in dense_ids] == [h.id for h in plain]
