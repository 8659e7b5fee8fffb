"""An embedder migration carried out in the running service: the indexes opened at start-up as
the record says, then the steps `state.decide` gives, each recorded before it is acted on.

    BUILDING  the new index is created and written with every write; the back-fill copies
              every memory it lacks, a page at a time (embedded ahead of the scope locks,
              copied under them, so a concurrent update is never overwritten), and goes on
              from what the index holds after a restart or a kill: the work left is a set
              difference of ids, so a back-fill is resumable by construction.
    switch    with every write paused: the ids of both indexes compared (equal, or another
              pass), the record written, reads routed to the new index in one assignment.
    SWITCHED  the old index is kept and written for `gracePeriodSeconds`: setting the old
              embedder back routes reads to it at once; then it is dropped.

A drop is recorded before the index is deleted (`pending_drops`) and finished at the next
start if the process dies in between, so no index is left behind or claimed after deletion.

The configured embedder is the one asked for: a change of `embedder` in the config (the
operator renders it from `spec.embedder`, and a changed config restarts the pod) starts,
retargets, aborts or reverts a migration.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from memorystore.config import ServiceConfig
from memorystore.service.migration import record as records
from memorystore.service.migration.indexes import Index, RoutedEmbedder, RoutedStore
from memorystore.service.migration.state import Action, Phase, State, decide

if TYPE_CHECKING:
    from mem0 import AsyncMemory
    from mem0.configs.base import MemoryConfig

    from memorystore.service.engine.core import MemoryEngine

__all__ = ["EmbedderMigration", "Progress", "migrate"]

log = logging.getLogger("memorystore.service.migration")
T = TypeVar("T")

DRAIN_SECONDS = 1.0
RECENT_EVENTS = 5  # events /readyz lists (the operator posts each it has not seen)
FOLLOW_S = 1.0  # how often a replica reads a shared record
LEAD_S = 5.0  # how often a replica offers to carry a pending migration out
LEAD_LOCK = "embedder-migration"
ACK_WINDOW_S = 30.0  # a replica not heard of for this long is not waited for
ACK_TIMEOUT_S = 60.0  # between routing reads away from an index and deleting it
BACKFILL_PASSES = 5  # passes before a back-fill that never catches up waits for the next run


@dataclass
class Progress:
    """What status shows of the index being built."""

    target: str
    total: int = 0  # memories in the live index when the pass started
    done: int = 0  # of them, in the new index
    started: float = field(default_factory=time.monotonic)
    copied: int = 0  # by this process (the rate's numerator)

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.copied / elapsed if elapsed > 0 else 0.0

    def eta_seconds(self) -> float | None:
        rate = self.rate()
        return (self.total - self.done) / rate if rate > 0 else None


class EmbedderMigration:
    """The store's indexes and the migration between them, for one engine."""

    def __init__(
        self,
        cfg: ServiceConfig,
        build: Callable[[ServiceConfig], MemoryConfig],
        store_records: records.Records | None = None,
    ) -> None:
        self.cfg = cfg
        self._build = build  # mem0's config of a service config (mem0_config, with its DB)
        self.records = store_records or records.FileRecords(
            cfg.path_in_data_dir(None, records.RECORD_FILE)
        )
        # a shared record is read once the database answers (`open_shared`); until then
        # the configured embedder stands in and nothing is routed
        self.record = records.MigrationRecord.new(cfg.embedder)
        self.loaded = False
        if not self.records.shared:
            self._load()
        self.desired = cfg.embedder.index_name()
        self.settings = cfg.embedder.migration
        self.events: list[tuple[float, str, str]] = []  # (time, reason, message)
        self.progress: Progress | None = None
        self.switch_pause_s: float | None = None  # writes paused for the last switch
        self.store: RoutedStore | None = None
        self.memory: AsyncMemory | None = None
        self.running = False
        self.replica = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.started = time.time()

    def _load(self) -> None:
        self.record = self.records.create_if_absent(self.record)
        self.loaded = True

    def open_shared(self, memory: AsyncMemory, version_of: Callable[[str], str]) -> None:
        """Read the shared record and route `memory` by it (the engine's prepare, once the
        database answers); again is a no-op."""
        if self.store is not None:
            return
        self._load()
        assert self.records.shared
        self.records.ask(self.desired, self.started)
        self.record = self.records.load() or self.record
        live = self.record.state.live
        self.attach(memory, version_of, reuse_live=self.config_for(live) == self.cfg)

    # --- opening --------------------------------------------------------------------------

    def config_for(self, name: str) -> ServiceConfig:
        """The service config as the index `name` was made: its embedder, its collection."""
        if name == self.desired:
            embedder = self.cfg.embedder
        else:
            embedder = self.cfg.embedder.model_copy(
                update={
                    "model": None,
                    "base_url": None,
                    "dimensions": None,
                    "runtime": None,
                    **self._known(name).settings().model_dump(exclude_unset=True),
                }
            )
        vector_store = self.cfg.vector_store.model_copy(
            update={"collection": self.collection(name)}
        )
        return self.cfg.model_copy(update={"embedder": embedder, "vector_store": vector_store})

    def collection(self, name: str) -> str:
        return records.collection_of(self.cfg.vector_store.collection, self.record.origin, name)

    def _known(self, name: str) -> records.IndexRecord:
        index = self.record.indexes.get(name) or self.record.pending_drops.get(name)
        if index is None:
            raise ValueError(f"the migration record names no embedder for index {name!r}")
        return index

    def live_config(self) -> MemoryConfig:
        """mem0's config for the live index (what AsyncMemory is built from)."""
        return self._build(self.config_for(self.record.state.live))

    def attach(
        self, memory: AsyncMemory, version_of: Callable[[str], str], reuse_live: bool = True
    ) -> RoutedStore:
        """Route `memory`'s store and embedder through the indexes the record names (the
        live one is the store mem0 built, with `reuse_live`; the others are opened here)."""
        from memorystore.service.engine import mem0_seam

        state = self.record.state
        self._version_of = version_of
        if reuse_live:
            live = Index(
                state.live,
                self._known(state.live).settings(),
                memory.vector_store,
                memory.embedding_model,
                version_of(state.live),
            )
        else:
            live = self._open(state.live, version_of)
            mem0_seam.use_entity_index(memory, self._build(self.config_for(state.live)))
        indexes = {state.live: live}
        if state.other is not None:
            indexes[state.other] = self._open(state.other, version_of)
        store = RoutedStore(indexes, state, self.cfg.retrieval)
        mem0_seam.use_index(memory, store, RoutedEmbedder(store))
        self.store, self.memory = store, memory
        return store

    def _open(self, name: str, version_of: Callable[[str], str]) -> Index:
        from memorystore.service.engine import mem0_seam

        store, embedder = mem0_seam.build_index(self._build(self.config_for(name)))
        return Index(name, self._known(name).settings(), store, embedder, version_of(name))

    def finish_drops(self) -> None:
        """Delete the indexes whose drop was recorded but not done (a crash in between)."""
        from memorystore.service.engine import mem0_seam

        for name in list(self.record.pending_drops):
            store, _ = mem0_seam.build_index(self._build(self.config_for(name)))
            store.delete_col()
            del self.record.pending_drops[name]
            self.records.save(self.record)
            log.info("embedder migration: the %s index is dropped", name)

    # --- running --------------------------------------------------------------------------

    def pending(self) -> bool:
        """Whether there is anything to do (a migration, a grace period, a drop)."""
        if not self.loaded:
            return False
        state = self.record.state
        return (
            bool(self.record.pending_drops)
            or state.phase is not Phase.STEADY
            or (state.live != self.wanted)
        )

    @property
    def wanted(self) -> str:
        """The index asked for: this config's, or with a shared record the newest replica's."""
        return self.record.asked or self.desired

    async def run(self, engine: MemoryEngine) -> None:
        """Carry the migration through to the end (steady on the configured embedder)."""
        if self.running:
            return
        self.running = True
        try:
            await asyncio.to_thread(self.finish_drops)
            built = False
            while True:
                state = self.record.state
                grace = float(self.settings.grace_period_seconds)
                step = decide(state, self.wanted, time.time(), grace, built)
                if step.state == state and not step.actions:
                    if state.phase is Phase.STEADY:
                        return
                    assert state.until is not None  # SWITCHED: wait out the grace period
                    await asyncio.sleep(max(0.05, min(state.until - time.time(), 60.0)))
                    continue
                built = await self._act(engine, state, step.state, step.actions, step.event)
        finally:
            self.running = False

    async def _act(
        self,
        engine: MemoryEngine,
        before: State,
        after: State,
        actions: tuple[tuple[Action, str], ...],
        event: str | None,
    ) -> bool:
        """Record the new state, then carry out its actions; True when a back-fill left the
        index complete (the next decision switches)."""
        assert self.store is not None
        built = False
        drops = [name for action, name in actions if action is Action.DROP]
        created = [name for action, name in actions if action is Action.CREATE]
        if after != before:
            switched = after.live != before.live
            paused = time.perf_counter()
            async with engine.writes_paused():
                if switched and before.phase is Phase.BUILDING:
                    target = self.store.indexes[after.live]
                    missing, extra, _ = await asyncio.to_thread(self._difference, target)
                    if missing or extra:  # a write missed it since the back-fill: go on
                        return False
                record = copy.deepcopy(self.record)
                for name in created:
                    record.indexes[name] = records.IndexRecord(
                        records.kept_settings(self.cfg.embedder)
                    )
                for name in drops:
                    record.pending_drops[name] = record.indexes.pop(name)
                record.state = after
                # Once its save has begun, a step is carried through even if the migration
                # is cancelled meanwhile: what the service routes by is what it recorded.
                dropped = await _through(self._commit(record, created, drops, switched))
            if switched:  # what a writer waited at most (bench migrate reports it)
                self.switch_pause_s = time.perf_counter() - paused
            if dropped:  # reads that embedded for it a moment ago finish first
                await asyncio.sleep(DRAIN_SECONDS)
            await self._wait_for_replicas(after)  # none writes to a dropped index, or
            # writes only to the live one while the new index is back-filled
            for index in dropped:
                await asyncio.to_thread(index.store.delete_col)
                self.record.pending_drops.pop(index.name, None)
                await asyncio.to_thread(self.records.save, self.record)
                log.info("embedder migration: the %s index is dropped", index.name)
            if event is not None:  # after the drops: a Finished store has one index
                self._report(event, before, after)
        for action, name in actions:
            if action is Action.BACKFILL:
                built = await self._backfill(engine, name)
        return built

    async def _commit(
        self, record: records.MigrationRecord, created: list[str], drops: list[str], switched: bool
    ) -> list[Index]:
        """Save the step's record, then route by it; the indexes it leaves, to be dropped."""
        from memorystore.service.engine import mem0_seam

        assert self.store is not None and self.memory is not None
        await asyncio.to_thread(self.records.save, record)
        self.record = record
        opened = self.store.indexes
        indexes = {n: i for n, i in opened.items() if n not in drops}
        for name in created:
            indexes[name] = await asyncio.to_thread(self._open, name, self._version_of)
        self.store.route(record.state, indexes)
        await self._acknowledge()
        if switched:
            mem0_seam.use_entity_index(self.memory, self._build(self.config_for(record.state.live)))
        return [opened[n] for n in drops if n in opened]

    def _paused(self) -> str:
        pause = self.switch_pause_s
        return "" if pause is None else f" (writes paused {1000 * pause:.0f} ms to switch)"

    def _report(self, reason: str, before: State, after: State) -> None:
        message = self._message(reason, before, after)
        self.events.append((time.time(), reason, message))
        del self.events[:-20]
        log.info("embedder migration: %s: %s", reason, message)

    def _message(self, reason: str, before: State, after: State) -> str:
        match reason:
            case "MigrationStarted":
                return f"building the {after.other} index beside {after.live}"
            case "MigrationRetargeted":
                return f"now building the {after.other} index"
            case "MigrationAborted":
                return f"the partial {before.other} index is dropped; {after.live} stays live"
            case "MigrationSwitched":
                return (
                    f"reads moved to the {after.live} index; {after.other} kept until the "
                    f"grace period ends{self._paused()}"
                )
            case "MigrationReverted":
                return f"reads moved back to the {after.live} index"
            case "MigrationFinished":
                # the index left: `other` after a grace period; with none, the old live one
                (left,) = set(before.writes) - set(after.writes)
                switched = before.phase is Phase.BUILDING
                return f"the {left} index is dropped" + (self._paused() if switched else "")
        return reason

    # --- the back-fill --------------------------------------------------------------------

    async def _backfill(self, engine: MemoryEngine, name: str) -> bool:
        """Copy into `name` every memory it lacks; True when its ids equal the live
        index's (checked with every write paused, the moment reads may switch)."""
        assert self.store is not None
        target = self.store.indexes[name]
        progress = self.progress
        if progress is None or progress.target != name:
            progress = self.progress = Progress(name)
        for _ in range(BACKFILL_PASSES):
            missing, extra, total = await asyncio.to_thread(self._difference, target)
            progress.total, progress.done = total, total - len(missing)
            self._record_progress(name, progress)
            if not missing and not extra:
                return True  # checked again with every write paused, at the switch
            for memory_id in extra:
                await self._take_out(engine, target, memory_id)
            await self._copy_all(engine, target, missing, progress)
        return False

    def _difference(self, target: Index) -> tuple[list[str], list[str], int]:
        """(in live, not in target), (in target, not in live), how many are live."""
        assert self.store is not None
        live = set(self.store.live().store.ids())
        built = set(target.store.ids())
        return sorted(live - built), sorted(built - live), len(live)

    async def _copy_all(
        self, engine: MemoryEngine, target: Index, missing: list[str], progress: Progress
    ) -> None:
        batch = self.settings.batch
        limit = self.settings.max_per_second
        for start in range(0, len(missing), batch):
            began = time.monotonic()
            page = missing[start : start + batch]
            try:
                copied = await self._copy_page(engine, target, page)
            except Exception as exc:
                self.record.errors += len(page)
                self.record.last_error = f"memories from {page[0]}: {type(exc).__name__}"
                log.exception("embedder migration: a page of %d memories failed", len(page))
                continue
            progress.copied += copied
            progress.done += copied
            self._record_progress(target.name, progress)
            if limit is not None:
                await asyncio.sleep(max(0.0, len(page) / limit - (time.monotonic() - began)))

    async def _copy_page(self, engine: MemoryEngine, target: Index, ids: list[str]) -> int:
        """Copy these memories as the live index holds them: embedded ahead of the locks,
        written in one operation under every scope lock of the page (a concurrent update
        waits for it, or was written to both indexes before it)."""
        assert self.store is not None
        routed, live = self.store, self.store.live().store

        def read() -> tuple[dict[str, dict[str, Any]], dict[str, list[float]]]:
            found = {}
            for memory_id in ids:
                record = live.get(memory_id)
                if record is not None:
                    found[memory_id] = dict(record.payload or {})
            unique = list(dict.fromkeys(routed.dense_text(p) for p in found.values()))
            made = target.vectors(unique) if unique else []
            return found, dict(zip(unique, made, strict=True))

        payloads, vectors = await asyncio.to_thread(read)
        if not payloads:
            return 0
        async with engine.locks_for(list(payloads.values())):

            def copy() -> int:
                copied, batch_vectors, batch_payloads = [], [], []
                for memory_id in payloads:
                    current = live.get(memory_id)
                    if current is None or target.store.get(memory_id) is not None:
                        continue  # deleted, or written to both meanwhile
                    payload = dict(current.payload or {})
                    text = routed.dense_text(payload)
                    vector = vectors.get(text) or target.vectors([text])[0]  # changed since
                    copied.append(memory_id)
                    batch_vectors.append(vector)
                    batch_payloads.append(payload)
                if copied:
                    stamped = routed.stamped(target, batch_payloads)
                    target.store.insert(batch_vectors, stamped, copied)
                return len(copied)

            return await asyncio.to_thread(copy)

    async def _take_out(self, engine: MemoryEngine, target: Index, memory_id: str) -> None:
        """A memory the new index has and the live one not (a delete that reached only the
        live index before a crash): deleted from the new one."""
        record = await asyncio.to_thread(target.store.get, memory_id)
        if record is None:
            return
        async with engine.lock_for(dict(record.payload or {})):
            assert self.store is not None
            if await asyncio.to_thread(self.store.live().store.get, memory_id) is None:
                await asyncio.to_thread(target.store.delete, memory_id)

    def _record_progress(self, name: str, progress: Progress) -> None:
        index = self.record.indexes.get(name)
        if index is not None:
            index.done, index.total = progress.done, progress.total
            self.records.save(self.record)

    # --- replicas sharing the record (PostgreSQL) ----------------------------------------

    async def _acknowledge(self) -> None:
        """Say which state this replica routes by (a shared record's other readers wait)."""
        if self.records.shared and self.store is not None:
            state = self.store.state
            await _through(asyncio.to_thread(self.records.acknowledge, self.replica, state))

    async def _wait_for_replicas(self, state: State) -> None:
        """Until every replica seen lately routes by `state` (or ACK_TIMEOUT_S: a replica
        that stopped answering is no longer seen after ACK_WINDOW_S)."""
        if not self.records.shared:
            return
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while True:
            lagging = await asyncio.to_thread(self.records.lagging, state, ACK_WINDOW_S)
            if not lagging:
                return
            if time.monotonic() > deadline:
                log.warning("embedder migration: replicas %s did not follow; going on", lagging)
                return
            await asyncio.sleep(0.2)

    async def follow(self, every: float = FOLLOW_S) -> None:
        """On every replica of a shared record: route by the state the replica carrying the
        migration out records, and acknowledge it (forever; its task is cancelled at
        shutdown)."""
        while True:
            try:
                if not self.running:
                    found = await asyncio.to_thread(self.records.load)
                    if found is not None and self.store is not None:
                        if found.state != self.store.state:
                            await self._apply(found)
                        self.record = found
                await self._acknowledge()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("embedder migration: the record could not be followed")
            await asyncio.sleep(every)

    async def _apply(self, found: records.MigrationRecord) -> None:
        """Route by another replica's state: its indexes opened, the ones it left closed."""
        from memorystore.service.engine import mem0_seam

        assert self.store is not None and self.memory is not None
        before = self.store.state
        opened = self.store.indexes
        self.record = found
        indexes: dict[str, Index] = {}
        for name in found.state.writes:
            index = opened.get(name)
            if index is None:
                index = await asyncio.to_thread(self._open, name, self._version_of)
            indexes[name] = index
        self.store.route(found.state, indexes)
        if found.state.live != before.live:
            mem0_seam.use_entity_index(self.memory, self._build(self.config_for(found.state.live)))
        for name, index in opened.items():
            if name not in indexes:
                await asyncio.to_thread(index.store.close)
        log.info("embedder migration: following %s", found.state)

    async def lead(self, engine: MemoryEngine, database: Any) -> None:
        """On every replica of a shared record: carry the migration out whenever there is
        one and no other replica does (PostgreSQL's advisory lock says which), forever."""
        while True:
            try:
                if self.pending() and self.wanted == self.desired:  # never an older config
                    async with database.try_advisory(LEAD_LOCK) as held:
                        if held:
                            found = await asyncio.to_thread(self.records.load)
                            if found is not None and self.store is not None:
                                if found.state != self.store.state:
                                    await self._apply(found)
                                self.record = found
                            if self.wanted == self.desired:
                                await self.run(engine)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.record.last_error = f"{type(exc).__name__}: {exc}"[:300]
                log.exception("embedder migration stopped; another try in %.0f s", LEAD_S)
            await asyncio.sleep(LEAD_S)

    # --- what status shows ----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        state = self.record.state
        body: dict[str, Any] = {
            "phase": str(state.phase),
            "live": state.live,
            "desired": self.desired,
        }
        if state.other is not None:
            body["other"] = state.other
        if state.until is not None:
            body["oldIndexDroppedAt"] = state.until
        target = state.target
        if target is not None:
            index = self.record.indexes[target]
            body["done"], body["total"] = index.done, index.total
            progress = self.progress
            if progress is not None and progress.target == target:
                body["ratePerSecond"] = round(progress.rate(), 1)
                eta = progress.eta_seconds()
                if eta is not None:
                    body["etaSeconds"] = round(eta)
        if self.record.errors:
            body["errors"] = self.record.errors
            body["lastError"] = self.record.last_error
        if self.store is not None and self.store.write_errors:
            body["writeErrors"] = self.store.write_errors
        if self.events:
            recent = [
                {"reason": reason, "message": message, "time": when}
                for when, reason, message in self.events[-RECENT_EVENTS:]
            ]
            body["lastEvent"], body["events"] = recent[-1], recent
        return body


RETRY_SECONDS = 30.0


async def _through(step: Awaitable[T]) -> T:
    """Await `step` to its end even if cancelled meanwhile (then stop): a step once begun
    is never left half-done, nor its write to land after the caller has moved on."""
    work = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await work
        raise


async def migrate(migration: EmbedderMigration, engine: MemoryEngine) -> None:
    """Run the migration in the service, retrying after a failure (a provider that does not
    answer): what was copied stays copied, and reads stay on a complete index meanwhile.
    With a shared record, every replica follows it and offers to lead, for as long as the
    service runs."""
    if migration.records.shared:
        follower = asyncio.create_task(migration.follow())
        try:
            await migration.lead(engine, engine.database)
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
            # stopping (a rolling update): the one carrying a migration out no longer waits
            # for this replica to follow (it would, for up to ACK_WINDOW_S)
            try:
                await asyncio.to_thread(migration.records.forget, migration.replica)
            except Exception:
                log.warning("embedder migration: this replica's acknowledgement stays")
        return
    while True:
        try:
            await migration.run(engine)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            migration.record.last_error = f"{type(exc).__name__}: {exc}"[:300]
            log.exception("embedder migration stopped; retrying in %.0f s", RETRY_SECONDS)
            await asyncio.sleep(RETRY_SECONDS)
