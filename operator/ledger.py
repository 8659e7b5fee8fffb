"""Which children are already as desired, so a resync of an unchanged store writes nothing.

The ledger remembers, per child, a digest of what this process last applied and the
fingerprint the API server answered with; the children watch (`watch.py`) tells it what the
server holds now. A child is current when both agree: the same desired object was applied
and nobody changed the child since. Anything else — a new desired object, a hand edit, a
deletion, a restart of the operator (empty ledger), a watch that had to start over — makes
the next reconcile apply it again.

Pure data: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

Key = tuple[str, str, str]  # (kind, namespace, name)


def child_key(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta["namespace"], meta["name"]


def digest(obj: Mapping[str, Any]) -> str:
    """Of a desired object (the builders make the same dict for the same spec)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def fingerprint(meta: Mapping[str, Any]) -> str:
    """What changes when anyone changes what the operator sets on a child.

    Kinds with a `generation` (workloads, policies) bump it on every spec change but not on
    status updates, so a rolling Deployment's status does not count as drift; their labels
    are added since a label edit leaves the generation alone. Kinds without one (ConfigMaps,
    Services, claims) change their resourceVersion on every write."""
    generation = meta.get("generation")
    if generation:
        labels = json.dumps(meta.get("labels") or {}, sort_keys=True)
        return f"generation {generation} labels {hashlib.sha256(labels.encode()).hexdigest()}"
    return f"resourceVersion {meta.get('resourceVersion')}"


class Ledger:
    def __init__(self) -> None:
        self._applied: dict[Key, tuple[str, str]] = {}  # key -> (digest, fingerprint)
        self._seen: dict[Key, str] = {}  # key -> fingerprint the server last showed
        # Kinds whose `_seen` the watch keeps up to date; the others are read before use.
        self.watched: set[str] = set()

    def saw(self, key: Key, fp: str | None) -> None:
        """The server holds `fp` for `key` now (None: the child does not exist)."""
        if fp is None:
            self._seen.pop(key, None)
            self._applied.pop(key, None)  # bounded by the children that exist
        else:
            self._seen[key] = fp

    def forget(self, kind: str) -> None:
        """The watch of `kind` starts over: what it told us may be stale."""
        for key in [k for k in self._seen if k[0] == kind]:
            del self._seen[key]

    def applied(self, key: Key, desired: str, fp: str) -> None:
        """This process applied the object with digest `desired`; the server answered `fp`."""
        self._applied[key] = (desired, fp)
        self._seen[key] = fp

    def current(self, key: Key, desired: str) -> bool:
        """True when applying the object with digest `desired` would change nothing."""
        applied = self._applied.get(key)
        return applied is not None and applied[0] == desired and self._seen.get(key) == applied[1]

    def ours(self, key: Key, fp: str) -> bool:
        """`fp` is what this process's own last apply of `key` produced (the watch's echo)."""
        applied = self._applied.get(key)
        return applied is not None and applied[1] == fp

    def __len__(self) -> int:
        return len(self._seen)
