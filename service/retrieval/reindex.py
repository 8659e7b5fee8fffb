"""Re-indexing in place: when the index settings change, every memory is brought up to them.

What a memory is indexed with depends on `retrieval.tokenizer` (its keyword terms),
`retrieval.context` (what is embedded and keyword-indexed) and `retrieval.languageCentering`
(an offline embedder's vectors centred or raw). Each memory records the settings
it was indexed with in its payload (`index_version`, written in the same operation as its
vectors), so the work left is a filter ("not the current version"), which makes a re-index
resumable by construction: a process killed halfway leaves every memory either old or new,
and the next run picks up exactly the old ones. Memories written before the setting existed
have no version: they were keyword-indexed with the `word` tokenizer and embedded raw (no
language centring) as the store's context setting said.

Each memory is re-read and rewritten under its scope's write lock (the one updates and
deletes hold), so a concurrent update is never overwritten with the old payload. A page's
texts are embedded ahead, EMBED_BATCH per call and outside the locks (one call per text
held each memory's lock for an embedding); under the lock a vector made ahead is used only
if the text to embed is still the one it was made from, else the memory is embedded
alone. The store
stays searchable throughout: a memory not yet re-indexed still has its old vectors.
Embedder threads change how fast a vector is computed, not what it is (at most its last
bits of rounding), so they are not an index setting; a different embedder model or dimension
is refused at start-up (a new store is needed, see docs/operations/changing-tiers.md).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from memorystore.service.retrieval.indexing import stored_index_texts
from memorystore.spec import RetrievalSettings

INDEX_KEY = "index_version"
PAGE = 256
EMBED_BATCH = 64  # texts embedded per call ahead of the locks (as imports do)
log = logging.getLogger("memorystore.service.retrieval.reindex")


def index_version(settings: RetrievalSettings, centred: bool | None = None) -> str:
    """What a memory indexed now is indexed with, e.g. `multilingual/context/centred`: the
    keyword tokenizer, then what shapes the dense vector."""
    centred = settings.language_centering if centred is None else centred
    context = "context" if settings.context else "plain"
    return f"{settings.tokenizer}/{context}/{'centred' if centred else 'raw'}"


def legacy_version(settings: RetrievalSettings) -> str:
    """A memory without a version: `word` terms, embedded raw with the store's context."""
    return index_version(settings.model_copy(update={"tokenizer": "word"}), centred=False)


def _dense_part(version: str) -> str:
    return version.partition("/")[2]


@dataclass
class Progress:
    total: int  # memories in the store when the run started
    pending: int  # memories not yet at the current version when the run started
    done: int = 0
    re_embedded: int = 0
    failed: int = 0
    finished: bool = False
    started: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """What `/readyz` shows: the counts, not the clock."""
        return {k: v for k, v in asdict(self).items() if k != "started"}


class Reindexer:
    """Brings every memory of one engine's store to the current index version."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.settings: RetrievalSettings = engine.cfg.retrieval
        self.version: str = engine.index_version
        self.progress: Progress | None = None
        self.running = False  # one run at a time: the start-up's, or one asked for

    @property
    def store(self) -> Any:
        return self.engine.store

    def counts(self) -> tuple[int, int] | None:
        """(done, pending) of the current or last run; None before the first (metrics)."""
        progress = self.progress
        return None if progress is None else (progress.done, progress.pending)

    def stale_filter(self) -> dict[str, Any]:
        return {"NOT": [{INDEX_KEY: self.version}]}

    def pending(self) -> int:
        return int(self.store.count(self.stale_filter()))

    async def run(self, report: Callable[[Progress], None] | None = None) -> Progress:
        """Re-index every stale memory; `report` is called after each page. RuntimeError
        while another run is going on."""
        if self.running:
            raise RuntimeError("a re-index is already running")
        self.running = True  # set before the first await: two callers never both start
        try:
            return await self._run(report)
        finally:
            self.running = False

    async def _run(self, report: Callable[[Progress], None] | None) -> Progress:
        total = await asyncio.to_thread(self.store.count, None)
        pending = await asyncio.to_thread(self.pending)
        progress = Progress(total=total, pending=pending, started=time.monotonic())
        self.progress = progress
        skipped: set[str] = set()  # failed ones, so a page of only failures ends the run
        while True:
            page, _ = await asyncio.to_thread(
                self.store.list, filters=self.stale_filter(), top_k=PAGE + len(skipped)
            )
            todo = [p for p in page if str(p.id) not in skipped]
            if not todo:
                break
            ahead = await self._embed_ahead([str(p.id) for p in todo])
            for point in todo:
                try:
                    if await self._one(str(point.id), ahead):
                        progress.re_embedded += 1
                    progress.done += 1
                except Exception:
                    log.exception("re-index of memory %s failed; it keeps its old index", point.id)
                    skipped.add(str(point.id))
                    progress.failed += 1
            if report is not None:
                report(progress)
        progress.finished = True
        if report is not None:
            report(progress)
        return progress

    async def _embed_ahead(self, memory_ids: list[str]) -> dict[str, list[float]]:
        """The vectors of the dense texts these memories would be embedded with now (those
        whose dense part is stale), by text, EMBED_BATCH per call, outside any lock."""

        def dense_texts() -> list[str]:
            texts = []
            for memory_id in memory_ids:
                record = self.store.get(vector_id=memory_id)
                if record is not None and self._needs_vector(record.payload or {}):
                    texts.append(self._texts(dict(record.payload or {})).dense)
            return list(dict.fromkeys(texts))

        texts = await asyncio.to_thread(dense_texts)
        vectors: dict[str, list[float]] = {}
        for start in range(0, len(texts), EMBED_BATCH):
            batch = texts[start : start + EMBED_BATCH]
            vectors.update(zip(batch, await self.engine.passage_vectors(batch), strict=True))
        return vectors

    def _needs_vector(self, payload: dict[str, Any]) -> bool:
        stamped = payload.get(INDEX_KEY) or legacy_version(self.settings)
        return stamped != self.version and _dense_part(stamped) != _dense_part(self.version)

    async def _one(self, memory_id: str, ahead: dict[str, list[float]] | None = None) -> bool:
        """Re-index one memory under its scope's lock; True when its dense vector was redone
        (with the vector made `ahead` for its text, if any)."""
        record = await asyncio.to_thread(self.store.get, vector_id=memory_id)
        if record is None:
            return False
        async with self.engine.lock_for(record.payload or {}):
            record = await asyncio.to_thread(self.store.get, vector_id=memory_id)
            if record is None:  # deleted meanwhile
                return False
            payload = dict(record.payload or {})
            if payload.get(INDEX_KEY) == self.version:  # rewritten meanwhile
                return False
            vector = None
            if self._needs_vector(payload):
                texts = await asyncio.to_thread(self._texts, payload)
                payload["text_lemmatized"] = texts.lexical
                vector = (ahead or {}).get(texts.dense)
                if vector is None:  # changed since: embedded alone
                    vector = (await self.engine.passage_vectors([texts.dense]))[0]
            payload[INDEX_KEY] = self.version
            await asyncio.to_thread(self.store.reindex, memory_id, payload, vector)
            return vector is not None

    def _texts(self, payload: dict[str, Any]) -> Any:
        """The texts a write (`WritePipeline._texts`) would index this memory with now."""

        def stored(memory_id: str) -> dict[str, Any] | None:
            record = self.store.get(vector_id=memory_id)
            return None if record is None else (record.payload or {})

        return stored_index_texts(payload, self.settings, stored)


def describe(progress: Progress) -> str:
    elapsed = time.monotonic() - progress.started
    share = 100.0 * progress.done / progress.pending if progress.pending else 100.0
    state = "done" if progress.finished else "running"
    return (
        f"re-index {state}: {progress.done}/{progress.pending} memories ({share:.0f} %), "
        f"{progress.re_embedded} re-embedded, {progress.failed} failed, of {progress.total} "
        f"stored; {elapsed:.1f} s"
    )


def _progress_logger(every_s: float = 10.0) -> Callable[[Progress], None]:
    """Log a re-index's progress at most every `every_s` seconds, and when it ends."""
    last = 0.0

    def report(progress: Progress) -> None:
        nonlocal last
        now = time.monotonic()
        if progress.finished or now - last >= every_s:
            last = now
            log.info("%s", describe(progress))

    return report


async def reindex_stale(reindexer: Reindexer, stale: int | None = None) -> None:
    """Re-index, in the running service, the memories indexed with other settings (`stale` of
    them, if counted): at start-up (lifespan.py) and when asked (POST /v1/reindex/). A failure
    is logged; the memories not reached wait for the next run."""
    if stale is None:
        stale = await asyncio.to_thread(reindexer.pending)
    if not stale or reindexer.running:  # nothing behind, or a run already on it
        return
    log.info(
        "%d memories were indexed with other settings: re-indexing them to %s in the "
        "background (the store is searchable meanwhile)",
        stale,
        reindexer.version,
    )
    try:
        await reindexer.run(_progress_logger())
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("re-index stopped; the memories not yet re-indexed wait for the next run")


def reindex_store(cfg: Any) -> int:
    """`memorystore reindex`: the whole store, a progress line per page, counts checked."""
    from memorystore.service.engine.core import MemoryEngine

    engine = MemoryEngine(cfg)
    try:
        reindexer = Reindexer(engine)
        before = engine.count()
        print(
            f"{reindexer.pending()} of {before} memories to bring to {reindexer.version}",
            file=sys.stderr,
        )
        progress = asyncio.run(reindexer.run(lambda p: print(describe(p), file=sys.stderr)))
        after = engine.count()
    finally:
        engine.close()
    print(f"memories before {before}, after {after}; {describe(progress)}")
    return 0 if before == after and not progress.failed else 1
