"""Hybrid search on the real service: the keyword leg's list is cut at `candidates`, so when
more memories than that match a query equally (the same words; numbers, which the keyword
tokenizer drops, are all that tells them apart) which of them made the list is arbitrary.
The dense leg's candidates get their keyword scores all the same, so a memory searched by its
own words is found first however many of its near-copies there are."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.service.retrieval.lexical import terms
from memorystore.spec import RetrievalSettings
from support.backups import client

CANDIDATES = 10  # the smallest the spec allows: three times as many notes as candidates
NOTES = [f"Shipment note {n} logged at 17962{n * 7919:08d} ns." for n in range(3 * CANDIDATES)]


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    tmp: Path = tmp_path_factory.mktemp("hybrid")
    cfg = embedded_config(tmp, retrieval=RetrievalSettings(candidates=CANDIDATES))
    with ServiceThread(cfg) as svc, client(svc) as http:
        for note in NOTES:
            body = {"messages": [{"role": "user", "content": note}], "user_id": "u"}
            http.post("/v3/memories/add/", json={**body, "infer": False}).raise_for_status()
        yield http


def test_the_notes_tie_on_the_keyword_leg() -> None:
    """The premise: more notes than candidates, which the keyword leg cannot tell apart."""
    assert len(NOTES) > CANDIDATES
    assert len({terms(note, RetrievalSettings().tokenizer) for note in NOTES}) == 1


@pytest.mark.parametrize("note", NOTES[::3] + NOTES[-2:])
def test_a_memory_searched_by_its_own_words_is_found_first(http: httpx.Client, note: str) -> None:
    body = {"query": note, "filters": {"user_id": "u"}, "top_k": 3, "threshold": 0.0}
    found = http.post("/v3/memories/search/", json=body).raise_for_status().json()["results"]
    assert found and found[0]["memory"] == note, found
