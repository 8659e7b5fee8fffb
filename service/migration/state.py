"""An embedder migration as a state machine: which index serves reads, which take writes,
and what the service does next, as a pure function of what is stored and what is asked.

Why pure: the same decision is taken after a restart, by whichever PostgreSQL replica holds
the migration's claim, and by the property tests, so it must depend on nothing but its
arguments. The service persists the `State` with the store and acts on each `Step`.

An index is named by the identity of its embedder (provider, model, dimensions: what makes
vectors comparable). At most two exist: `live` serves every read and is always complete;
`other`, when set, takes every write too — the index being built (`BUILDING`), or the one
reads left and that a revert returns to (`SWITCHED`, until its grace period ends).

    STEADY   --ask for X-------------> BUILDING(X)    create X, back-fill it
    BUILDING --X complete------------> SWITCHED       reads move to X; the old kept (grace)
    BUILDING --ask for the live one--> STEADY         abort: the partial X dropped
    BUILDING --ask for Y-------------> BUILDING(Y)    X dropped, Y created
    SWITCHED --grace over------------> STEADY         the old index dropped
    SWITCHED --ask for the old one---> STEADY         revert: reads back at once, X dropped
    SWITCHED --ask for Y-------------> BUILDING(Y)    the old dropped early, Y created
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = ["Action", "Phase", "State", "Step", "decide"]


class Phase(StrEnum):
    STEADY = "Steady"
    BUILDING = "Building"
    SWITCHED = "Switched"


class Action(StrEnum):
    CREATE = "create"  # an empty index for the embedder (idempotent: resumes keep it)
    BACKFILL = "backfill"  # embed what the index lacks, from where it stopped
    DROP = "drop"  # delete the index and its progress


@dataclass(frozen=True)
class State:
    live: str
    phase: Phase = Phase.STEADY
    other: str | None = None
    since: float = 0.0  # when the phase began (seconds, the caller's clock)
    until: float | None = None  # SWITCHED: when the index reads left may be dropped

    def __post_init__(self) -> None:
        if (self.phase is Phase.STEADY) != (self.other is None):
            raise ValueError(f"{self.phase}: other index {self.other!r}")
        if self.other == self.live:
            raise ValueError(f"{self.phase}: {self.live!r} is both live and other")
        if (self.phase is Phase.SWITCHED) != (self.until is not None):
            raise ValueError(f"{self.phase}: grace until {self.until!r}")

    @property
    def writes(self) -> tuple[str, ...]:
        """Every index that exists: a write missed by one could not be read after a switch
        or a revert."""
        return (self.live,) if self.other is None else (self.live, self.other)

    @property
    def target(self) -> str | None:
        """The index being built, if any."""
        return self.other if self.phase is Phase.BUILDING else None


@dataclass(frozen=True)
class Step:
    state: State
    actions: tuple[tuple[Action, str], ...] = ()
    event: str | None = None  # a Kubernetes event reason, when the step is one to report


def decide(state: State, desired: str, now: float, grace: float, built: bool = False) -> Step:
    """The next state and what to do to reach it, given the embedder the config asks for and
    whether the index being built holds every memory (its counts and ids checked)."""
    if state.phase is Phase.STEADY:
        if desired == state.live:
            return Step(state)
        return _build(state.live, desired, now, "MigrationStarted")
    if state.phase is Phase.BUILDING:
        target = state.other
        assert target is not None
        if desired == state.live:
            return Step(State(state.live, since=now), ((Action.DROP, target),), "MigrationAborted")
        if desired != target:
            step = _build(state.live, desired, now, "MigrationRetargeted")
            return replace(step, actions=((Action.DROP, target), *step.actions))
        if not built:
            return Step(state, ((Action.BACKFILL, target),))
        switched = State(target, Phase.SWITCHED, state.live, now, now + grace)
        if grace <= 0:
            return decide(switched, desired, now, grace)
        return Step(switched, (), "MigrationSwitched")
    previous = state.other
    assert previous is not None and state.until is not None
    if desired == previous:
        reverted = State(previous, since=now)
        return Step(reverted, ((Action.DROP, state.live),), "MigrationReverted")
    if desired != state.live:
        step = _build(state.live, desired, now, "MigrationStarted")
        return replace(step, actions=((Action.DROP, previous), *step.actions))
    if now < state.until:
        return Step(state)
    return Step(State(state.live, since=now), ((Action.DROP, previous),), "MigrationFinished")


def _build(live: str, target: str, now: float, event: str) -> Step:
    state = State(live, Phase.BUILDING, target, now)
    return Step(state, ((Action.CREATE, target), (Action.BACKFILL, target)), event)
