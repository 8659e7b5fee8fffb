"""The agent program of the Kubernetes walk (tests/e2e/test_walk_real_node.py), run INSIDE
agent pods of the memory-service image (it carries AgentScope and the middleware), mounted
from a ConfigMap. Test support, not product: it prints what happened as one JSON line
prefixed with RESULT_MARK, for the test to read back with `kubectl logs`.

    python3 walk_agent.py session USER SESSION s1|s2   one session of the demo's script
    python3 walk_agent.py probe HOST:PORT [...]        can this pod open a TCP connection?
    python3 walk_agent.py idle                         wait (for `kubectl exec … probe`)
    python3 walk_agent.py scrape URL CA_FILE           GET URL/metrics as Prometheus would
    python3 walk_agent.py traffic USER STOP_FILE [START_FILE]
                                                       add and search until STOP_FILE exists,
                                                       then check every acknowledged write
                                                       (first waiting for START_FILE, if named)

`session` builds the factory exactly as an agent process does (`from_env`: the client config
mounted at /etc/memorystore/client, the key at /etc/memorystore/secrets, MEMORYSTORE_*
toggles from the pod's env), then a real AgentScope Agent with the scripted stand-in model
(memorystore.scripted_model, the demo's script): s1 saves facts with add_memory, s2 searches
and answers from the memory it was sent. `traffic` uses the same factory's client (the
middleware's own calls, one attempt each) in a loop while the test takes a Qdrant pod away,
counting every call that failed; once STOP_FILE appears it lists the user's memories and
names any acknowledged write that is missing. It also stores one probe fact first and
searches for it with a question after every write, recording the fact's score: the score is
one embedder's cosine, so the sequence shows which index each read was served by (the
embedder migration's step). Only the standard library is imported for
`probe`, `idle` and `scrape`, so they start fast.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import ssl
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

RESULT_MARK = "WALK-RESULT "
CONNECT_TIMEOUT = 3.0
NETWORK_WAIT = 60.0  # the enforcer learns a new pod's address within seconds


def emit(result: dict[str, Any]) -> None:
    print(RESULT_MARK + json.dumps(result, ensure_ascii=False), flush=True)


def connect(target: str, timeout: float = CONNECT_TIMEOUT) -> dict[str, Any]:
    """One TCP connection attempt to host:port: resolved address, outcome, time taken."""
    host, _, port = target.rpartition(":")
    began = time.monotonic()
    out: dict[str, Any] = {"target": target}
    try:
        address = socket.gethostbyname(host)
        out["address"] = address
        with socket.create_connection((address, int(port)), timeout=timeout):
            out["connected"] = True
    except OSError as exc:
        out["connected"] = False
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["seconds"] = round(time.monotonic() - began, 3)
    return out


def probe(targets: list[str]) -> int:
    results = [connect(t) for t in targets]
    emit({"probe": results})
    return 0 if all(r["connected"] for r in results) else 1


def scrape(url: str, ca_file: str) -> int:
    """One scrape of `url`/metrics over HTTPS verified against `ca_file`, bounded as a
    Prometheus scrape is: its status and whether the store's series are in it."""
    import urllib.request

    began = time.monotonic()
    out: dict[str, Any] = {"url": url}
    context = ssl.create_default_context(cafile=ca_file)
    try:
        with urllib.request.urlopen(
            f"{url}/metrics", timeout=CONNECT_TIMEOUT, context=context
        ) as response:
            body = response.read().decode()
            out["status"] = response.status
            out["memories_series"] = any(
                line.startswith("memorystore_memories ") for line in body.splitlines()
            )
    except OSError as exc:  # a refused or silent network, a TLS failure
        out["status"] = None
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["seconds"] = round(time.monotonic() - began, 3)
    emit({"scrape": out})
    return 0 if out["status"] == 200 else 1


def idle() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


def _host_port(endpoint: str) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(endpoint)
    assert parts.hostname is not None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def wait_for_network(endpoint: str) -> float:
    """Seconds until the service accepted a TCP connection (bounded): a pod's first packets
    may leave before the NetworkPolicy enforcer has seen the pod's address."""
    host, port = _host_port(endpoint)
    began = time.monotonic()
    while True:
        if connect(f"{host}:{port}", timeout=2)["connected"]:
            return round(time.monotonic() - began, 3)
        if time.monotonic() - began > NETWORK_WAIT:
            raise SystemExit(f"walk agent: {host}:{port} unreachable for {NETWORK_WAIT:.0f} s")
        time.sleep(1)


def untrusted_ca_refused(endpoint: str) -> bool:
    """The service's certificate must NOT verify against the system's CAs (only against the
    store's own CA from the client ConfigMap): proof that verification really happens."""
    host, port = _host_port(endpoint)
    context = ssl.create_default_context()
    try:
        with (
            socket.create_connection((host, port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return False
    except ssl.SSLCertVerificationError:
        return True


async def session(user: str, session_id: str, which: str) -> dict[str, Any]:
    from agentscope.agent import Agent
    from agentscope.event import (
        ReplyEndEvent,
        TextBlockDeltaEvent,
        TextBlockEndEvent,
        ToolCallDeltaEvent,
        ToolCallStartEvent,
        ToolResultTextDeltaEvent,
    )
    from agentscope.message import UserMsg
    from agentscope.state import AgentState
    from agentscope.tool import Toolkit
    from agentscope.types import ReplyFinishedReason

    from memorystore import demo
    from memorystore.middleware import MemoryMiddlewareFactory
    from memorystore.scripted_model import ScriptedAgentModel

    script = demo.SCRIPTS["en"]
    events: list[dict[str, Any]] = []

    def observe(event: str, data: dict[str, Any]) -> None:
        if event == "recall":
            events.append({"event": "recall", "context": data.get("context") or ""})
        elif event == "capture":
            results = [
                {"event": r.get("event"), "memory": r.get("memory")}
                for r in data.get("results") or []
            ]
            events.append({"event": "capture", "results": results})

    factory = MemoryMiddlewareFactory.from_env(observer=observe)
    assert factory.cfg is not None, "no client config mounted"
    cfg = factory.cfg
    result: dict[str, Any] = {
        "user": user,
        "session": session_id,
        "script": which,
        "endpoint": cfg.endpoint,
        "ca_file": cfg.tls.ca_file,
        "ca_file_exists": bool(cfg.tls.ca_file and Path(cfg.tls.ca_file).is_file()),
        "verify": cfg.tls.verify,
        "write_permission": cfg.write_permission,
        "fail_open": cfg.fail_open,
    }
    result["network_wait_seconds"] = wait_for_network(cfg.endpoint)
    if cfg.endpoint.startswith("https://"):
        result["untrusted_ca_refused"] = untrusted_ca_refused(cfg.endpoint)
    turns = demo.scripted_session1(script) if which == "s1" else demo.scripted_session2(script)
    text = script.session1 if which == "s1" else script.session2
    model = ScriptedAgentModel(turns)
    try:
        middlewares = await factory(user, "assistant", session_id)
        result["memory_on"] = bool(middlewares)
        tools = [tool for mw in middlewares for tool in await mw.list_tools()]
        agent = Agent(
            name="assistant",
            system_prompt=demo.SYSTEM_PROMPT,
            model=model,
            toolkit=Toolkit(tools=tools),
            middlewares=middlewares,
            state=AgentState(session_id=session_id),
        )
        names: dict[str, str] = {}
        arguments: dict[str, str] = {}
        outputs: dict[str, str] = {}
        texts: dict[str, str] = {}
        answer, finished = "", None
        async for event in agent.reply_stream(UserMsg(name=user, content=text)):
            if isinstance(event, ToolCallStartEvent):
                names[event.tool_call_id] = event.tool_call_name
            elif isinstance(event, ToolCallDeltaEvent):
                arguments[event.tool_call_id] = arguments.get(event.tool_call_id, "") + event.delta
            elif isinstance(event, ToolResultTextDeltaEvent):
                outputs[event.tool_call_id] = outputs.get(event.tool_call_id, "") + event.delta
            elif isinstance(event, TextBlockDeltaEvent):
                texts[event.block_id] = texts.get(event.block_id, "") + event.delta
            elif isinstance(event, TextBlockEndEvent):
                answer = event.text if event.text is not None else texts.get(event.block_id, "")
            elif isinstance(event, ReplyEndEvent):
                finished = event.finished_reason
        await factory.drain()  # the write-back (session capture: the journal) runs after
        # the session ends here, as a chat UI's close would end it: its exchange is consolidated
        ended = await factory.end_session(user, "assistant", session_id, wait=True)
        result["session_end"] = {
            "exchanges": (ended or {}).get("exchanges"),
            "events": [r.get("event") for r in (ended or {}).get("results") or []],
        }
        result["completed"] = finished == ReplyFinishedReason.COMPLETED
        result["tool_calls"] = [
            {"name": names[i], "arguments": arguments.get(i, ""), "result": outputs.get(i, "")}
            for i in names
        ]
        result["answer"] = answer
        # what memory reached the model on its last call: the recall hint and tool results
        last = model.calls[-1].messages if model.calls else []
        result["memory_seen_by_model"] = demo._memory_seen(last)
        result["events"] = events
    finally:
        await factory.aclose()
    return result


TRAFFIC_STARTED = "WALK-TRAFFIC-STARTED"
TRAFFIC_WAITING = "WALK-TRAFFIC-WAITING"  # imported, waiting for START_FILE
PROBE_FACT = "The lighthouse keeper paints her rowing boat green every spring."
PROBE_QUESTION = "What colour is the keeper's boat?"


async def _visible_after(client: Any, fact: str, ids: dict[str, str]) -> float | None:
    """Seconds until a search finds `fact` (polled every 0.1 s for up to 5 s), else None."""
    began = time.monotonic()
    while time.monotonic() - began < 5:
        await asyncio.sleep(0.1)
        found = await client.search(fact, ids, top_k=3, threshold=0.0)
        if any(r.get("memory") == fact for r in found):
            return round(time.monotonic() - began, 2)
    return None


async def traffic(user: str, stop_file: str, start_file: str | None = None) -> dict[str, Any]:
    """Writes and reads through the middleware's client until `stop_file` exists: each write
    a new fact (an idempotency key, as the middleware sends), each read a search for the
    last fact acknowledged and one for the probe fact. Then every acknowledged fact must be
    among the user's memories."""
    import httpx

    from memorystore.middleware import MemoryMiddlewareFactory
    from memorystore.middleware.client import MemoryServiceError, ServiceKey, tls_verify

    factory = MemoryMiddlewareFactory.from_env()
    cfg, client = factory.cfg, factory.client
    assert cfg is not None and client is not None, "no client config mounted"
    if start_file is not None:  # the store may restart meanwhile: reached once told to
        print(TRAFFIC_WAITING, flush=True)
        while not Path(start_file).exists():
            await asyncio.sleep(0.1)
    wait_for_network(cfg.endpoint)
    ids = {"user_id": user}
    acknowledged: list[str] = []
    failures: list[dict[str, Any]] = []
    counts = {"writes": 0, "reads": 0, "reads_that_found_the_fact": 0}
    latencies: list[float] = []
    missed: list[dict[str, Any]] = []
    probes: list[tuple[float, float | None]] = []  # (wall time, the probe fact's score)
    began, wall0 = time.monotonic(), time.time()
    await client.add([{"role": "user", "content": PROBE_FACT}], ids, infer=False,
                     idempotency_key=f"probe-{time.time_ns()}")  # fmt: skip
    acknowledged.append(PROBE_FACT)
    print(TRAFFIC_STARTED, flush=True)
    try:
        while not Path(stop_file).exists():
            fact = f"Traffic note {counts['writes']} written at {time.time_ns()} ns."
            t0 = time.monotonic()
            try:
                await client.add([{"role": "user", "content": fact}], ids, infer=False,
                                 idempotency_key=f"traffic-{time.time_ns()}")  # fmt: skip
                acknowledged.append(fact)
                counts["writes"] += 1
            except MemoryServiceError as exc:
                failures.append({"op": "add", "at": round(t0 - began, 2), "error": str(exc)})
            if acknowledged:
                try:
                    found = await client.search(acknowledged[-1], ids, top_k=3, threshold=0.0)
                    counts["reads"] += 1
                    if any(r.get("memory") == acknowledged[-1] for r in found):
                        counts["reads_that_found_the_fact"] += 1
                    else:  # not visible to search yet: how long until it is?
                        lag = await _visible_after(client, acknowledged[-1], ids)
                        missed.append({"at": round(time.time() - wall0, 2), "lag_s": lag})
                except MemoryServiceError as exc:
                    failures.append({"op": "search", "at": round(t0 - began, 2), "error": str(exc)})
            try:
                found = await client.search(PROBE_QUESTION, ids, top_k=5, threshold=0.0)
                counts["reads"] += 1
                score = next((r["score"] for r in found if r.get("memory") == PROBE_FACT), None)
                probes.append((time.time(), None if score is None else float(score)))
            except MemoryServiceError as exc:
                failures.append({"op": "probe", "at": round(t0 - began, 2), "error": str(exc)})
            latencies.append(time.monotonic() - t0)
        # every acknowledged write, read back page by page
        key = ServiceKey(cfg.api_key).current()
        stored: set[str] = set()
        async with httpx.AsyncClient(
            base_url=cfg.endpoint, verify=tls_verify(cfg), timeout=60,
            headers={"Authorization": f"Token {key}"},
        ) as http:  # fmt: skip
            page = 1
            while True:
                response = await http.post(
                    "/v3/memories/", params={"page": page, "page_size": 100}, json=ids
                )
                response.raise_for_status()
                rows = response.json()["results"]
                stored.update(r["memory"] for r in rows)
                if len(rows) < 100:
                    break
                page += 1
    finally:
        await factory.aclose()
    latencies.sort()
    return {
        **counts,
        "seconds": round(time.monotonic() - began, 1),
        "failures": failures,
        "lost": [fact for fact in acknowledged if fact not in stored],
        "acknowledged": len(acknowledged),
        "missed": missed,  # each miss's "at" in seconds after "started" (wall clock)
        "started": wall0,
        "probes": probes,
        "p50_ms": round(1000 * latencies[len(latencies) // 2], 1) if latencies else None,
        "max_ms": round(1000 * latencies[-1], 1) if latencies else None,
    }


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "probe":
        return probe(rest)
    if command == "idle":
        return idle()
    if command == "scrape" and len(rest) == 2:
        return scrape(*rest)
    if command == "session" and len(rest) == 3:
        emit(asyncio.run(session(*rest)))
        return 0
    if command == "traffic" and len(rest) in (2, 3):
        emit(asyncio.run(traffic(*rest)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
