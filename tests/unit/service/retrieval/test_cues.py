"""The query cues (retrieval/cues.py): the speaker and the period a query names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memorystore.service.retrieval.cues import cue_bonuses, named_speakers, without_speakers
from memorystore.service.retrieval.indexing import fuse
from memorystore.spec import RetrievalSettings

ON = RetrievalSettings(speaker_weight=0.2, time_weight=0.2, question_weight=0)


def test_a_speaker_is_named_by_whole_words_in_any_case():
    speakers = ["Caroline", "Mel", "jon_snow", "小明"]
    assert named_speakers("What did caroline research?", speakers) == {"Caroline"}
    assert named_speakers("What did Melanie paint?", speakers) == frozenset()  # not "Mel"
    assert named_speakers("Where does Jon Snow live?", speakers) == {"jon_snow"}
    assert named_speakers("小明喜欢什么", speakers) == {"小明"}
    assert named_speakers("Did Mel and Caroline meet?", speakers) == {"Mel", "Caroline"}


def test_only_a_query_naming_one_speaker_lifts_that_speakers_memories():
    payloads = {"a": {"actor_id": "Caroline"}, "b": {"actor_id": "Mel"}, "c": {}}
    assert cue_bonuses("What did Caroline research?", payloads, ON) == {"a": 0.2}
    assert cue_bonuses("Did Mel and Caroline meet?", payloads, ON) == {}
    assert cue_bonuses("What did she research?", payloads, ON) == {}
    off = RetrievalSettings(speaker_weight=0, time_weight=0, question_weight=0)
    assert cue_bonuses("What did Caroline research in May 2023?", payloads, off) == {}


def test_memories_in_the_named_period_are_lifted():
    payloads = {
        "may": {"date": "1:56 pm on 8 May, 2023", "actor_id": "Caroline"},
        "june": {"date": "2 June 2023"},
        "written": {"created_at": "2023-05-20T10:00:00"},
        "undated": {},
    }
    bonuses = cue_bonuses("What did Caroline do in May 2023?", payloads, ON)
    assert bonuses == {"may": 0.4, "written": 0.2}


def test_a_cue_reorders_close_candidates_and_scores_stay_in_range():
    dense = [("a", 0.80, {}), ("b", 0.79, {}), ("c", 0.1, {})]
    plain = fuse(dense, [], {}, ON, 0.0, 3)
    assert [h.id for h in plain] == ["a", "b", "c"]
    cued = fuse(dense, [], {}, ON, 0.0, 3, bonuses={"b": 0.2})
    assert [h.id for h in cued] == ["b", "a", "c"]
    assert all(0.0 <= h.score <= 1.0 for h in cued)
    # the cue lifts a close second past the first, never a weak candidate past a strong one
    weak = fuse(dense, [], {}, ON, 0.0, 3, bonuses={"c": 0.2})
    assert weak[0].id == "a"


@given(
    st.text(max_size=80),
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.fixed_dictionaries(
            {}, optional={"actor_id": st.text(max_size=12), "date": st.text(max_size=30)}
        ),
        max_size=8,
    ),
)
def test_hostile_queries_and_payloads_give_bounded_bonuses(query, payloads):
    bonuses = cue_bonuses(query, payloads, ON)
    assert set(bonuses) <= set(payloads)
    assert all(0.0 < b <= 0.4 + 1e-9 for b in bonuses.values())


def test_the_query_vector_leaves_out_the_speakers_it_names():
    speakers = ["Caroline", "Mel", "jon_snow", "小明"]
    assert without_speakers("What did Caroline research?", speakers) == "What did research?"
    assert without_speakers("What is Jon Snow's dog called?", speakers) == "What is dog called?"
    assert without_speakers("小明喜欢什么", speakers) == "喜欢什么"
    assert without_speakers("Did Mel and Caroline meet?", speakers) == "Did and meet?"
    # no speaker, or nothing left but names: the query as asked
    assert without_speakers("What did Melanie paint?", speakers) == "What did Melanie paint?"
    assert without_speakers("Caroline, Mel?", speakers) == "Caroline, Mel?"


@given(st.text(max_size=80), st.lists(st.text(max_size=12), max_size=4))
def test_leaving_out_a_name_never_empties_or_grows_the_query(query, speakers):
    out = without_speakers(query, speakers)
    assert out == query or (len(out) < len(query) and any(c.isalnum() for c in out))


def test_a_memory_that_only_asks_ranks_below_one_that_states():
    cue = RetrievalSettings(speaker_weight=0, time_weight=0, question_weight=0.05)
    payloads = {
        "asks": {"data": "What did you paint last week?"},
        "asks-zh": {"data": "你上周画了什么？ "},
        "states": {"data": "I painted a sunrise. Did you like it? Yes."},
    }
    assert cue_bonuses("paint", payloads, cue) == {"states": 0.05}
    dense = [(i, s, payloads.get(i, {})) for i, s in (("asks", 0.8), ("states", 0.79), ("x", 0.1))]
    hits = fuse(dense, [], {}, cue, 0.0, 3, bonuses=cue_bonuses("paint", payloads, cue))
    assert [h.id for h in hits] == ["states", "asks", "x"]
