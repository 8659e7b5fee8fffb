"""The session journal and the exports store on PostgreSQL behave as on SQLite.

Multi-replica mode keeps both in `history.postgres` (`PgSessionJournal`, `PgExportStore`); the
app picks them or the SQLite ones at start-up, so every scenario here runs on both and must
give the same results. Against a REAL PostgreSQL (the test harness's, `PostgresServer`):
concurrent writers from separate processes, hostile ids as literals, migrations raced by two
replicas.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.scope import EntityIds, id_problem
from memorystore.service.lifecycle import journal as journals
from memorystore.service.lifecycle.journal import Exchange, PgSessionJournal, SessionJournal
from memorystore.service.state import postgres, saved_exports
from memorystore.service.state.saved_exports import ExportStore, PgExportStore
from memorystore_dev.postgres import PostgresServer

pytestmark = pytest.mark.timeout(600)

MIGRATIONS = journals.MIGRATIONS + saved_exports.MIGRATIONS
KINDS = ["sqlite", "postgres"]

Journal = SessionJournal | PgSessionJournal
Exports = ExportStore | PgExportStore


@pytest.fixture(scope="module")
def database(pg_server: PostgresServer) -> Iterator[postgres.Database]:
    db = postgres.Database(pg_server.dsn, field="history.postgres")
    assert db.migrate(MIGRATIONS) == ["sessions 1: session journal", "exports 1: stored exports"]
    assert db.migrate(MIGRATIONS) == []  # applied once: a second start applies nothing
    yield db
    db.close()


def empty(database: postgres.Database) -> None:
    """A fresh PostgreSQL store, seqs from 1 again (as in a new SQLite file)."""
    database.execute("TRUNCATE memorystore_exchanges, memorystore_exports RESTART IDENTITY")


@pytest.fixture
def new_journal(tmp_path: Path, database: postgres.Database) -> Iterator[Callable[[str], Journal]]:
    made: list[Journal] = []

    def make(kind: str) -> Journal:
        if kind == "sqlite":
            journal: Journal = SessionJournal(tmp_path / f"sessions-{len(made)}.db")
        else:
            empty(database)
            journal = PgSessionJournal(database)
        made.append(journal)
        return journal

    yield make
    for journal in made:
        journal.close()


@pytest.fixture
def new_exports(tmp_path: Path, database: postgres.Database) -> Iterator[Callable[..., Exports]]:
    made: list[Exports] = []

    def make(kind: str, retention_s: float = saved_exports.RETENTION_S) -> Exports:
        if kind == "sqlite":
            store: Exports = ExportStore(tmp_path / f"exports-{len(made)}.db", retention_s)
        else:
            empty(database)
            store = PgExportStore(database, retention_s)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture(params=KINDS)
def journal(request: pytest.FixtureRequest, new_journal: Callable[[str], Journal]) -> Journal:
    """One journal of each kind; a Hypothesis test reuses it for every example."""
    return new_journal(request.param)


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, new_exports: Callable[..., Exports]) -> Exports:
    return new_exports(request.param)


def count(store: Journal | Exports) -> int:
    """Rows in the store's table, expired or consolidated ones too (no public method)."""
    return store._rows(f"SELECT count(*) FROM {store._table}")[0][0]


# --- the same scenario on both ----------------------------------------------------------------

ALICE = EntityIds(user_id="alice")
COACH = EntityIds(user_id="alice", agent_id="coach")
BOB = EntityIds(user_id="bob")
AGENT = EntityIds(agent_id="coach")


def said(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]


def journal_scenario(journal: Journal) -> list[tuple[str, Any]]:
    """What consolidation does with a journal: append, read, sweep idle, mark, prune, forget."""
    out: list[tuple[str, Any]] = []
    later = time.time() + 3600
    appends = [
        (ALICE, "s1", "I live in Hangzhou.", {"lang": "en"}, False, True),
        (COACH, "s1", "Plot it.", {}, True, False),
        (ALICE, "s2", "我住在杭州。", {"n": 1.5, "k": [1, None]}, False, False),
        (ALICE, "s1", "Thanks!", {"z": 1, "a": 2}, True, True),
        (BOB, "s1", "I use matplotlib.", {}, False, True),
        (AGENT, "s1", "agent only", {}, False, True),
    ]
    seqs = [
        journal.append(scope, session, said(text), meta, saved=saved, raw=raw)
        for scope, session, text, meta, saved, raw in appends
    ]
    out.append(("seqs", seqs))
    pending, oldest = journal.backlog()  # the oldest's time differs by backend: checked here
    assert oldest is not None and abs(oldest - time.time()) < 60
    out.append(("backlog", pending))
    for scope, session in [(ALICE, "s1"), (COACH, "s1"), (ALICE, "s2"), (ALICE, "nope")]:
        out.append((f"pending {scope} {session}", journal.pending(scope, session)))
    out.append(("idle now", journal.idle(60)))
    out.append(("idle later", journal.idle(60, now=later)))
    journal.mark([seqs[0], seqs[3]])
    journal.mark([seqs[3], seqs[0]])  # a repeated end marks again: nothing changes
    journal.mark([])
    out.append(("pending alice s1 marked", journal.pending(ALICE, "s1")))
    out.append(("backlog marked", journal.backlog()[0]))
    out.append(("idle after mark", journal.idle(60, now=later)))
    journal.prune(3600)
    out.append(("rows after prune 1h", count(journal)))
    time.sleep(0.01)
    journal.prune(0)
    out.append(("rows after prune 0", count(journal)))
    journal.forget(ALICE)  # alice's sessions and her agents'; never bob's or the agent-only one
    out.append(("idle after forget", journal.idle(60, now=later)))
    out.append(("pending coach after forget", journal.pending(COACH, "s1")))
    out.append(("pending agent after forget", journal.pending(AGENT, "s1")))
    journal.forget(AGENT)
    out.append(("idle after agent forget", journal.idle(60, now=later)))
    again = journal.append(BOB, "s2", said("again"), {}, saved=False, raw=True)
    out.append(("seq after forget", again))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_the_journal_scenario(kind, new_journal):
    out = dict(journal_scenario(new_journal(kind)))
    assert out["seqs"] == [1, 2, 3, 4, 5, 6]
    assert out[f"pending {ALICE} s1"] == [
        Exchange(1, said("I live in Hangzhou."), {"lang": "en"}, False, True),
        Exchange(4, said("Thanks!"), {"z": 1, "a": 2}, True, True),
    ]
    assert out[f"pending {COACH} s1"] == [Exchange(2, said("Plot it."), {}, True, False)]
    assert out[f"pending {ALICE} s2"][0].metadata == {"n": 1.5, "k": [1, None]}
    assert out[f"pending {ALICE} nope"] == []
    assert out["idle now"] == []
    sessions_by_first_seq = [
        (ALICE, "s1"),
        (COACH, "s1"),
        (ALICE, "s2"),
        (BOB, "s1"),
        (AGENT, "s1"),
    ]
    assert out["idle later"] == sessions_by_first_seq
    assert out["pending alice s1 marked"] == []
    assert out["idle after mark"] == sessions_by_first_seq[1:]
    assert out["rows after prune 1h"] == 6 and out["rows after prune 0"] == 4
    assert out["idle after forget"] == [(BOB, "s1"), (AGENT, "s1")]
    assert out["pending coach after forget"] == []
    assert [e.seq for e in out["pending agent after forget"]] == [6]
    assert out["idle after agent forget"] == [(BOB, "s1")]
    assert out["seq after forget"] == 7  # seqs are never reused
    assert (out["backlog"], out["backlog marked"]) == (6, 4)


def test_the_journal_scenario_gives_the_same_results_on_both(new_journal):
    on_sqlite = journal_scenario(new_journal("sqlite"))
    on_postgres = journal_scenario(new_journal("postgres"))
    assert on_postgres == on_sqlite
    # the same JSON, key order included
    assert repr(on_postgres) == repr(on_sqlite)


def stored(export_id: str, scope: dict[str, str], *members: dict[str, str]) -> dict[str, Any]:
    return {"id": export_id, "scope": scope, "memories": [dict(m) for m in members]}


def exports_scenario(store: Exports) -> list[tuple[str, Any]]:
    """tests/unit/service/portability/test_export_format.py's scenarios, one transcript."""
    out: list[tuple[str, Any]] = []
    alice, coach = ALICE.filters(), COACH.filters()
    agent, bob = AGENT.filters(), BOB.filters()
    store.put(ALICE, stored("a1", alice, alice))
    store.put(ALICE, stored("a2", alice, alice, coach))
    store.put(COACH, stored("c1", coach, coach))
    store.put(ALICE, stored("empty", alice))
    store.put(AGENT, stored("agent", agent, agent))
    store.put(BOB, stored("bob", bob, bob))
    out.append(("get a1", store.get("a1")))
    out.append(("get nope", store.get("nope")))
    out.append(("latest alice", store.latest(ALICE)))
    out.append(("latest coach", store.latest(COACH)))
    out.append(("latest agent-only coach", store.latest(EntityIds(agent_id="nobody"))))
    out.append(("forget coach", store.forget(COACH)))  # only the export holding coach memories
    out.append(("get a2 after", store.get("a2")))
    out.append(("get a1 after", store.get("a1")))
    out.append(("forget alice", store.forget(ALICE)))  # alice's own, the empty one too
    out.append(("forget agent", store.forget(AGENT)))  # agent-only: never alice's
    out.append(("get bob", store.get("bob")))
    out.append(("rows", count(store)))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_the_exports_scenario(kind, new_exports):
    out = dict(exports_scenario(new_exports(kind)))
    alice = ALICE.filters()
    assert out["get a1"] == (ALICE, stored("a1", alice, alice))
    assert out["get nope"] is None
    assert out["latest alice"]["id"] == "empty"
    assert out["latest coach"]["id"] == "c1"
    assert out["latest agent-only coach"] is None
    assert out["forget coach"] == 2  # a2 holds coach memories, c1 is coach's own
    assert out["get a2 after"] is None and out["get a1 after"] is not None
    assert out["forget alice"] == 2
    assert out["forget agent"] == 1
    assert out["get bob"] == (BOB, stored("bob", BOB.filters(), BOB.filters()))
    assert out["rows"] == 1


def test_the_exports_scenario_gives_the_same_results_on_both(new_exports):
    on_sqlite = exports_scenario(new_exports("sqlite"))
    on_postgres = exports_scenario(new_exports("postgres"))
    assert on_postgres == on_sqlite
    assert repr(on_postgres) == repr(on_sqlite)


# --- exports: retention, erasure, exact documents ---------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_exports_expire_and_the_next_put_prunes_them(kind, new_exports):
    # a second of retention: long enough that what is put is still there when read back on
    # a loaded machine (50 ms was not, under a cold CI run), short enough to wait out
    retention = 1.0
    store = new_exports(kind, retention_s=retention)
    alice = ALICE.filters()
    store.put(ALICE, stored("old", alice, alice))
    assert store.get("old") is not None
    time.sleep(retention + 0.2)
    assert store.get("old") is None and store.latest(ALICE) is None
    assert count(store) == 1  # expired, not yet pruned
    store.put(ALICE, stored("new", alice))  # prunes the expired one
    assert store._rows(f"SELECT id FROM {store._table}") == [("new",)]
    assert store.latest(ALICE)["id"] == "new"


@pytest.mark.parametrize("kind", KINDS)
def test_forget_erases_every_export_of_a_scope(kind, new_exports):
    store = new_exports(kind)
    alice, coach, bob = ALICE.filters(), COACH.filters(), BOB.filters()
    for i in range(5):
        store.put(ALICE, stored(f"alice-{i}", alice, alice, coach))
        store.put(COACH, stored(f"coach-{i}", coach, coach))
        store.put(BOB, stored(f"bob-{i}", bob, bob))
    store.put(BOB, stored("bob-holds-alice", bob, alice))  # an export holding alice's memory
    assert store.forget(ALICE) == 11
    assert store.latest(ALICE) is None and store.latest(COACH) is None
    assert all(store.get(f"{who}-{i}") is None for who in ("alice", "coach") for i in range(5))
    assert store.get("bob-holds-alice") is None
    assert store.latest(BOB)["id"] == "bob-4"
    assert store.forget(ALICE) == 0
    assert count(store) == 5


@pytest.mark.parametrize("kind", KINDS)
def test_latest_of_exports_made_in_the_same_instant_is_the_last_put(kind, new_exports, monkeypatch):
    store = new_exports(kind)
    monkeypatch.setattr(saved_exports, "time", SimpleNamespace(time=lambda: 1_000_000_000.0))
    store.retention_s = 10 * 365 * 24 * 3600.0  # the frozen instant is not expired
    alice = ALICE.filters()
    for export_id in ("b", "a", "c"):
        store.put(ALICE, stored(export_id, alice))
    assert store.latest(ALICE)["id"] == "c"


@pytest.mark.parametrize("kind", KINDS)
def test_an_export_document_comes_back_exactly(kind, new_exports):
    store = new_exports(kind)
    alice = ALICE.filters()
    document = {
        "id": "doc",
        "z_first": "keys keep their order",
        "scope": alice,
        "memories": [{**alice, "memory": "nul \x00 inside, 杭州, 😀", "score": 0.1 + 0.2}],
        "numbers": [0, -1, 2**63, 1e308, 5e-324, 1.0, -0.0],
        "nested": {"b": {"a": [None, True, False, ""]}, "a": "\\'; DROP TABLE x; --%s"},
    }
    store.put(ALICE, document)
    got = store.get("doc")
    assert got is not None and got[0] == ALICE
    assert json.dumps(got[1]) == json.dumps(document)
    assert json.dumps(store.latest(ALICE)) == json.dumps(document)


@pytest.mark.parametrize("kind", KINDS)
def test_a_repeated_export_id_is_refused_and_the_store_stays_usable(kind, new_exports):
    store = new_exports(kind)
    alice = ALICE.filters()
    store.put(ALICE, stored("same", alice))
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        store.put(ALICE, stored("same", alice, alice))
    assert store.get("same") == (ALICE, stored("same", alice))  # the first one, untouched
    store.put(ALICE, stored("next", alice))  # no transaction left open by the failure
    assert store.latest(ALICE)["id"] == "next"


# --- keys PostgreSQL cannot store: refused alike, found nowhere alike --------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", ["nul\x00inside", "lone\ud800surrogate"])
def test_keys_neither_store_can_keep_are_refused_by_both(kind, bad, new_journal, new_exports):
    journal, store = new_journal(kind), new_exports(kind)
    with pytest.raises(ValueError, match="session"):
        journal.append(ALICE, bad, said("hi"), {}, saved=False, raw=True)
    assert journal.pending(ALICE, bad) == []
    with pytest.raises(ValueError, match="id"):
        store.put(ALICE, stored(bad, ALICE.filters()))
    assert store.get(bad) is None  # `memory_export_id` reaches here unchecked: 404, not 500
    assert count(journal) == 0 and count(store) == 0


# --- several processes at once ----------------------------------------------------------------

WRITER = """
import json, sys, time
from pathlib import Path
from memorystore.service.state import postgres
from memorystore.scope import EntityIds
from memorystore.service.lifecycle.journal import PgSessionJournal, SessionJournal

kind, target, name, count, ready, go = sys.argv[1:]
if kind == "sqlite":
    journal = SessionJournal(Path(target))
else:
    database = postgres.Database(target, field="history.postgres")
    journal = PgSessionJournal(database)
    database.check()
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.005)
scope = EntityIds(user_id="alice")
seqs = []
for i in range(int(count)):
    seqs.append(journal.append(scope, "shared", [{"role": "user", "content": f"{name} {i}"}],
                               {"writer": name, "i": i}, saved=False, raw=True))
    time.sleep(0.001)  # leave the other writer room: their appends interleave
journal.close()
print(json.dumps(seqs))
"""


@pytest.mark.parametrize("kind", KINDS)
def test_two_processes_appending_to_one_session_lose_and_repeat_nothing(
    kind, tmp_path, new_journal, pg_server
):
    journal = new_journal(kind)
    target = str(tmp_path / "sessions-0.db") if kind == "sqlite" else pg_server.dsn  # `journal`s
    per_writer, go = 150, tmp_path / "go"
    ready = {name: tmp_path / f"ready-{name}" for name in ("w1", "w2")}
    args = [sys.executable, "-c", WRITER, kind, target]
    writers = {
        name: subprocess.Popen(
            [*args, name, str(per_writer), str(flag), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, flag in ready.items()
    }
    deadline = time.monotonic() + 120
    while not all(flag.exists() for flag in ready.values()):
        assert time.monotonic() < deadline, "the writers did not start"
        assert all(p.poll() is None for p in writers.values()), "a writer died"
        time.sleep(0.05)
    go.touch()  # both write at once
    seqs: dict[str, list[int]] = {}
    for name, process in writers.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        seqs[name] = json.loads(stdout)
    for name, own in seqs.items():
        assert own == sorted(own) and len(set(own)) == per_writer, name  # rising, distinct
    everything = seqs["w1"] + seqs["w2"]
    assert len(set(everything)) == 2 * per_writer  # no seq handed out twice
    pending = journal.pending(ALICE, "shared")
    assert [e.seq for e in pending] == sorted(everything)  # nothing lost, in seq order
    for name, own in seqs.items():
        mine = [e for e in pending if e.metadata["writer"] == name]
        assert [e.seq for e in mine] == own
        assert [e.metadata["i"] for e in mine] == list(range(per_writer))


@pytest.mark.parametrize("kind", KINDS)
def test_marking_from_two_connections_at_once_is_idempotent(kind, tmp_path, new_journal, pg_server):
    journal = new_journal(kind)
    seqs = [journal.append(ALICE, "s1", said(f"{i}"), {}, saved=False, raw=True) for i in range(50)]
    if kind == "sqlite":
        others = [SessionJournal(tmp_path / "sessions-0.db") for _ in range(2)]  # its file
        databases: list[postgres.Database] = []
    else:
        databases = [postgres.Database(pg_server.dsn, field="history.postgres") for _ in range(2)]
        others = [PgSessionJournal(database) for database in databases]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def mark(other: Journal) -> None:
        try:
            start.wait()
            for _ in range(5):
                other.mark(seqs)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=mark, args=(other,)) for other in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for other in others:
        other.close()
    for database in databases:
        database.close()
    assert errors == []
    assert journal.pending(ALICE, "s1") == []
    assert journal.idle(0, now=time.time() + 60) == []
    assert count(journal) == 50  # marked, kept until pruned


class HeldJournal(PgSessionJournal):
    """A journal whose appends insert, then wait for `release` before they commit."""

    def __init__(self, database: postgres.Database) -> None:
        super().__init__(database)
        self.inserted, self.release = threading.Event(), threading.Event()

    @contextmanager
    def _transaction(self) -> Iterator[journal.Statements]:
        with super()._transaction() as statements:
            yield statements
            self.inserted.set()
            assert self.release.wait(60)


def test_an_append_waits_for_an_uncommitted_earlier_one_of_its_session(database):
    """Replicas appending to one session commit in seq order, so a consolidation that reads
    the session's pending exchanges never takes a later one and leaves an earlier one behind
    (SQLite: writers are serial anyway)."""
    empty(database)
    journal, held = PgSessionJournal(database), HeldJournal(database)
    seqs: dict[str, int] = {}

    def append(name: str, into: PgSessionJournal, session: str) -> None:
        seqs[name] = into.append(ALICE, session, said(name), {}, saved=False, raw=True)

    first = threading.Thread(target=append, args=("first", held, "s1"))
    first.start()
    assert held.inserted.wait(30)  # seq 1 taken, not committed
    append("other session", journal, "s2")  # another session is not held up
    second = threading.Thread(target=append, args=("second", journal, "s1"))
    second.start()
    time.sleep(0.5)
    assert second.is_alive(), "the second append did not wait for the first"
    assert journal.pending(ALICE, "s1") == []  # no later seq visible before the earlier one
    held.release.set()
    first.join(30)
    second.join(30)
    assert seqs == {"first": 1, "other session": 2, "second": 3}
    assert [e.seq for e in journal.pending(ALICE, "s1")] == [1, 3]


@pytest.mark.parametrize("kind", KINDS)
def test_a_replica_whose_clock_is_off_neither_ends_nor_keeps_a_session_early(
    kind, new_journal, monkeypatch
):
    """The journal's times are the database's: a replica an hour behind stamps an exchange
    as fresh all the same, so a sweep on another replica does not end the live session
    (one an hour ahead would keep an idle one from ending for an hour)."""
    journal = new_journal(kind)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    journal.append(ALICE, "live", said("still talking"), {}, saved=False, raw=True)
    monkeypatch.setattr(time, "time", real)

    assert journal.idle(60) == []
    assert journal.idle(0, now=real() + 1) == [(ALICE, "live")]
    (created,) = journal._rows(f"SELECT created FROM {journal._table}")[0]
    assert abs(created - real()) < 60


def test_close_leaves_the_shared_database_open(database):
    PgSessionJournal(database).close()
    PgExportStore(database).close()
    database.check()
    assert PgSessionJournal(database).pending(ALICE, "none") == []


# --- hostile ids are literals ------------------------------------------------------------------

HOSTILE = [
    "'; DROP TABLE x; --",
    "'; DROP TABLE memorystore_exchanges; --",
    "x'); DELETE FROM memorystore_exports; --",
    "%s",
    "%(scope)s",
    "%%",
    "?",
    "$1",
    "O'Brien",
    '"quoted"',
    "\\",
    "\\'",
    "/*",
    '{"user_id":"alice"}',
    "NULL",
    "杭州",
    "😀",
    "é" * 256,
    "x" * 256,
]
# scope and session ids hold no whitespace (`id_problem`): SQL comments stand in for spaces
ids = st.one_of(
    st.sampled_from([text.replace(" ", "/**/") for text in HOSTILE]),
    st.text(min_size=1, max_size=256).filter(lambda text: id_problem(text) is None),
)
# export ids: any string either store can keep as a key (`storable`), spaces included
export_ids = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(min_size=1, max_size=256).filter(journals.storable),
)


@st.composite
def scopes(draw: st.DrawFn) -> EntityIds:
    user, agent, run = (draw(st.none() | ids) for _ in range(3))
    if user is None and agent is None and run is None:
        user = draw(ids)
    return EntityIds(user_id=user, agent_id=agent, run_id=run)


# any text JSON can carry, NUL included; not lone surrogates (no client can send one)
contents = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)
metadata = st.dictionaries(
    contents,
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | contents,
    max_size=4,
)
HYPOTHESIS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@HYPOTHESIS
@given(scope=scopes(), session=ids, text=contents, meta=metadata, saved=st.booleans())
def test_hostile_ids_round_trip_the_journal_literally(journal, scope, session, text, meta, saved):
    # one journal for every example: each leaves it empty
    messages = [{"role": "user", "content": text}, {"role": "assistant", "content": session}]
    seq = journal.append(scope, session, messages, meta, saved=saved, raw=not saved)
    assert journal.pending(scope, session) == [Exchange(seq, messages, meta, saved, not saved)]
    assert (scope, session) in journal.idle(0, now=time.time() + 1)
    journal.forget(scope)
    assert journal.pending(scope, session) == []
    assert count(journal) == 0  # the hostile ids dropped nothing else, nor everything early


@HYPOTHESIS
@given(scope=scopes(), export_id=export_ids, text=contents)
def test_hostile_ids_round_trip_the_exports_literally(store, scope, export_id, text):
    document = {
        "id": export_id,
        "scope": scope.filters(),
        "memories": [{**scope.filters(), "memory": text}],
    }
    store.put(scope, document)
    assert store.get(export_id) == (scope, document)
    assert store.latest(scope) == document
    assert store.forget(scope) == 1
    assert store.get(export_id) is None and count(store) == 0


# --- migrations raced by two replicas -----------------------------------------------------------


def test_two_replicas_migrating_at_once_apply_each_step_once(pg_server):
    pg_server.psql("CREATE DATABASE migration_race")
    dsn = pg_server.dsn.replace("/memorystore?", "/migration_race?")
    assert dsn != pg_server.dsn
    replicas = [postgres.Database(dsn, field="history.postgres") for _ in range(2)]
    start = threading.Barrier(2)
    applied: list[list[str]] = []
    errors: list[BaseException] = []

    def migrate(database: postgres.Database) -> None:
        try:
            start.wait()
            applied.append(database.migrate(MIGRATIONS))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=migrate, args=(db,)) for db in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    try:
        assert errors == []
        assert len(applied) == 2
        steps = ["sessions 1: session journal", "exports 1: stored exports"]
        assert sorted(applied[0] + applied[1]) == sorted(steps)  # each once, by either
        rows = replicas[0].execute(
            "SELECT component, version, name FROM memorystore_migrations ORDER BY component"
        )
        assert rows == [("exports", 1, "stored exports"), ("sessions", 1, "session journal")]
        assert replicas[1].migrate(MIGRATIONS) == []
        journal, store = PgSessionJournal(replicas[0]), PgExportStore(replicas[1])
        assert journal.append(ALICE, "s", said("hi"), {}, saved=False, raw=True) == 1
        store.put(ALICE, stored("e", ALICE.filters()))
        assert store.get("e") is not None
    finally:
        for database in replicas:
            database.close()
