"""What one service process holds, built once from its ServiceConfig.

The routes, the lifespan and the background loops all reach the same objects through this
one typed container (`app.state.services`), so each is built in one place, in one order, and
a test can swap any of them (`app.dependency_overrides`) without rebuilding the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from memorystore.config import ServiceConfig
from memorystore.scope import EntityIds
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.lifecycle import journal as journals
from memorystore.service.lifecycle.consolidation import Consolidator
from memorystore.service.ops.auth import KeyRing
from memorystore.service.ops.observability import Metrics
from memorystore.service.retrieval.reindex import Reindexer
from memorystore.service.state import idempotency, postgres, saved_exports
from memorystore.service.state.idempotency import IdempotencyStore

__all__ = ["STATE_MIGRATIONS", "Services"]

# the schema of what the service keeps in PostgreSQL beside the engine's (engine.prepare adds it)
STATE_MIGRATIONS = [*idempotency.MIGRATIONS, *journals.MIGRATIONS, *saved_exports.MIGRATIONS]


@dataclass
class Services:
    """The process's services; `build` opens them, `aclose` closes them in reverse."""

    cfg: ServiceConfig
    keyring: KeyRing
    engine: MemoryEngine
    journal: journals.SessionJournal | journals.PgSessionJournal
    saved: saved_exports.ExportStore | saved_exports.PgExportStore
    idempotency: IdempotencyStore
    consolidator: Consolidator
    reindexer: Reindexer
    metrics: Metrics
    # work answered before it is done (session ends answered with 202); cancelled at shutdown
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    @classmethod
    def build(cls, cfg: ServiceConfig) -> Services:
        """Open the store and load the embedder now, so a bad config fails at start-up.

        Without history.postgres the state is in SQLite files of the data directory; with
        it, in that database, shared by the replicas (as are the locks around it)."""
        keyring = KeyRing(cfg.api_key, cfg.previous_api_key)  # re-reads rotated key files
        engine = MemoryEngine(cfg)
        state = engine.database
        journal: journals.SessionJournal | journals.PgSessionJournal
        saved: saved_exports.ExportStore | saved_exports.PgExportStore
        if state is None:
            idem = IdempotencyStore(
                idempotency.LocalRecords(cfg.path_in_data_dir(None, "idempotency.db"))
            )
            journal = journals.SessionJournal(journals.journal_path(cfg))
            saved = saved_exports.ExportStore(cfg.path_in_data_dir(None, "exports.db"))
            session_locks = None
        else:
            idem = IdempotencyStore(
                idempotency.PgRecords(state), postgres.ReplicaLocks(state, "idempotency")
            )
            journal = journals.PgSessionJournal(state)
            saved = saved_exports.PgExportStore(state)
            session_locks = postgres.ReplicaLocks(state, "session")
        return cls(
            cfg=cfg,
            keyring=keyring,
            engine=engine,
            journal=journal,
            saved=saved,
            idempotency=idem,
            consolidator=Consolidator(engine, journal, locks=session_locks),
            reindexer=Reindexer(engine),
            metrics=Metrics(engine.count),
        )

    async def erase(self, scope: EntityIds) -> int:
        """Delete every memory of `scope`, then what else holds its words (the session journal,
        saved exports), so no copy outlives the deletion; returns the memories deleted."""
        deleted = await self.engine.delete_all(scope)
        await asyncio.to_thread(self.journal.forget, scope)
        await asyncio.to_thread(self.saved.forget, scope)
        return deleted

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` after the answer is sent; shutdown cancels it if it is still running."""
        task = asyncio.create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def aclose(self) -> None:
        self.journal.close()
        self.saved.close()
        self.idempotency.close()
        for database in self.engine.databases():
            await database.aclose()
        self.engine.close()
