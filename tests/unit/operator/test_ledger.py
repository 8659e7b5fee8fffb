"""The ledger (which children are already as desired) and the children watch's event rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memorystore.operator import ledger, watch

KEY = ("ConfigMap", "tenant", "acme-memory")


def test_a_child_is_current_only_after_its_desired_object_was_applied_and_left_alone():
    book = ledger.Ledger()
    assert not book.current(KEY, "d1")  # never applied (e.g. after a restart)
    book.applied(KEY, "d1", "rv 1")
    assert book.current(KEY, "d1")
    assert not book.current(KEY, "d2")  # the spec changed what is desired
    book.saw(KEY, "rv 2")  # someone else wrote it
    assert not book.current(KEY, "d1")
    book.applied(KEY, "d1", "rv 3")
    book.saw(KEY, None)  # deleted
    assert not book.current(KEY, "d1")
    assert len(book) == 0


def test_a_restarted_watch_makes_its_kind_stale():
    book = ledger.Ledger()
    book.applied(KEY, "d1", "rv 1")
    other = ("Service", "tenant", "acme-memory")
    book.applied(other, "d2", "rv 5")
    book.forget("ConfigMap")
    assert not book.current(KEY, "d1")
    assert book.current(other, "d2")


def test_fingerprints_ignore_status_but_not_spec_or_labels():
    deploy = {"generation": 3, "labels": {"a": "1"}, "resourceVersion": "100"}
    status_update = {**deploy, "resourceVersion": "101"}
    assert ledger.fingerprint(deploy) == ledger.fingerprint(status_update)
    assert ledger.fingerprint(deploy) != ledger.fingerprint({**deploy, "generation": 4})
    assert ledger.fingerprint(deploy) != ledger.fingerprint({**deploy, "labels": {"a": "2"}})
    config = {"resourceVersion": "7", "labels": {}}  # no generation: every write counts
    assert ledger.fingerprint(config) != ledger.fingerprint({**config, "resourceVersion": "8"})


def test_digest_is_of_content_not_key_order():
    assert ledger.digest({"a": 1, "b": [1, 2]}) == ledger.digest({"b": [1, 2], "a": 1})
    assert ledger.digest({"a": 1}) != ledger.digest({"a": 2})


# A model of what the API server holds and what the operator did, against which the ledger
# must never claim "current" wrongly: `current` implies the server holds exactly what this
# process last applied, for the same desired object.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("apply"), st.sampled_from(["d1", "d2"])),
        st.tuples(st.just("edit"), st.none()),
        st.tuples(st.just("delete"), st.none()),
        st.tuples(st.just("forget"), st.none()),
        st.tuples(st.just("echo"), st.none()),
    ),
    max_size=30,
)


@given(steps, st.sampled_from(["d1", "d2"]))
def test_the_ledger_never_calls_a_drifted_child_current(ops, desired):
    book = ledger.Ledger()
    server: tuple[str, str] | None = None  # (content digest, fingerprint) the server holds
    for version, (op, arg) in enumerate(ops, start=1):
        if op == "apply":
            assert arg is not None
            server = (arg, f"rv {version}")
            book.applied(KEY, arg, server[1])
        elif op == "edit" and server is not None:
            server = ("hand-edited", f"rv {version}")
            book.saw(KEY, server[1])
        elif op == "delete":
            server = None
            book.saw(KEY, None)
        elif op == "forget":
            book.forget(KEY[0])
        elif op == "echo" and server is not None:
            book.saw(KEY, server[1])  # the watch repeats what the server holds
    if book.current(KEY, desired):
        assert server == (desired, server[1] if server else None)


def _deployment(generation: int, ready: int, rv: str = "1") -> dict:
    return {
        "kind": "Deployment",
        "metadata": {
            "namespace": "tenant",
            "name": "acme-memory",
            "generation": generation,
            "resourceVersion": rv,
            "labels": {"memorystore.dev/store": "acme"},
        },
        "status": {"observedGeneration": generation, "readyReplicas": ready, "replicas": 1},
    }


def test_events_schedule_the_store_on_drift_status_moves_and_deletion_not_on_echoes():
    book = ledger.Ledger()
    asked: list[tuple[str, str]] = []
    events = watch.ChildEvents(book, lambda ns, store: asked.append((ns, store)))
    first = _deployment(1, 0)
    key = ("Deployment", "tenant", "acme-memory")
    book.applied(key, "d", ledger.fingerprint(first["metadata"]))
    events.handle("ADDED", first)  # the echo of our own apply, first sight of its status
    assert asked == [("tenant", "acme")]
    asked.clear()
    events.handle("MODIFIED", _deployment(1, 0, rv="2"))  # nothing it cares about moved
    assert asked == []
    assert book.current(key, "d")
    events.handle("MODIFIED", _deployment(1, 1, rv="3"))  # a pod became ready: status
    assert asked == [("tenant", "acme")]
    assert book.current(key, "d")  # status is not drift
    asked.clear()
    events.handle("MODIFIED", _deployment(2, 1, rv="4"))  # someone edited its spec
    assert asked == [("tenant", "acme")]
    assert not book.current(key, "d")
    asked.clear()
    events.handle("DELETED", _deployment(2, 1, rv="5"))
    assert asked == [("tenant", "acme")]
    assert len(book) == 0


def test_a_foreign_config_map_edit_is_drift_and_its_echo_is_not():
    book = ledger.Ledger()
    asked: list[tuple[str, str]] = []
    events = watch.ChildEvents(book, lambda ns, store: asked.append((ns, store)))
    cm = {
        "kind": "ConfigMap",
        "metadata": {
            "namespace": "t",
            "name": "acme-memory",
            "resourceVersion": "9",
            "labels": {"memorystore.dev/store": "acme"},
        },
    }
    book.applied(("ConfigMap", "t", "acme-memory"), "d", ledger.fingerprint(cm["metadata"]))
    events.handle("ADDED", cm)
    assert asked == []
    events.handle("MODIFIED", {**cm, "metadata": {**cm["metadata"], "resourceVersion": "10"}})
    assert asked == [("t", "acme")]
