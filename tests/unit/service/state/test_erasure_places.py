"""Each place beside the vectors that keeps text, erased (`forget_erased`), on SQLite; the
same code runs on PostgreSQL in tests/integration/test_erasure.py. Plus the ledger's
pending/done records and the time rule of scope erasures."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorystore.scope import EntityIds
from memorystore.service.lifecycle.journal import SessionJournal
from memorystore.service.state.erasure_ledger import LocalLedger
from memorystore.service.state.erasures import (
    Erasure,
    ErasureSet,
    Forgotten,
    epoch,
    now,
    scope_digest,
)
from memorystore.service.state.idempotency import LocalRecords, memory_ids
from memorystore.service.state.saved_exports import ExportStore
from memorystore.service.state.scope_chain import LocalChain

BOB, ALICE = EntityIds(user_id="bob"), EntityIds(user_id="alice")


def scope_erasure(scope: EntityIds, at: datetime | None = None) -> Forgotten:
    when = (at or datetime.now(UTC)).isoformat()
    return Forgotten(Erasure(when, scope_digest(scope), ()))


def memories_erasure(payloads: dict[str, dict]) -> Forgotten:
    return Forgotten(Erasure(now(), None, tuple(payloads)), payloads)


# --- the ledger ----------------------------------------------------------------------------


def test_an_erasure_is_pending_until_done_across_reopening(tmp_path):
    ledger = LocalLedger(tmp_path / "erasures.db")
    first = ledger.record(Erasure(now(), None, ("m1",)))
    second = ledger.record(Erasure(now(), scope_digest(BOB), ("m2",)))
    assert second > first and ledger.last() == second
    ledger.done(first)
    ledger.done(first)  # marking again changes nothing
    ledger.close()
    reopened = LocalLedger(tmp_path / "erasures.db")
    assert [(seq, e.memory_ids) for seq, e in reopened.pending()] == [(second, ("m2",))]
    reopened.done(second)
    assert reopened.pending() == [] and len(reopened.entries()) == 2
    reopened.close()


# --- the time rule -----------------------------------------------------------------------------


@given(
    st.integers(-10_000, 10_000),
    st.sampled_from([{"user_id": "bob"}, {"user_id": "bob", "agent_id": "a"}, {"agent_id": "a"}]),
)
def test_a_scope_erasure_covers_what_the_scope_held_when_it_was_recorded(offset, ids):
    """A memory created before the erasure is covered; one created after (the user came
    back) never is, whoever re-applies the erasure later (a restore, a resume)."""
    at = datetime(2026, 5, 1, tzinfo=UTC)
    erased = ErasureSet([Erasure(at.isoformat(), scope_digest(BOB), ())])
    created = at + timedelta(seconds=offset)
    payload = {**ids, "created_at": created.isoformat()}
    inside = EntityIds(**ids).filters().get("user_id") == "bob"
    assert erased.memory_erased("m", payload) == (inside and offset < 0)
    assert erased.scope_erased(ids, created.timestamp()) == (inside and offset < 0)
    assert erased.scope_erased(ids) == inside  # no time: whatever it holds


def test_times_without_a_zone_are_utc_and_unreadable_ones_count_as_before():
    assert epoch("2026-05-01T00:00:00") == epoch("2026-05-01T00:00:00+00:00")
    erased = ErasureSet([Erasure(now(), scope_digest(BOB), ())])
    assert erased.memory_erased("m", {"user_id": "bob", "created_at": "yesterday"})
    assert erased.memory_erased("m", {"user_id": "bob"})


# --- idempotency records -------------------------------------------------------------------------


def test_records_naming_an_erased_memory_go_the_others_stay(tmp_path):
    records = LocalRecords(tmp_path / "idempotency.db")
    answer = {"results": [{"id": "m1", "memory": "bob's secret", "event": "NONE"}]}
    records.put("k1", "fp", 200, json.dumps(answer), 1e9, 0, memory_ids(answer))
    other = {"results": [{"id": "m2", "memory": "alice's", "event": "ADD"}]}
    records.put("k2", "fp", 200, json.dumps(other), 1e9, 0, memory_ids(other))
    assert records.forget_erased(memories_erasure({"m1": {}})) == 1
    assert records.get("k1", 0) is None and records.get("k2", 0) is not None
    records.close()


def test_records_written_before_erasures_named_memories_are_read_for_ids(tmp_path):
    """A file from before the `memories` column: the column is added, the answer is read."""
    path = tmp_path / "idempotency.db"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE idempotency (key TEXT PRIMARY KEY, fingerprint TEXT, "
        "status INTEGER, response TEXT, created REAL)"
    )
    answer = {"results": [{"id": "m9", "memory": "old text", "superseded_by": "m1"}]}
    old.execute("INSERT INTO idempotency VALUES ('k', 'fp', 200, ?, 1e9)", (json.dumps(answer),))
    old.commit()
    old.close()
    records = LocalRecords(path)
    assert records.forget_erased(memories_erasure({"m1": {}})) == 1  # named as successor
    records.close()


@given(st.recursive(st.text(max_size=3), lambda c: st.lists(c) | st.dictionaries(st.text(), c)))
def test_memory_ids_finds_every_id_an_answer_names(answer):
    wrapped = {"results": [{"id": "x1", "duplicate_of": "x2", "nested": answer}]}
    assert memory_ids(wrapped)[:2] == ["x1", "x2"]


# --- the session journal -------------------------------------------------------------------------


def _exchange(journal: SessionJournal, scope: EntityIds, session: str, text: str) -> int:
    messages = [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    return journal.append(scope, session, messages, {}, saved=False, raw=True)


def test_a_scope_erasure_drops_the_scopes_exchanges_made_before_it(tmp_path):
    journal = SessionJournal(tmp_path / "sessions.db")
    sub = EntityIds(user_id="bob", agent_id="coach")
    _exchange(journal, BOB, "s", "bob 1")
    _exchange(journal, sub, "s", "bob's coach")
    _exchange(journal, ALICE, "s", "alice")
    _exchange(journal, EntityIds(agent_id="coach"), "s", "agent only")
    assert journal.forget_erased(scope_erasure(BOB, datetime.now(UTC) - timedelta(hours=1))) == 0
    assert journal.forget_erased(scope_erasure(BOB)) == 2
    assert [len(journal.pending(s, "s")) for s in (BOB, sub, ALICE)] == [0, 0, 1]
    assert len(journal.pending(EntityIds(agent_id="coach"), "s")) == 1
    journal.close()


def test_a_memory_erasure_drops_the_exchanges_that_hold_it(tmp_path):
    journal = SessionJournal(tmp_path / "sessions.db")
    _exchange(journal, BOB, "open", "my pin is 4242 and I like tea")
    _exchange(journal, BOB, "open", "I like coffee")
    done = _exchange(journal, BOB, "closed", "a consolidated exchange")
    journal.mark([done])
    _exchange(journal, ALICE, "open", "my pin is 4242 and I like tea")  # another scope
    fact = {"user_id": "bob", "data": "my pin is 4242", "source": "session", "session": "closed"}
    assert journal.forget_erased(memories_erasure({"m1": fact})) == 2
    left = [e.messages[0]["content"] for e in journal.pending(BOB, "open")]
    assert left == ["I like coffee"]
    assert len(journal.pending(ALICE, "open")) == 1
    journal.close()


# --- stored exports ----------------------------------------------------------------------------


def _export(store: ExportStore, scope: EntityIds, memory_id: str) -> str:
    document = {
        "id": f"export-{memory_id}",
        "memories": [{"id": memory_id, "memory": "text", **scope.filters()}],
    }
    store.put(scope, document)
    return document["id"]


@pytest.mark.parametrize("tricky", ["m_1", "m%1", "m\\1", 'm"1'])
def test_a_memory_erasure_drops_exactly_the_exports_that_hold_it(tmp_path, tricky):
    """Ids with LIKE's wildcards and JSON's escapes match only themselves."""
    store = ExportStore(tmp_path / "exports.db")
    held = _export(store, BOB, tricky)
    lookalike = _export(store, BOB, tricky.replace(tricky[1], "X"))
    assert store.forget_erased(memories_erasure({tricky: {"user_id": "bob"}})) == 1
    assert store.get(held) is None and store.get(lookalike) is not None
    store.close()


def test_a_scope_erasure_drops_exports_holding_the_scopes_memories(tmp_path):
    store = ExportStore(tmp_path / "exports.db")
    mine = _export(store, EntityIds(user_id="bob", agent_id="coach"), "m1")
    theirs = _export(store, ALICE, "m2")
    assert store.forget_erased(scope_erasure(BOB)) == 1
    assert store.get(mine) is None and store.get(theirs) is not None
    store.close()


# --- the scope chain -------------------------------------------------------------------------


def test_the_chain_forgets_erased_scopes_and_memories():
    chain = LocalChain()

    async def run() -> list:
        await chain.claim(BOB, "b1", "bob: secret")
        await chain.claim(EntityIds(user_id="bob", run_id="r"), "b2", "bob: more")
        await chain.claim(ALICE, "a1", "alice: hi")
        await chain.forget_erased(scope_erasure(BOB))
        await chain.forget_erased(memories_erasure({"a1": {}}))
        return [
            await chain.claim(BOB, "b3", "x"),
            await chain.claim(EntityIds(user_id="bob", run_id="r"), "b4", "x"),
            await chain.claim(ALICE, "a2", "x"),
        ]

    assert asyncio.run(run()) == [None, None, None]
