"""The erasure ledger's records and predicates (service/state/erasures.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorystore.scope import EntityIds
from memorystore.service.state.erasures import (
    Erasure,
    ErasureSet,
    LedgerError,
    now,
    scope_digest,
    scopes_containing,
)

ids = st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=12)
payloads = st.fixed_dictionaries(
    {},
    optional={"user_id": ids, "agent_id": ids, "run_id": ids, "data": st.text(max_size=20)},
)


def test_a_user_erasure_covers_every_memory_and_scope_of_that_user_only():
    erased = ErasureSet([Erasure(now(), scope_digest(EntityIds(user_id="bob")), ())])
    assert erased.memory_erased("m1", {"user_id": "bob"})
    assert erased.memory_erased("m2", {"user_id": "bob", "agent_id": "a", "run_id": "r"})
    assert not erased.memory_erased("m3", {"user_id": "alice"})
    assert not erased.memory_erased("m4", {"agent_id": "a"})
    assert erased.scope_erased({"user_id": "bob", "agent_id": "a"})
    assert not erased.scope_erased({"agent_id": "a"})


def test_an_agent_only_erasure_never_reaches_a_users_memory():
    erased = ErasureSet([Erasure(now(), scope_digest(EntityIds(agent_id="a")), ())])
    assert erased.memory_erased("m1", {"agent_id": "a"})
    assert erased.memory_erased("m2", {"agent_id": "a", "run_id": "r"})
    assert not erased.memory_erased("m3", {"agent_id": "a", "user_id": "bob"})


def test_single_memories_are_erased_by_id_whatever_their_scope():
    erased = ErasureSet([Erasure(now(), None, ("m1",))])
    assert erased.memory_erased("m1", {"user_id": "anyone"})
    assert erased.memory_erased("m1")
    assert not erased.memory_erased("m2", {"user_id": "anyone"})
    assert not erased.scope_erased({"user_id": "anyone"})


@given(payloads)
def test_every_scope_containing_a_memory_contains_it(payload):
    for ids_ in scopes_containing(payload):
        assert EntityIds(**ids_).contains(payload)


@given(payloads, st.sampled_from(["user_id", "agent_id", "run_id"]), ids)
def test_a_scope_that_does_not_contain_a_memory_is_never_listed(payload, key, other):
    scope = {key: other}
    if EntityIds(**scope).contains(payload):
        assert scope in scopes_containing(payload)
    else:
        assert scope not in scopes_containing(payload)


@given(
    st.one_of(st.none(), st.builds(lambda u: scope_digest({"user_id": u}), ids)),
    st.lists(st.uuids().map(str), max_size=5),
)
def test_a_record_round_trips_through_its_line(digest, memories):
    if digest is None and not memories:
        return
    record = Erasure(now(), digest, tuple(memories))
    assert Erasure.parse(record.line()) == record


def test_a_scope_erasure_holds_no_id_in_clear():
    record = Erasure(now(), scope_digest(EntityIds(user_id="bob@example.com")), ())
    assert "bob" not in record.line()


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("not json", "not JSON"),
        ('{"at": "2026-12-01T10:00:00+00:00", "scope": null}', "exactly the keys"),
        ('{"at": 5, "scope": null, "memories": ["m"]}', ".at"),
        ('{"at": "yesterday", "scope": null, "memories": ["m"]}', ".at"),
        ('{"at": "2026-12-01T10:00:00", "scope": null, "memories": ["m"]}', "time zone"),
        ('{"at": "2026-12-01T10:00:00+00:00", "scope": "bob", "memories": []}', ".scope"),
        ('{"at": "2026-12-01T10:00:00+00:00", "scope": null, "memories": "m"}', ".memories"),
        ('{"at": "2026-12-01T10:00:00+00:00", "scope": null, "memories": ["*"]}', "memories[0]"),
        ('{"at": "2026-12-01T10:00:00+00:00", "scope": null, "memories": []}', "erases nothing"),
    ],
)
def test_a_bad_line_is_refused_naming_the_field(line, named):
    with pytest.raises(LedgerError, match=named.replace("[", r"\[").replace("]", r"\]")):
        Erasure.parse(line, "ledger line 3")


@given(st.text(max_size=200))
def test_any_text_either_parses_or_is_refused_with_a_ledger_error(text):
    try:
        record = Erasure.parse(text)
    except LedgerError:
        return
    assert json.loads(record.line())["at"] == record.at


# --- where the ledger is kept (service/state/erasure_ledger.py) -----------------------------


def test_the_local_ledger_keeps_records_in_order_across_reopening(tmp_path):
    from memorystore.service.state.erasure_ledger import LocalLedger

    first = Erasure(now(), scope_digest(EntityIds(user_id="bob")), ("m1", "m2"))
    second = Erasure(now(), None, ("m3",))
    ledger = LocalLedger(tmp_path / "erasures.db")
    ledger.record(first)
    ledger.record(second)
    ledger.close()
    reopened = LocalLedger(tmp_path / "erasures.db")
    assert reopened.entries() == [first, second]
    reopened.close()


def test_the_target_ledger_appends_and_ignores_only_a_torn_last_line(tmp_path):
    from memorystore.service.state.erasure_ledger import TargetLedger

    path = tmp_path / "backups" / "erasures.jsonl"
    ledger = TargetLedger(path)
    assert ledger.entries() == []
    records = [Erasure(now(), None, (f"m{i}",)) for i in range(3)]
    for record in records:
        ledger.append(record)
    assert ledger.entries() == records
    with path.open("a") as fh:
        fh.write('{"at": "2026-')  # a crash mid-append
    assert ledger.entries() == records
    path.write_text(path.read_text().replace('"m1"', '"*"'))
    with pytest.raises(LedgerError, match=r"erasures.jsonl line 2.memories\[0\]"):
        ledger.entries()


def test_the_target_ledger_never_follows_a_symlink(tmp_path):
    from memorystore.service.state.erasure_ledger import TargetLedger

    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    link = tmp_path / "erasures.jsonl"
    link.symlink_to(outside)
    with pytest.raises(OSError):
        TargetLedger(link).append(Erasure(now(), None, ("m1",)))
    with pytest.raises(OSError):
        TargetLedger(link).entries()
    assert outside.read_text() == ""
