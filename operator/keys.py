"""Rotation of a store's service key: the pure decision, so every case is unit-tested.

The key agents send lives in the mutable Secret `<store>-service-key`: `api-key` is the
current key and, for a grace period after a rotation, `previous-api-key` the one before it.
The service accepts both, so agents whose mounted client Secret has not been refreshed yet
keep working; once the deadline passes the previous key is removed and refused. Annotations
on the Secret record the key generation (the `spec.serviceKey.rotation` it was made for)
and the deadline, so the decision needs nothing but the Secret, the spec and the clock.

No I/O and no randomness here: the apply layer reads the Secret, passes a key generator,
and writes the result only when the decision changed something.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from memorystore.operator import names
from memorystore.spec import ServiceKeySpec, ServiceKeyStatus

RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class ServiceKeyState:
    """The keys the service accepts and the bookkeeping the Secret's annotations hold."""

    current: str
    previous: str | None
    generation: int  # -1: the annotation was missing or damaged (repaired by a rotation)
    previous_valid_until: dt.datetime | None  # UTC; None with no previous key

    def __repr__(self) -> str:  # never print a key (logs, tracebacks, test output)
        return (
            f"ServiceKeyState(generation={self.generation}, previous={self.previous is not None}"
            f", previous_valid_until={format_time(self.previous_valid_until)})"
        )

    def status(self) -> ServiceKeyStatus:
        return ServiceKeyStatus(
            generation=self.generation,
            previous_key_valid_until=format_time(self.previous_valid_until),
        )


class Change(StrEnum):
    SEEDED = "Seeded"  # first time: the key generated with the store, so agents keep working
    RECREATED = "Recreated"  # the Secret was lost after seeding: a fresh key, never the seed
    EXPIRED = "Expired"  # the grace period is over: the previous key is removed
    ROTATED = "Rotated"  # spec.serviceKey.rotation grew: a new current key


@dataclass(frozen=True)
class Decision:
    state: ServiceKeyState
    changes: tuple[Change, ...]

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def format_time(value: dt.datetime | None) -> str | None:
    return value.astimezone(dt.UTC).strftime(RFC3339) if value is not None else None


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        return dt.datetime.strptime(value, RFC3339).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def decode_key(value: str | None) -> str | None:
    """A key from a Secret's base64 `data` value; None when absent, empty or not decodable."""
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True).decode().strip() or None
    except (binascii.Error, UnicodeDecodeError):
        return None


def read_state(
    data: Mapping[str, str] | None, annotations: Mapping[str, str] | None
) -> ServiceKeyState | None:
    """The state a stored Secret holds (its `data` base64, as the API returns it).

    None when it has no usable current key: the decision then treats the Secret as lost.
    A previous key without a readable deadline counts as expired (refused at once, the safe
    side); a damaged generation is -1, which the next decision repairs by rotating."""
    data = data or {}
    annotations = annotations or {}
    current = decode_key(data.get(names.CURRENT_SERVICE_KEY))
    if current is None:
        return None
    previous = decode_key(data.get(names.PREVIOUS_SERVICE_KEY))
    raw_generation = annotations.get(names.SERVICE_KEY_GENERATION_ANNOTATION, "")
    generation = int(raw_generation) if raw_generation.isdigit() else -1
    deadline = parse_time(annotations.get(names.PREVIOUS_KEY_VALID_UNTIL_ANNOTATION))
    return ServiceKeyState(
        current=current,
        previous=previous,
        generation=generation,
        previous_valid_until=deadline if previous is not None else None,
    )


def decide(
    stored: ServiceKeyState | None,
    *,
    seed: str,
    known_generation: int | None,
    in_use: str | None,
    spec: ServiceKeySpec,
    now: dt.datetime,
    new_key: Callable[[], str],
) -> Decision:
    """The next state of a store's service key.

    `stored`: what the Secret holds (None: no Secret, or no usable key in it).
    `seed`: the service key of the `<store>-keys` Secret, which agents use until the first
    rotation. `known_generation`: status.serviceKey.generation, None if never reported —
    only then is a missing Secret seeded from `seed`. Later, re-seeding could revive a key
    that was rotated away (say, after a leak), so a lost Secret is recreated from `in_use`,
    the key the client Secret gives agents (always the current one), or a fresh key.
    """
    now = now.astimezone(dt.UTC).replace(microsecond=0)
    changes: list[Change] = []
    if stored is not None:
        state = stored
    elif known_generation is None:
        state = ServiceKeyState(seed, None, 0, None)
        changes.append(Change.SEEDED)
    else:
        generation = max(known_generation, 0)
        state = ServiceKeyState(in_use or new_key(), None, generation, None)
        changes.append(Change.RECREATED)

    if state.previous is not None and (
        state.previous_valid_until is None or now >= state.previous_valid_until
    ):
        state = replace(state, previous=None, previous_valid_until=None)
        changes.append(Change.EXPIRED)

    if spec.rotation > state.generation:
        state = ServiceKeyState(
            current=new_key(),
            previous=state.current,
            generation=spec.rotation,
            previous_valid_until=now + dt.timedelta(seconds=spec.grace_period_seconds),
        )
        changes.append(Change.ROTATED)
    return Decision(state, tuple(changes))


def describe(store: str, decision: Decision) -> list[str]:
    """One log line / Event message per change: generation and deadline, never a key."""
    state = decision.state
    lines = []
    for change in decision.changes:
        if change is Change.SEEDED:
            lines.append(f"service key of {store}: generation 0 (the key created with the store)")
        elif change is Change.RECREATED:
            lines.append(
                f"service key of {store}: its Secret was missing or damaged; recreated at "
                f"generation {state.generation} with the key agents were given (or a new one)"
            )
        elif change is Change.EXPIRED:
            lines.append(
                f"service key of {store}: the grace period ended; the previous key is refused"
            )
        elif change is Change.ROTATED:
            lines.append(
                f"service key of {store}: rotated to generation {state.generation}; the previous "
                f"key is accepted until {format_time(state.previous_valid_until)}"
            )
    return lines
