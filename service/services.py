"""What one service process holds, built once from its ServiceConfig.

The routes, the lifespan and the background loops all reach the same objects through this
one typed container (`app.state.services`), so each is built in one place, in one order, and
a test can swap any of them (`app.dependency_overrides`) without rebuilding the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from memorystore.config import ConfigError, ServiceConfig
from memorystore.scope import EntityIds
from memorystore.service.engine.core import MemoryEngine
from memorystore.service.engine.mem0_config import speaks_openai
from memorystore.service.engine.mem0_seam import (
    use_embedder_key,
    use_llm_key,
    use_vector_store_ca,
    use_vector_store_key,
)
from memorystore.service.lifecycle import journal as journals
from memorystore.service.lifecycle.consolidation import Consolidator
from memorystore.service.ops.auth import KeyRing
from memorystore.service.ops.observability import Metrics
from memorystore.service.ops.secret_files import SecretFiles, followed_secrets
from memorystore.service.portability import backup
from memorystore.service.retrieval.reindex import Reindexer
from memorystore.service.state import idempotency, postgres, saved_exports
from memorystore.service.state.idempotency import IdempotencyStore

__all__ = ["STATE_MIGRATIONS", "Services", "secret_holders"]

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
    # the DSNs' and API keys' files, re-read while the service runs (the lifespan starts it)
    secret_files: SecretFiles
    # work answered before it is done (session ends answered with 202); cancelled at shutdown
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    @classmethod
    def build(cls, cfg: ServiceConfig) -> Services:
        """Open the store and load the embedder now, so a bad config fails at start-up.

        Without history.postgres the state is in SQLite files of the data directory; with
        it, in that database, shared by the replicas (as are the locks around it)."""
        # before anything opens the data directory: never serve half a restore, and a missing
        # or short backup signing key stops the start, not the first backup
        pending = backup.pending_restore(cfg)
        if pending:
            raise ConfigError(pending)
        if cfg.backup is not None:
            backup.signing_key(cfg)
        keyring = KeyRing(cfg.api_key, cfg.previous_api_key)  # re-reads rotated key files
        # read before the engine reads the same files: a change in between is not missed
        secret_files = SecretFiles(followed_secrets(cfg))
        engine = MemoryEngine(cfg)
        for name, apply in secret_holders(cfg, engine).items():
            secret_files.on_change(name, apply)
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
        consolidator = Consolidator(engine, journal, locks=session_locks)
        # the one erasure path (engine/forgetting.py) reaches what else holds text, and
        # waits for session consolidations, which write text read before the erasure
        engine.forgetting.places.extend([journal, saved, idem])
        engine.forgetting.pauses.append(consolidator.paused)
        reindexer = Reindexer(engine)
        return cls(
            cfg=cfg,
            keyring=keyring,
            engine=engine,
            journal=journal,
            saved=saved,
            idempotency=idem,
            consolidator=consolidator,
            reindexer=reindexer,
            metrics=Metrics(
                engine.count,
                engine.embedded_stores,
                journal.backlog,
                cert_file=cfg.tls.cert_file if cfg.tls else None,
                reindex=reindexer.counts,
            ),
            secret_files=secret_files,
        )

    async def erase(self, scope: EntityIds) -> int:
        """Erase every memory of `scope` from every place the service keeps it (the engine's
        one erasure path: engine/forgetting.py); returns the memories deleted."""
        return await self.engine.delete_all(scope)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` after the answer is sent; shutdown cancels it if it is still running."""
        task = asyncio.create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def aclose(self) -> None:
        self.secret_files.stop()
        self.journal.close()
        self.saved.close()
        self.idempotency.close()
        for database in self.engine.databases():
            await database.aclose()
        self.engine.close()


def secret_holders(cfg: ServiceConfig, engine: MemoryEngine) -> dict[str, Callable[[str], None]]:
    """What takes each followed secret's new value (ops/secret_files.py), by its field: the
    Databases' pools (the DSNs), mem0's model clients (their API keys; Ollama takes none) and
    the Qdrant clients (the server's API key)."""
    holders: dict[str, Callable[[str], None]] = {}
    if engine.database is not None:
        holders["history.postgres.dsn"] = engine.database.use_dsn
    if engine.vectors_database is not None:  # history's own when both name one database
        holders["vectorStore.postgres.database.dsn"] = engine.vectors_database.use_dsn
    if cfg.vector_store.server is not None:
        holders["vectorStore.server.apiKey"] = partial(use_vector_store_key, engine.memory)
        holders["vectorStore.server.ca"] = partial(use_vector_store_ca, engine.memory)
    if speaks_openai(cfg.embedder.provider):
        holders["embedder.apiKey"] = partial(use_embedder_key, engine.memory)
    if cfg.llm is not None and speaks_openai(cfg.llm.provider):
        holders["llm.apiKey"] = partial(use_llm_key, engine.memory)
    return holders
