"""The service's start and stop, and the loops that run beside the requests.

At start: the start-up re-index of memories indexed with other settings (in the background:
the store is searchable meanwhile), or first, with PostgreSQL, the database schema, retried
until the database lets us (readyz answers 503 with the reason until then); and the sweep
that ends idle sessions. At stop: those loops and any answered-but-unfinished work are
cancelled, then the services are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from memorystore.service.engine.core import MemoryEngine
from memorystore.service.lifecycle.consolidation import Consolidator
from memorystore.service.retrieval.reindex import Progress, Reindexer, describe
from memorystore.service.services import STATE_MIGRATIONS, Services
from memorystore.service.state import postgres

__all__ = ["PREPARE_RETRY_S", "lifespan"]

log = logging.getLogger("memorystore.service")

PREPARE_RETRY_S = (1.0, 2.0, 5.0, 10.0)  # waits between start-up attempts, the last repeats


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the background loops of `app.state.services`; stop them and close it at the end."""
    services: Services = app.state.services
    engine, reindexer = services.engine, services.reindexer
    log.info("memory service for tenant %s ready", services.cfg.tenant)
    if engine.not_ready is None:  # counted before the first request (readyz shows it)
        stale = await asyncio.to_thread(reindexer.pending)
        task: asyncio.Task[None] = asyncio.create_task(_reindex_stale(reindexer, stale))
    else:  # PostgreSQL: the schema first, in the background, while /healthz serves
        task = asyncio.create_task(_prepare(engine, STATE_MIGRATIONS, reindexer))
    idle_s = services.cfg.consolidation.session_idle_minutes * 60
    sweeper = asyncio.create_task(_sweep(services.consolidator, idle_s))
    yield
    for running in (task, sweeper, *services.background):
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    await services.aclose()


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


async def _sweep(consolidator: Consolidator, idle_s: float) -> None:
    """End idle sessions, for as long as the service runs (every quarter of the idle time)."""
    while True:
        await asyncio.sleep(min(60.0, idle_s / 4))
        try:
            ended = await consolidator.sweep(idle_s)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("idle-session sweep failed; the next one retries")
            continue
        if ended:
            log.info("%d idle session(s) consolidated into memory", ended)


async def _reindex(reindexer: Reindexer) -> None:
    """The start-up re-index; a failure is logged, and the next start resumes it."""
    try:
        await reindexer.run(_progress_logger())
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("re-index stopped; the memories not yet re-indexed wait for the next start")


async def _reindex_stale(reindexer: Reindexer, stale: int | None = None) -> None:
    """Re-index the memories indexed with other settings (`stale` of them, if counted)."""
    if stale is None:
        stale = await asyncio.to_thread(reindexer.pending)
    if stale:
        log.info(
            "%d memories were indexed with other settings: re-indexing them to %s in the "
            "background (the store is searchable meanwhile)",
            stale,
            reindexer.version,
        )
        await _reindex(reindexer)


async def _prepare(
    engine: MemoryEngine, migrations: list[postgres.Migration], reindexer: Reindexer
) -> None:
    """Bring the PostgreSQL schema up to date, retrying until the database lets us (until
    then /readyz answers 503 with the reason, `engine.not_ready`), then re-index."""
    attempt = 0
    while True:
        try:
            applied = await asyncio.to_thread(engine.prepare, migrations)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = (
                str(exc)
                if isinstance(exc, postgres.DatabaseUnavailable)
                else f"{type(exc).__name__}: {postgres.describe(exc)}"  # e.g. a refused CREATE
            )
            engine.not_ready = f"database not ready: {reason}"
            wait = PREPARE_RETRY_S[min(attempt, len(PREPARE_RETRY_S) - 1)]
            log.warning("%s; retrying in %.0f s", engine.not_ready, wait)
            attempt += 1
            await asyncio.sleep(wait)
            continue
        for step in applied:
            log.info("database schema: applied %s", step)
        break
    await _reindex_stale(reindexer)
