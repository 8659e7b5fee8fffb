"""kill -9 during a session end, end it again: what stays is what one clean end leaves.

The issue's report: a service killed during a session end, the session ended again, left 18
duplicate retired facts. Here a real `memorystore serve` (the embedded default, no model:
the offline rules decide repeats and outdated facts) consolidates a long session whose
statements repeat, restate and supersede each other; it is killed with SIGKILL at moments
spread over the consolidation, restarted, and the session ended again each time. The user's
memories must then be exactly those a clean end of the same session left for another user
(same texts, same retired or active state), with no text stored twice and every memory's
history starting with its ADD.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memorystore.config import SecretSource, ServiceLLM
from memorystore.service.lifecycle.judge import JUDGE_HEADER
from memorystore.service.ops.runner import UvicornThread
from support.erasure_probe import Served, killed_during, marker, served, service_config
from support.scripted_models import KEY_ENV, build_app

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

CITIES = ["Hangzhou", "Shanghai", "Beijing", "Paris", "Berlin", "Lisbon"]


def session_script(rng: random.Random) -> list[list[str]]:
    """The user's side of each exchange: supersessions (favourites, moves), repeats,
    restatements in other case, and plain facts, interleaved."""
    colours = [marker(rng) for _ in range(5)]
    said: list[list[str]] = []
    for i in range(24):
        turn = [f"My locker number {i} is {marker(rng)}."]
        if i % 4 == 0:
            colour = colours[(i // 4) % len(colours)]
            turn.append(f"My favourite colour is {'now ' if i else ''}{colour}.")
        if i % 5 == 0:
            city = CITIES[(i // 5) % len(CITIES)]
            turn.append(f"I {'moved to' if i else 'live in'} {city}.")
        if i % 6 == 3:
            turn.append(said[i // 2][0])  # said again, word for word
        if i % 7 == 5:
            turn.append(said[i - 3][0].lower().rstrip("."))  # restated
        said.append(turn)
    return said


def journal(svc: Served, user: str, session: str, script: list[list[str]]) -> None:
    for turn in script:
        messages = [
            {"role": "user", "content": " ".join(turn)},
            {"role": "assistant", "content": "Noted."},
        ]
        body = {"messages": messages, "user_id": user}
        response = svc.call("POST", f"/v1/sessions/{session}/exchanges/", json=body)
        assert response.status_code == 200, response.text


def end(svc: Served, user: str, session: str) -> dict:
    body = {"user_id": user, "wait": True}
    response = svc.call("POST", f"/v1/sessions/{session}/end/", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def state(svc: Served, user: str) -> list[dict]:
    body = {"filters": {"user_id": user}, "include_retired": True}
    response = svc.call("POST", "/v3/memories/", params={"page_size": 100}, json=body)
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["count"] <= 100
    return page["results"]


def outcome(memories: list[dict]) -> Counter[tuple[str, bool]]:
    return Counter(
        (m["memory"], (m.get("metadata") or {}).get("lifecycle") == "retired") for m in memories
    )


def end_killed_at(svc: Served, user: str, session: str, written: int) -> bool:
    """End the session and SIGKILL the service once `written` memories of `user` are stored
    (polled through the API while it consolidates); False if the end answered first."""
    return killed_during(
        svc, lambda: end(svc, user, session), lambda: len(state(svc, user)) >= written, poll_s=0.005
    )


def test_a_session_end_killed_at_any_moment_and_run_again_stores_each_fact_once(tmp_path: Path):
    script = session_script(random.Random(11))
    with served(service_config(tmp_path, None, "embedded"), tmp_path) as svc:
        journal(svc, "clean", "s", script)
        started = time.monotonic()
        clean = end(svc, "clean", "s")
        duration = time.monotonic() - started
        assert clean["exchanges"] == len(script)
        expected = outcome(state(svc, "clean"))
        assert any(retired for _, retired in expected), "the script retires nothing"
        assert max(expected.values()) == 1, "a clean end stored a text twice"

        journal(svc, "bob", "s", script)
        total = sum(expected.values())
        kills = []
        for share in (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9):
            written = max(1, round(total * share))
            if end_killed_at(svc, "bob", "s", written):
                kills.append(written)
            svc.restart()
        final = end(svc, "bob", "s")
        assert end(svc, "bob", "s")["exchanges"] == 0  # and a further end finds nothing

        memories = state(svc, "bob")
        assert outcome(memories) == expected, (kills, final)
        texts = Counter(m["memory"] for m in memories)
        assert max(texts.values()) == 1, [t for t, n in texts.items() if n > 1]
        for memory in memories:
            history = svc.call("GET", f"/v1/memories/{memory['id']}/history/").json()
            assert history[0]["event"] == "ADD", memory
        assert len(kills) >= 5, f"too few kills landed during the consolidation: {kills}"
        print(
            f"\nclean end {duration:.2f} s, {sum(expected.values())} memories "
            f"({sum(n for (_, r), n in expected.items() if r)} retired); killed once "
            f"{kills} of them were written, then ended again: same memories"
        )


def _judging_slowly(app: ASGIApp, seconds: float) -> ASGIApp:
    """`app` answering the judge's prompt (not the extraction's) `seconds` late: the window
    between an extraction's facts being written and the outdated ones being retired."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        messages = []
        while True:
            message = await receive()
            messages.append(message)
            if not message.get("more_body"):
                break
        if JUDGE_HEADER.encode() in b"".join(m.get("body", b"") for m in messages):
            await asyncio.sleep(seconds)
        replay = iter(messages)

        async def again() -> Message:
            return next(replay)

        await app(scope, again, send)

    return wrapped


def test_an_extraction_killed_before_its_judgement_is_settled_when_run_again(
    tmp_path: Path, monkeypatch
):
    """With a model: the session's facts are written (one extraction), the service is killed
    while the model judges what they make outdated; the end run again settles those facts
    instead of extracting again (mem0 would skip them as known, and nothing would retire)."""
    monkeypatch.setenv(KEY_ENV, "sk-scripted")
    with UvicornThread(_judging_slowly(build_app([]), 3.0)) as chat:
        llm = ServiceLLM(
            provider="openai",
            model="scripted-1",
            base_url=f"{chat.url}/v1",
            api_key=SecretSource(env=KEY_ENV),
        )
        config = service_config(tmp_path, None, "embedded", llm)
        with served(config, tmp_path) as svc:
            outcomes = {}
            for user in ("clean", "bob"):
                body = {"messages": [{"role": "user", "content": "I live in Hangzhou"}]}
                svc.call("POST", "/v1/memories/", json={**body, "user_id": user}).raise_for_status()
                journal(svc, user, "s", [["Big news: I moved to Shanghai"]])
                before = len(state(svc, user))
                if user == "bob":
                    assert end_killed_at(svc, user, "s", before + 1), "the kill came too late"
                    svc.restart()
                    written = outcome(state(svc, user))
                    assert written[("Lives in Hangzhou", False)] == 1, "killed after the judge"
                end(svc, user, "s")
                outcomes[user] = outcome(state(svc, user))
            assert outcomes["bob"] == outcomes["clean"]
            assert outcomes["clean"][("Lives in Hangzhou", True)] == 1
            assert outcomes["clean"][("Lives in Shanghai", False)] == 1
