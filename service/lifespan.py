"""The service's start and stop, and the loops that run beside the requests.

At start: the erasures a killed process left half-done are finished before anything is
served (engine/forgetting.py: nothing half-erased is ever visible); the start-up re-index of
memories indexed with other settings (in the background: the store is searchable meanwhile),
or first, with PostgreSQL, the database schema, retried until the database lets us (readyz
answers 503 with the reason until then, and until those erasures are finished); and the
sweep that ends idle sessions (which also finishes erasures that failed half-way and, with
replicas, empties this process's text caches when another replica recorded one); and the
thread that re-reads the DSNs' and API keys' files (ops/secret_files.py); and the loop that
builds the embedded engine's HNSW graph when enough points wait outside it
(stores/graph_builds.py). At stop: those
loops and any answered-but-unfinished work are cancelled, then the services are closed
(the secret files' thread first).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from memorystore.rules import forget_texts
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.lifecycle.consolidation import Consolidator
from memorystore.service.migration.migrator import migrate
from memorystore.service.retrieval.reindex import Reindexer, reindex_stale
from memorystore.service.services import STATE_MIGRATIONS, Services
from memorystore.service.state import postgres
from memorystore.service.stores.graph_builds import keep_indexed
from memorystore.service.stores.protocol import StoreUnavailable

__all__ = ["PREPARE_RETRY_S", "RETRY_ERASURES_AFTER_S", "lifespan"]

log = logging.getLogger("memorystore.service")

PREPARE_RETRY_S = (1.0, 2.0, 5.0, 10.0)  # waits between start-up attempts, the last repeats
# an erasure still pending this long after it was recorded failed half-way: the sweep
# finishes it (not sooner: it may be running, here or on another replica)
RETRY_ERASURES_AFTER_S = 300.0


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the background loops of `app.state.services`; stop them and close it at the end."""
    services: Services = app.state.services
    engine, reindexer = services.engine, services.reindexer
    log.info("memory service for tenant %s ready", services.cfg.tenant)
    services.secret_files.start()  # rotated DSNs and API keys without a restart
    if services.secret_files.fields:
        log.info("re-reading while running: %s", ", ".join(services.secret_files.fields))
    if engine.not_ready is None:  # counted before the first request (readyz shows it)
        await _resume_erasures(engine)
        stale = await asyncio.to_thread(reindexer.pending)
        task: asyncio.Task[None] = asyncio.create_task(_maintain(engine, reindexer, stale))
    else:  # PostgreSQL's schema or a Qdrant server's collection first, in the background
        task = asyncio.create_task(_prepare(engine, STATE_MIGRATIONS, reindexer))
    idle_s = services.cfg.consolidation.session_idle_minutes * 60
    sweeper = asyncio.create_task(_sweep(services.consolidator, idle_s, engine))
    indexer = asyncio.create_task(
        keep_indexed(engine.embedded_stores, services.metrics.graph_builds)
    )
    yield
    for running in (task, sweeper, indexer, *services.background):
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    await services.aclose()


async def _resume_erasures(engine: MemoryEngine) -> None:
    """Finish the erasures a killed process left half-done (before anything is served)."""
    finished = await engine.forgetting.resume()
    if finished:
        log.info("%d interrupted erasure(s) finished", finished)


async def _watch_erasures(engine: MemoryEngine, seen: int | None) -> int | None:
    """Finish erasures that failed half-way (a database outage) once they are older than
    RETRY_ERASURES_AFTER_S, and, with replicas, empty the text caches when another replica
    recorded an erasure; returns the ledger's newest record seen."""
    try:
        finished = await engine.forgetting.resume(older_than_s=RETRY_ERASURES_AFTER_S)
        last = await asyncio.to_thread(engine.ledger.last)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("erasure ledger not usable now (%s); the next look retries", type(exc).__name__)
        return seen
    if finished:
        log.info("%d erasure(s) that had failed half-way finished", finished)
    if seen is not None and last != seen:
        forget_texts()
    return last


async def _sweep(
    consolidator: Consolidator, idle_s: float, engine: MemoryEngine | None = None
) -> None:
    """End idle sessions, for as long as the service runs (every quarter of the idle time);
    first look at the erasure ledger (`_watch_erasures`)."""
    seen = None
    while True:
        await asyncio.sleep(min(60.0, idle_s / 4))
        if engine is not None:
            seen = await _watch_erasures(engine, seen)
        try:
            ended = await consolidator.sweep(idle_s)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("idle-session sweep failed; the next one retries")
            continue
        if ended:
            log.info("%d idle session(s) consolidated into memory", ended)


async def _prepare(
    engine: MemoryEngine, migrations: list[postgres.Migration], reindexer: Reindexer
) -> None:
    """Bring the PostgreSQL schema up to date and finish interrupted erasures, retrying until
    the database lets us (until then /readyz answers 503 with the reason, `engine.not_ready`),
    then re-index."""
    attempt = 0
    while True:
        try:
            applied = await asyncio.to_thread(engine.prepare, migrations, False)
            engine.not_ready = "finishing interrupted erasures"
            await _resume_erasures(engine)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, StoreUnavailable):  # a Qdrant server that does not answer
                engine.not_ready = f"vector store not ready: {exc}"
            else:
                reason = (
                    str(exc)
                    if isinstance(exc, postgres.DatabaseUnavailable)
                    else f"{type(exc).__name__}: {postgres.describe(exc)}"  # a refused CREATE
                )
                engine.not_ready = f"database not ready: {reason}"
            wait = PREPARE_RETRY_S[min(attempt, len(PREPARE_RETRY_S) - 1)]
            log.warning("%s; retrying in %.0f s", engine.not_ready, wait)
            attempt += 1
            await asyncio.sleep(wait)
            continue
        engine.not_ready = None
        for step in applied:
            log.info("database schema: applied %s", step)
        break
    await _maintain(engine, reindexer)


async def _maintain(engine: MemoryEngine, reindexer: Reindexer, stale: int | None = None) -> None:
    """Once the store is ready: re-index what is stale, then carry out an embedder
    migration (it runs to its end, grace period included; replicas sharing the record
    follow it, and offer to carry one out, for as long as they run)."""
    await reindex_stale(reindexer, stale)
    if engine.migration.records.shared or engine.migration.pending():
        await migrate(engine.migration, engine)
