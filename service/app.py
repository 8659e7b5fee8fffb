"""The memory service's HTTP API: the mem0 Platform subset, recall, health and metrics.

Handlers only parse, authorise and translate errors; the work is in `engine.MemoryEngine`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import AfterValidator, BaseModel

from memorystore.config import ServiceConfig
from memorystore.recall import pack
from memorystore.scope import (
    ENTITY_TYPES,
    ID_PATTERN,
    MAX_ID_CHARS,
    EntityIds,
    ScopeError,
    id_problem,
    split_scope,
)
from memorystore.service.api.schemas import (
    AddRequest,
    BackupRequest,
    BatchDeleteRequest,
    BatchUpdateRequest,
    EndSessionRequest,
    ExchangeRequest,
    ExportDocument,
    ExportGetRequest,
    ExportRequest,
    ListRequest,
    RecallRequest,
    SearchRequest,
    UpdateRequest,
    check_metadata,
)
from memorystore.service.engine.core import MemoryEngine, NotFound
from memorystore.service.lifecycle import journal as journals
from memorystore.service.lifecycle.consolidation import Consolidator
from memorystore.service.ops.auth import KeyRing
from memorystore.service.ops.observability import BodyLimitMiddleware, Metrics, MetricsMiddleware
from memorystore.service.portability import backup
from memorystore.service.portability.document import FormatError, build_export, import_document
from memorystore.service.retrieval.reindex import Progress, Reindexer, describe
from memorystore.service.state import idempotency, postgres, saved_exports
from memorystore.service.state.idempotency import IdempotencyStore, KeyReused, fingerprint

log = logging.getLogger("memorystore.service")


def _literal_id(value: str | None) -> str | None:
    problem = None if value is None else id_problem(value)
    if problem:
        raise ValueError(problem)
    return value


_ID_DOC = "An opaque id, matched exactly: no whitespace, control or format characters, and not `*`."
QueryId = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description=_ID_DOC,
        json_schema_extra={"pattern": ID_PATTERN},
    ),
    AfterValidator(_literal_id),
]


def query_entity_ids(
    user_id: QueryId = None, agent_id: QueryId = None, run_id: QueryId = None
) -> EntityIds:
    """Entity ids given as query parameters (calls on one memory, delete by entity).

    A parameter given empty or invalid (`?user_id=`, `?user_id=*`) is refused with 422, never
    read as absent. None given at all is the empty scope: the calls on one memory accept it
    (the id is the capability, see MemoryEngine._owned); delete by entity refuses it.
    """
    return EntityIds(user_id=user_id, agent_id=agent_id, run_id=run_id)


EntityIdsQuery = Annotated[EntityIds, Depends(query_entity_ids)]
PathId = Annotated[
    str,
    Path(max_length=MAX_ID_CHARS, description=_ID_DOC, json_schema_extra={"pattern": ID_PATTERN}),
    AfterValidator(_literal_id),
]


class Page(BaseModel):
    """A page of a listing, shaped like the mem0 Platform's (`next`/`previous` are URLs)."""

    count: int
    next: str | None
    previous: str | None
    results: list[dict[str, Any]]

    @classmethod
    def of(
        cls, request: Request, total: int, page: int, page_size: int, rows: list[dict[str, Any]]
    ) -> Page:
        def link(p: int) -> str | None:
            if p < 1 or (p - 1) * page_size >= total:
                return None
            return str(request.url.include_query_params(page=p, page_size=page_size))

        return cls(count=total, next=link(page + 1), previous=link(page - 1), results=rows)


class Problem(BaseModel):
    """Every error body: `detail` names the field or value at fault."""

    detail: str
    errors: list[dict[str, Any]] | None = None


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "description": text}
    for code, text in (
        (400, "Bad request: the detail names the field"),
        (401, "Missing or wrong API key"),
        (404, "No such memory in this scope"),
        (413, "Request body over limits.maxRequestBytes"),
        (422, "Invalid request: the detail names the field"),
    )
}


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


# the schema of what the app keeps in PostgreSQL beside the engine's (engine.prepare adds it)
STATE_MIGRATIONS = [*idempotency.MIGRATIONS, *journals.MIGRATIONS, *saved_exports.MIGRATIONS]
PREPARE_RETRY_S = (1.0, 2.0, 5.0, 10.0)  # waits between start-up attempts, the last repeats


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


async def _end_logged(consolidator: Consolidator, scope: EntityIds, session: str) -> None:
    """A session end answered with 202: failures are logged, the idle sweep retries."""
    try:
        await consolidator.end(scope, session)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("session not consolidated yet (%s): the idle sweep retries", type(exc).__name__)


def create_app(cfg: ServiceConfig) -> FastAPI:
    """Build the app; opens the store and loads the embedder now, so bad config fails here."""
    keyring = KeyRing(cfg.api_key, cfg.previous_api_key)  # re-reads rotated key files
    engine = MemoryEngine(cfg)
    state = engine.database  # history.postgres: what replicas share lives there
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
    background: set[asyncio.Task[Any]] = set()  # session ends answered with 202
    metrics = Metrics(engine.count)
    limits = cfg.limits

    reindexer = Reindexer(engine)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        log.info("memory service for tenant %s ready", cfg.tenant)
        if engine.not_ready is None:  # counted before the first request (readyz shows it)
            stale = await asyncio.to_thread(reindexer.pending)
            task: asyncio.Task[None] = asyncio.create_task(_reindex_stale(reindexer, stale))
        else:  # PostgreSQL: the schema first, in the background, while /healthz serves
            task = asyncio.create_task(_prepare(engine, STATE_MIGRATIONS, reindexer))
        idle_s = cfg.consolidation.session_idle_minutes * 60
        sweeper = asyncio.create_task(_sweep(consolidator, idle_s))
        yield
        for running in (task, sweeper, *background):
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
        journal.close()
        saved.close()
        idem.close()
        for database in engine.databases():
            await database.aclose()
        engine.close()

    docs = cfg.api_docs  # off by default: the schema maps the API for anyone who can reach it
    app = FastAPI(
        title="MemoryStore memory service",
        summary=f"Long-term memory for tenant {cfg.tenant}",
        lifespan=lifespan,
        openapi_url="/openapi.json" if docs else None,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
    )
    app.state.not_ready = lambda: engine.not_ready  # ServiceThread waits for the schema
    app.add_middleware(BodyLimitMiddleware, limit=limits.max_request_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)

    def authorise(authorization: Annotated[str | None, Header()] = None) -> None:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() not in ("token", "bearer") or not keyring.check(token.strip()):
            raise HTTPException(
                401,
                "missing or wrong API key (send Authorization: Token <key>)",
                headers={"WWW-Authenticate": "Token"},
            )

    def prepared() -> None:
        """Until the database schema is checked (PostgreSQL), answer at once with the reason
        instead of waiting on a database that may be down."""
        if engine.not_ready is not None:
            raise postgres.DatabaseUnavailable(engine.not_ready)

    api = APIRouter(dependencies=[Depends(authorise), Depends(prepared)], responses=ERROR_RESPONSES)

    def check_text(text: str, field: str) -> None:
        if len(text) > limits.max_memory_chars:
            raise HTTPException(
                422, f"{field} is longer than limits.maxMemoryChars ({limits.max_memory_chars})"
            )

    def check_texts(texts: list[str], field: str) -> None:
        for i, text in enumerate(texts):
            check_text(text, f"{field}[{i}]")

    def check_k(value: int, field: str) -> None:
        if value > limits.max_top_k:
            raise HTTPException(422, f"{field} must be at most {limits.max_top_k}")

    def scoped(body: Any, filters: dict[str, Any] | None) -> tuple[EntityIds, dict[str, Any]]:
        try:
            return split_scope(body, filters)
        except ScopeError as exc:
            raise HTTPException(400, str(exc)) from None

    def plain_metadata(metadata: dict[str, Any] | None, where: str = "") -> None:
        try:
            check_metadata(metadata)
        except ScopeError as exc:
            raise HTTPException(400, f"{where}{exc}") from None

    async def once(
        key: str | None,
        request: Request,
        body: BaseModel,
        run: Callable[[], Awaitable[tuple[int, Any]]],
    ) -> Response:
        """Run a write once per Idempotency-Key: a retry replays the first answer."""
        if not key:
            status, payload = await run()
            return JSONResponse(payload, status)
        fp = fingerprint("add", request.url.path, body.model_dump(mode="json"))
        try:
            status, payload, replayed = await idem.run(key, fp, run)
        except KeyReused as exc:
            raise HTTPException(422, str(exc)) from None
        headers = {"Idempotent-Replayed": "true"} if replayed else {}
        return JSONResponse(payload, status, headers=headers)

    def writable(body: AddRequest | ExchangeRequest) -> EntityIds:
        """The scope of a request that writes messages, once its limits and metadata pass."""
        if len(body.messages) > limits.max_messages:
            raise HTTPException(422, f"messages: at most {limits.max_messages} per request")
        check_texts([m.content for m in body.messages], "messages.content")
        scope, _ = scoped(body, None)
        plain_metadata(body.metadata)
        return scope

    @api.get("/v1/ping/")
    async def ping() -> dict[str, Any]:
        # mem0's client refuses to start without an org and a project: one tenant is both.
        return {"status": "ok", "org_id": cfg.tenant, "project_id": cfg.tenant, "user_email": None}

    @api.post("/v3/memories/add/")
    @api.post("/v1/memories/")
    async def add(
        body: AddRequest,
        request: Request,
        idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
    ) -> Response:
        scope = writable(body)

        async def run() -> tuple[int, Any]:
            if body.infer and not body.raw_fallback and not engine.infer_available:
                return 200, {"results": [], "skipped": "no extraction model is configured"}
            results = await engine.add(
                [m.model_dump(exclude_none=True) for m in body.messages],
                scope,
                body.metadata,
                body.infer,
            )
            return 200, {"results": results}

        return await once(idempotency_key, request, body, run)

    @api.post("/v3/memories/search/")
    async def search(body: SearchRequest) -> dict[str, Any]:
        check_k(body.top_k, "top_k")
        check_text(body.query, "query")
        scope, rest = scoped(body, body.filters)
        threshold = body.threshold if body.threshold is not None else 0.0
        results = await engine.search(
            body.query, scope, body.top_k, threshold, rest, body.include_retired
        )
        return {"results": results}

    @api.post("/v1/recall/")
    async def recall(body: RecallRequest) -> dict[str, Any]:
        """Memories packed into a token budget: what an agent injects before a turn."""
        defaults = cfg.recall
        top_k = body.top_k or defaults.top_k
        check_k(top_k, "top_k")
        check_text(body.query, "query")
        scope, rest = scoped(body, body.filters)
        threshold = defaults.threshold if body.threshold is None else body.threshold
        found = await engine.search(body.query, scope, top_k, threshold, rest, body.include_retired)
        packed = pack(
            found,
            token_budget=defaults.token_budget if body.token_budget is None else body.token_budget,
            max_memory_chars=body.max_memory_chars or defaults.max_memory_chars,
        )  # the floor was applied by the search (to the dense similarity)
        return {
            "context": packed.context,
            "memories": packed.memories,
            "tokens": packed.tokens,
            "dropped": packed.dropped,
            "repeats": packed.repeats,
        }

    @api.post("/v3/memories/")
    async def list_memories(
        body: ListRequest,
        request: Request,
        page: Annotated[int, Query(ge=1)] = 1,
        page_size: Annotated[int, Query(ge=1)] = 100,
    ) -> Page:
        check_k(page_size, "page_size")
        if page * page_size > limits.max_list_window:
            raise HTTPException(
                422,
                f"page: page × page_size may not exceed limits.maxListWindow "
                f"({limits.max_list_window}); narrow the filters instead",
            )
        scope, _ = scoped(body, body.filters)
        total, rows = await engine.list(scope, page, page_size, body.include_retired)
        return Page.of(request, total, page, page_size, rows)

    @api.get("/v1/memories/{memory_id}/")
    async def get_one(memory_id: str, scope: EntityIdsQuery) -> dict[str, Any]:
        return await engine.get(memory_id, scope)

    @api.put("/v1/memories/{memory_id}/")
    async def update_one(
        memory_id: str, body: UpdateRequest, scope: EntityIdsQuery
    ) -> dict[str, Any]:
        if body.text is None and body.metadata is None:
            raise HTTPException(422, "give `text` or `metadata` to update")
        if body.text is not None:
            check_text(body.text, "text")
        plain_metadata(body.metadata)
        return await engine.update(memory_id, scope, body.text, body.metadata)

    @api.delete("/v1/memories/{memory_id}/")
    async def delete_one(memory_id: str, scope: EntityIdsQuery) -> dict[str, Any]:
        await engine.delete(memory_id, scope)
        return {"message": "Memory deleted successfully!"}

    @api.delete("/v1/memories/")
    async def delete_by_entity(scope: EntityIdsQuery) -> dict[str, Any]:
        if not scope:
            raise HTTPException(400, "a scope is required: give user_id, agent_id or run_id")
        deleted = await engine.delete_all(scope)
        await asyncio.to_thread(journal.forget, scope)
        await asyncio.to_thread(saved.forget, scope)  # no copy outlives the deletion
        return {"message": "Memories deleted successfully!", "deleted": deleted}

    @api.get("/v1/memories/{memory_id}/history/")
    async def history(memory_id: str, scope: EntityIdsQuery) -> list[dict[str, Any]]:
        return await engine.history(memory_id, scope)

    @api.get("/v1/entities/")
    async def entities(
        request: Request,
        page: Annotated[int, Query(ge=1)] = 1,
        page_size: Annotated[int, Query(ge=1)] = 100,
    ) -> Page:
        """Users, agents and runs with their memory counts, a page at a time."""
        check_k(page_size, "page_size")
        total, rows = await engine.entities(page, page_size)
        return Page.of(request, total, page, page_size, rows)

    @api.delete("/v2/entities/{entity_type}/{name}/")
    async def delete_entity(
        entity_type: str,
        name: PathId,
    ) -> dict[str, Any]:
        """Delete an entity's memories, with the scope rules: agent or run alone spans no user."""
        key = ENTITY_TYPES.get(entity_type)
        if key is None:
            raise HTTPException(400, f"entity type {entity_type!r} is not one of user, agent, run")
        scope = EntityIds(**{key: name})
        deleted = await engine.delete_all(scope)
        await asyncio.to_thread(journal.forget, scope)
        await asyncio.to_thread(saved.forget, scope)  # no copy outlives the deletion
        return {"message": "Entity deleted successfully.", "deleted": deleted}

    @api.post("/v1/sessions/{session_id}/exchanges/")
    async def journal_exchange(
        session_id: PathId,
        body: ExchangeRequest,
        request: Request,
        idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
    ) -> Response:
        """Journal one completed exchange; the session's end turns its exchanges into memory."""
        scope = writable(body)

        async def run() -> tuple[int, Any]:
            seq = await asyncio.to_thread(
                journal.append,
                scope,
                session_id,
                [m.model_dump(exclude_none=True) for m in body.messages],
                body.metadata or {},
                saved=body.saved,
                raw=body.raw_fallback,
            )
            return 200, {"session_id": session_id, "journalled": seq}

        return await once(idempotency_key, request, body, run)

    @api.post(
        "/v1/sessions/{session_id}/end/",
        responses={
            200: {"description": "Consolidated (`wait`): what was written"},
            202: {"description": "Accepted: consolidating in the background"},
        },
    )
    async def end_session(session_id: PathId, body: EndSessionRequest) -> JSONResponse:
        """Consolidate the session's journalled exchanges into memory (idempotent)."""
        scope, _ = scoped(body, None)
        if body.wait:
            return JSONResponse(await consolidator.end(scope, session_id))
        task = asyncio.create_task(_end_logged(consolidator, scope, session_id))
        background.add(task)
        task.add_done_callback(background.discard)
        return JSONResponse({"session_id": session_id, "status": "consolidating"}, 202)

    # --- batch calls, exports and imports (portability/document.py) ----------------------------

    def distinct_ids(ids: list[str]) -> None:
        first: dict[str, int] = {}
        for i, memory_id in enumerate(ids):
            if memory_id in first:
                raise HTTPException(
                    422,
                    f"memories[{i}].memory_id: {memory_id} is given twice "
                    f"(also memories[{first[memory_id]}])",
                )
            first[memory_id] = i

    def whole_scope(rest: dict[str, Any]) -> None:
        if rest:
            raise HTTPException(
                422,
                f"filters.{next(iter(rest))}: an export holds a whole scope; only user_id, "
                "agent_id and run_id are accepted",
            )

    @api.put("/v1/batch/")
    async def batch_update(body: BatchUpdateRequest) -> dict[str, Any]:
        """Update up to 1000 memories by id; all are checked before any is changed."""
        distinct_ids([item.memory_id for item in body.memories])
        for i, item in enumerate(body.memories):
            if item.text is None and item.metadata is None:
                raise HTTPException(422, f"memories[{i}]: give `text` or `metadata` to update")
            if item.text is not None:
                check_text(item.text, f"memories[{i}].text")
            plain_metadata(item.metadata, f"memories[{i}].")
        items = [(item.memory_id, item.text, item.metadata) for item in body.memories]
        updated = await engine.batch_update(items)
        return {"message": f"Successfully updated {updated} memories"}

    @api.delete("/v1/batch/")
    async def batch_delete(body: BatchDeleteRequest) -> dict[str, Any]:
        """Delete up to 1000 memories by id; all are checked before any is deleted."""
        ids = [item.memory_id for item in body.memories]
        distinct_ids(ids)
        deleted = await engine.batch_delete(ids)
        return {"message": f"Successfully deleted {deleted} memories"}

    @api.post("/v1/exports/")
    async def create_export(body: ExportRequest) -> dict[str, Any]:
        """Export one scope's memories now (format: portability/document.py), kept 7 days."""
        scope, rest = scoped(body, body.filters)
        whole_scope(rest)
        document = await build_export(engine, cfg.tenant, scope, body.export_schema)
        await asyncio.to_thread(saved.put, scope, document)
        return {
            "message": "Memory export request received. The export will be ready in a few seconds.",
            "id": document["id"],
        }

    @api.post("/v1/exports/get/")
    async def get_export(body: ExportGetRequest) -> dict[str, Any]:
        """An export by `memory_export_id`, else the latest one of exactly the scope given."""
        named = body.filters or any(getattr(body, key) for key in ENTITY_TYPES.values())
        scope = None
        if named or body.memory_export_id is None:
            scope, rest = scoped(body, body.filters)
            whole_scope(rest)
        if body.memory_export_id is not None:
            found = await asyncio.to_thread(saved.get, body.memory_export_id)
            if found is None or (scope is not None and found[0] != scope):
                raise HTTPException(
                    404, f"memory_export_id: no export {body.memory_export_id} in this scope"
                )
            return found[1]
        assert scope is not None
        document = await asyncio.to_thread(saved.latest, scope)
        if document is None:
            raise HTTPException(404, f"no export of the scope {scope.filters()} (or expired)")
        return document

    @api.post("/v1/imports/")
    async def import_memories(body: ExportDocument) -> dict[str, Any]:
        """Write an export's memories back (ids, history and all); existing ids are skipped."""
        try:
            return await import_document(engine, body, limits.max_memory_chars)
        except FormatError as exc:
            raise HTTPException(422, str(exc)) from None

    backup_errors: dict[int | str, dict[str, Any]] = {
        code: {"model": Problem, "description": text}
        for code, text in (
            (
                409,
                "No backup target (backup.path), a backup of that name exists, or the store "
                "is in PostgreSQL (its backups are the database's)",
            ),
            (503, "The backup target is missing or not writable"),
            (507, "The backup target is full"),
        )
    }

    @api.post("/v1/backups/", responses=backup_errors)
    async def take_backup(body: BackupRequest) -> dict[str, Any]:
        """Back the whole store up into backup.path while it serves (writes wait meanwhile)."""
        return await backup.take(engine, body.name)

    @api.get("/v1/backups/{name}/", responses=backup_errors)
    async def describe_backup(name: str) -> dict[str, Any]:
        return await asyncio.to_thread(backup.describe, cfg, name)

    @api.delete("/v1/backups/{name}/", responses=backup_errors)
    async def remove_backup(name: str) -> dict[str, str]:
        await asyncio.to_thread(backup.remove, cfg, name)
        return {"message": f"backup {name} deleted"}

    app.include_router(api)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        try:
            await asyncio.wait_for(asyncio.to_thread(engine.check_ready), timeout=5)
        except Exception as exc:
            # a DatabaseUnavailable says why without a secret; anything else by its type
            reason = (
                str(exc) if isinstance(exc, postgres.DatabaseUnavailable) else type(exc).__name__
            )
            log.warning("not ready: %s", reason)
            return JSONResponse({"status": "unavailable", "reason": reason}, 503)
        body: dict[str, Any] = {"status": "ok"}
        if reindexer.progress is not None:
            body["reindex"] = reindexer.progress.as_dict()
        return JSONResponse(body)

    @app.get("/metrics", include_in_schema=False)
    async def metrics_endpoint() -> Response:
        return PlainTextResponse(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(backup.BackupError)
    async def backup_failed(_: Request, exc: backup.BackupError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, exc.status)

    @app.exception_handler(postgres.DatabaseUnavailable)
    async def database_unavailable(_: Request, exc: postgres.DatabaseUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 503, headers={"Retry-After": "5"})

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 404)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors()
        ]
        detail = "; ".join(
            f"{'.'.join(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in errors
        )
        return JSONResponse({"detail": detail, "errors": errors}, 422)

    @app.exception_handler(ValueError)
    async def bad_value(_: Request, exc: ValueError) -> JSONResponse:
        # mem0 raises ValueError for input it refuses (e.g. an unsupported filter operator).
        return JSONResponse({"detail": str(exc)}, 400)

    return app
