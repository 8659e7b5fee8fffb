"""Session resources that belong to one scheduling group (tests/conftest.py): the simulated
control plane, the real node. A worker runs each group's tests together, and a group never
comes back to it, so what the group started is released as soon as the worker leaves it,
not at the end of the session: an idle control plane or kubelet would otherwise take CPU and
memory from every test the worker runs after the group.

`held(cm)` enters a context manager and registers its exit; `release()` runs every
registered exit (the conftest calls it after a group's last test); a second exit, at the
session's end, does nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

T = TypeVar("T")

_held: list[contextlib.ExitStack] = []


@contextlib.contextmanager
def held(cm: AbstractContextManager[T]) -> Iterator[T]:
    stack = contextlib.ExitStack()
    value = stack.enter_context(cm)
    _held.append(stack)
    try:
        yield value
    finally:
        if stack in _held:
            _held.remove(stack)
        stack.close()


def release() -> None:
    """Exit everything held, the last entered first; the first error is raised after all."""
    with contextlib.ExitStack() as all_of_them:
        while _held:
            all_of_them.push(_held.pop(0).__exit__)
