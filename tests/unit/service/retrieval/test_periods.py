"""The time cue's reading of dates (retrieval/periods.py): each rule's examples, hostile text."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorystore.service.retrieval.periods import RULES, Period, memory_date, query_periods


@pytest.mark.parametrize(
    ("rule", "text", "period"),
    [(r.name, text, period) for r in RULES for text, period in r.examples.items()],
)
def test_each_rule_reads_its_examples(rule, text, period):
    assert query_periods(text) == (period,), rule


@pytest.mark.parametrize(
    ("query", "periods"),
    [
        ("What did Maria donate to a homeless shelter in December 2023?", [Period(2023, 12)]),
        ("What painting did Melanie show on October 13, 2023?", [Period(2023, 10, 13)]),
        ("When did Melanie go camping in June?", [Period(None, 6)]),
        ("How many times has Melanie gone to the beach in 2023?", [Period(2023)]),
        ("我2023年5月8日去了杭州", [Period(2023, 5, 8)]),
        ("她十二月做了什么", [Period(None, 12)]),
        ("between 3 May and 2023年7月", [Period(None, 5, 3), Period(2023, 7)]),
        # no period: "may" the verb, numbers that are not years, months without a cue
        ("What may Caroline do next?", []),
        ("Who came to room 2023?", []),
        ("What did June say about it?", []),
        ("", []),
    ],
)
def test_queries_name_the_periods_they_ask_about(query, periods):
    assert list(query_periods(query)) == periods


def test_the_most_specific_reading_wins_where_rules_overlap():
    # "in December" and "December 2023" overlap: the longer reading is the one meant
    assert query_periods("in December 2023") == (Period(2023, 12),)
    assert query_periods("2023年5月8日") == (Period(2023, 5, 8),)


@pytest.mark.parametrize(
    ("payload", "day"),
    [
        ({"date": "1:56 pm on 8 May, 2023"}, date(2023, 5, 8)),
        ({"date": "2023-05-08T13:56:00+00:00"}, date(2023, 5, 8)),
        ({"date": "May 8, 2023"}, date(2023, 5, 8)),
        ({"date": "2023年5月8日"}, date(2023, 5, 8)),
        ({"created_at": "2026-12-02T10:00:00-08:00"}, date(2026, 12, 2)),
        # the metadata date wins over when the memory was written
        ({"date": "8 May 2023", "created_at": "2026-12-02T10:00:00"}, date(2023, 5, 8)),
        # unreadable or impossible dates fall back, or give none
        ({"date": "some day", "created_at": "2026-12-02T10:00:00"}, date(2026, 12, 2)),
        ({"date": "2023-02-30"}, None),
        ({"date": "31 February 2023"}, None),
        ({"date": 20230508}, None),
        ({}, None),
    ],
)
def test_a_memory_happened_on_its_date_else_when_written(payload, day):
    assert memory_date(payload) == day


def test_a_period_contains_the_days_it_names():
    assert Period(2023, 5).contains(date(2023, 5, 31))
    assert not Period(2023, 5).contains(date(2024, 5, 1))
    assert Period(None, 6).contains(date(1999, 6, 1))
    assert Period(None, 6, 3).contains(date(2030, 6, 3))
    assert not Period(None, 6, 3).contains(date(2030, 6, 4))


@given(st.text(max_size=200))
def test_any_text_reads_as_valid_periods_or_none(text):
    """Hostile queries and metadata: never an exception, only periods that can hold a day."""
    for period in query_periods(text):
        assert period.year is None or 1900 <= period.year <= 2099
        assert period.month is None or 1 <= period.month <= 12
        assert period.day is None or 1 <= period.day <= 31
    found = memory_date({"date": text})
    assert found is None or isinstance(found, date)


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31)))
def test_every_written_day_reads_back(day):
    month = day.strftime("%B")
    for written in (
        f"{day.day} {month}, {day.year}",
        f"{month} {day.day}, {day.year}",
        day.isoformat(),
        f"{day.year}年{day.month}月{day.day}日",
    ):
        assert memory_date({"date": written}) == day, written
        assert Period(day.year, day.month, day.day) in query_periods(f"on {written}"), written
