"""The service's PostgreSQL (history.postgres, vectorStore.postgres): pools, schema, locks.

One `Database` per configured database, owned by the engine that opens it (`configured`):
the engine hands it to what it builds (mem0's history, the vector store, the locks, the scope
chain) and closes it. It holds two pools:

- a blocking one for what runs in worker threads (mem0 calls its history and vector store
  from threads, so those are synchronous);
- an asyncio one for advisory locks, so a request waiting for a scope's lock holds no
  thread (a handful of waiting threads would otherwise starve the embedder's).

Every connection has a statement timeout and a connect timeout. Nothing here touches the
database at construction: `migrate` (run at start-up, retried until it succeeds) creates and
upgrades the schema, and until it has, `/readyz` says why. Error messages never carry the
DSN's password (`describe`).

The DSN can change while the service runs (a mounted Secret re-read by ops/secret_files.py,
`use_dsn`): both pools take their connection string from a callable that psycopg_pool calls
for every new connection, so a rotated password reaches the next connection opened, and the
connections already open keep working until the pool retires them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Hashable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from memorystore.config import ConfigError, PostgresConnection, ServiceConfig
from memorystore.keyed_locks import KeyedLocks

__all__ = [
    "MIGRATION_LOCK",
    "Database",
    "DatabaseUnavailable",
    "Migration",
    "ReplicaLocks",
    "configured",
    "describe",
    "lock_id",
    "lock_name",
]

log = logging.getLogger("memorystore.service")

# the one lock every migration runs under, across replicas (an arbitrary 64-bit constant)
MIGRATION_LOCK = 0x6D656D6F72790001
MIGRATIONS_TABLE = "memorystore_migrations"


class DatabaseUnavailable(RuntimeError):
    """The database cannot be used now; the message is safe to show (no secret in it)."""


@dataclass(frozen=True)
class Migration:
    """One schema step. `version`s of a component rise by one; `sql` runs in one transaction."""

    component: str
    version: int
    name: str
    sql: str


def lock_id(name: str) -> int:
    """A stable signed 64-bit advisory-lock id for `name` (the same in every process)."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_name(key: Hashable) -> str:
    """The process-independent name of an in-process lock key (EntityIds, tuples, strings).

    Python's `hash` differs per process, so keys are spelled out: a scope by its stable
    `key()` (engine.EntityIds), tuples element by element, anything else by `repr`.
    """
    if isinstance(key, tuple):
        return "(" + ",".join(lock_name(part) for part in key) + ")"
    stable = getattr(key, "key", None)
    if callable(stable):
        return "scope:" + str(stable())
    return repr(key)


_PASSWORD_RE = re.compile(r"(password\s*=\s*)(\S+)", re.IGNORECASE)


def describe(exc: BaseException, dsn: str | None = None) -> str:
    """A one-line reason for a database error, with the password taken out."""
    return _scrub(" ".join(str(exc).split()) or type(exc).__name__, dsn)


def _scrub(text: str, dsn: str | None = None) -> str:
    """`text` with `dsn`'s password, and anything spelled `password=…`, taken out."""
    if dsn:
        password = conninfo_to_dict(dsn).get("password")
        if password:
            text = text.replace(str(password), "***")
    return _PASSWORD_RE.sub(r"\1***", text)


def _where(conninfo: str) -> tuple[str, str, str]:
    """What a connection string connects to: host (or address), port, database name."""
    parts = conninfo_to_dict(conninfo)
    host = str(parts.get("host") or parts.get("hostaddr") or "")
    return host, str(parts.get("port") or ""), str(parts.get("dbname") or "")


class Database:
    """Pools and schema of one PostgreSQL database, opened lazily and shared by threads.

    Its owner (the engine) opens one per configured database and hands the same object to
    the history, the vector store and the locks; closing it is the owner's."""

    def __init__(
        self,
        dsn: str,
        *,
        field: str,
        pool_size: int = 10,
        statement_timeout_seconds: float = 10.0,
        connect_timeout_seconds: float = 5.0,
        application_name: str = "memorystore",
    ) -> None:
        self.field = field
        timeout_ms = int(statement_timeout_seconds * 1000)
        self._connection_options: dict[str, Any] = {
            "application_name": application_name,
            "connect_timeout": max(1, round(connect_timeout_seconds)),
            "options": f"-c statement_timeout={timeout_ms}",
        }
        self._dsn = dsn
        self._conninfo = self._conninfo_of(dsn)
        self._earlier_dsn: str | None = None  # the one before a rotation: `describe` hides both
        self.statement_timeout_ms = timeout_ms
        self._connect_timeout = connect_timeout_seconds
        # a request waits this long for a pooled connection (all busy, or none can open)
        self._wait = max(10.0, 2 * connect_timeout_seconds)
        common: dict[str, Any] = {
            "max_size": pool_size,
            "open": False,
            "timeout": self._wait,
            # a failing connection attempt retries with a doubling delay until this, then
            # gives up, and the next request starts a fresh one: bounded, a rotated DSN is
            # tried within seconds of arriving, not after a delay doubled for minutes
            "reconnect_timeout": self._wait,
            "kwargs": {"autocommit": True},
        }
        check = ConnectionPool.check_connection
        # `conninfo` is called for every new connection: the DSN in use at that moment
        self.pool = ConnectionPool(
            self.conninfo, min_size=1, check=check, name=f"{field}-sync", **common
        )
        check_async = AsyncConnectionPool.check_connection
        self.lock_pool = AsyncConnectionPool(
            self.conninfo, min_size=0, check=check_async, name=f"{field}-locks", **common
        )
        self._opened = False
        self._lock_pool_opened = False

    @classmethod
    def configured(cls, conn: PostgresConnection, field: str) -> Database:
        """The Database of a configured connection, its DSN read from its secret now."""
        return cls(_dsn_of(conn, field), **_settings_of(conn, field))

    def __deepcopy__(self, memo: dict[int, Any]) -> Database:
        """The same Database: it is a handle on pools, and a copied config that holds it
        (mem0 copies its store config for the entity store) must share them."""
        return self

    @property
    def dsn(self) -> str:
        return self._dsn

    def conninfo(self) -> str:
        """The connection string a new connection opens with now (the pools call this)."""
        return self._conninfo

    def _conninfo_of(self, dsn: str) -> str:
        try:
            return make_conninfo(dsn, **self._connection_options)
        except psycopg.ProgrammingError:
            # the parser's message can quote the DSN, password included: never show it
            raise ConfigError(f"{self.field}.dsn: not a PostgreSQL connection string") from None

    def use_dsn(self, dsn: str) -> None:
        """Open every new connection of both pools with `dsn` from now on (a rotated
        password or user); the connections already open keep working until they close.

        A DSN that cannot be parsed, or that names another server or database, is refused
        with a ConfigError naming the field (never the value): moving a running service to
        another database would leave its connections on two."""
        conninfo = self._conninfo_of(dsn)
        if _where(conninfo) != _where(self._conninfo):
            raise ConfigError(
                f"{self.field}.dsn: the new DSN names another server or database (host, "
                "port or database name); a running service keeps the one it started with: "
                "restart it to move"
            )
        self._earlier_dsn, self._dsn, self._conninfo = self._dsn, dsn, conninfo

    def describe(self, exc: BaseException) -> str:
        text = describe(exc, self._dsn)
        return _scrub(text, self._earlier_dsn) if self._earlier_dsn else text

    def open(self) -> None:
        """Start the pools (their connections open in the background, retrying)."""
        if not self._opened:
            self.pool.open(wait=False)
            self._opened = True

    async def open_async(self) -> None:
        """Start both pools, once (every advisory lock calls this)."""
        self.open()
        if not self._lock_pool_opened:
            await self.lock_pool.open(wait=False)
            self._lock_pool_opened = True

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection; errors become DatabaseUnavailable when the
        database itself is the problem (unreachable, shut down, wrong password)."""
        self.open()
        try:
            with self.pool.connection(timeout=timeout) as connection:
                yield connection
        except PoolTimeout:  # an OperationalError too: no reason in it
            raise DatabaseUnavailable(f"{self.field}: {self._why_no_connection()}") from None
        except psycopg.errors.QueryCanceled as exc:  # an OperationalError too
            raise DatabaseUnavailable(
                f"{self.field}: a statement ran longer than the statement timeout "
                f"({self.statement_timeout_ms} ms): {self.describe(exc)}"
            ) from None
        except psycopg.OperationalError as exc:  # unreachable, shut down, refused login
            raise DatabaseUnavailable(f"{self.field}: {self.describe(exc)}") from None

    def _why_no_connection(self) -> str:
        """The pool gives no reason when it cannot connect: open one connection to learn it."""
        try:
            psycopg.connect(self.conninfo()).close()
        except psycopg.Error as exc:
            return self.describe(exc)
        return f"all {self.pool.max_size} pooled connections stayed busy for {self._wait:.0f} s"

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self.connection() as connection, connection.transaction():
            yield connection

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """One statement on a pooled connection; its rows (none for a command)."""
        with self.connection() as connection:
            cursor = connection.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def check(self) -> None:
        """Raise DatabaseUnavailable unless the database answers now (readiness)."""
        with self.connection(timeout=self._connect_timeout) as connection:
            connection.execute("SELECT 1")

    def migrate(self, migrations: Sequence[Migration]) -> list[str]:
        """Apply what is missing, in order, each in its own transaction, under one advisory
        lock: replicas starting together apply each step once, and a step is never half
        applied. Returns the steps applied here."""
        applied: list[str] = []
        with self.connection() as connection:
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
                    "component text NOT NULL, version integer NOT NULL, name text NOT NULL, "
                    "applied_at timestamptz NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (component, version))"
                )
            for step in migrations:
                with connection.transaction():
                    connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    done = connection.execute(
                        f"SELECT 1 FROM {MIGRATIONS_TABLE} WHERE component = %s AND version = %s",
                        (step.component, step.version),
                    ).fetchone()
                    if done:
                        continue
                    connection.execute(step.sql.encode())
                    connection.execute(
                        f"INSERT INTO {MIGRATIONS_TABLE} (component, version, name) "
                        "VALUES (%s, %s, %s)",
                        (step.component, step.version, step.name),
                    )
                    applied.append(f"{step.component} {step.version}: {step.name}")
                    log.info("database migration applied: %s %d (%s)", *_step(step))
        return applied

    @asynccontextmanager
    async def try_advisory(self, name: str) -> AsyncIterator[bool]:
        """The session advisory lock `name` if it is free now (True while the body runs),
        else False at once: a role one replica holds (the embedder migration's) for as long
        as it lives; if it dies, PostgreSQL drops the connection and the lock with it."""
        key = lock_id(name)
        await self.open_async()
        async with self.lock_pool.connection() as connection:
            row = await (
                await connection.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            ).fetchone()
            held = bool(row and row[0])
            try:
                yield held
            finally:
                if held:
                    try:
                        await connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
                    except psycopg.Error:
                        log.warning("advisory lock %s: released by a lost connection", key)

    @asynccontextmanager
    async def advisory(self, *names: str) -> AsyncIterator[None]:
        """Hold the session advisory locks `names` across replicas while the body runs.

        On one connection of its own, taken in one order (by lock id) so two holders of
        overlapping sets cannot deadlock, released on exit; if this process dies, PostgreSQL
        drops the connection and so the locks. Waiting holds a connection, not a thread."""
        keys = sorted({lock_id(name) for name in names})
        await self.open_async()
        try:
            async with self.lock_pool.connection() as connection:
                held: list[int] = []
                try:
                    for key in keys:
                        await connection.execute("SELECT pg_advisory_lock(%s)", (key,))
                        held.append(key)
                    yield
                finally:
                    for key in reversed(held):
                        try:
                            await connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
                        except psycopg.Error:  # the connection broke: PostgreSQL dropped it
                            log.warning("advisory lock %s: released by a lost connection", key)
                            break
        except PoolTimeout:
            why = await asyncio.to_thread(self._why_no_connection)
            raise DatabaseUnavailable(f"{self.field}: {why}") from None
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(f"{self.field}: {self.describe(exc)}") from None

    def close(self) -> None:
        """Close the blocking pool (after `aclose` in a loop)."""
        self.pool.close()

    async def aclose(self) -> None:
        """Close the lock pool (in the loop that used it), then the rest."""
        await self.lock_pool.close()
        self.close()


def configured(cfg: ServiceConfig) -> tuple[Database | None, Database | None]:
    """The Databases a service config names: history's and the vector store's (None where
    the config names none), one object when both are the same database."""
    history = (
        Database.configured(cfg.history.postgres, "history.postgres")
        if cfg.history.postgres is not None
        else None
    )
    vectors = cfg.vector_store.postgres
    if vectors is None:
        return history, None
    if vectors.database is None:  # the history's database (ServiceConfig requires one)
        return history, history
    field = "vectorStore.postgres.database"
    if history is not None and _dsn_of(vectors.database, field) == history.dsn:
        return history, history
    return history, Database.configured(vectors.database, field)


def _dsn_of(conn: PostgresConnection, field: str) -> str:
    return conn.dsn.resolve(f"{field}.dsn").get_secret_value()


def _settings_of(conn: PostgresConnection, field: str) -> dict[str, Any]:
    """Database's keyword arguments for a configured connection (all but the DSN)."""
    return {
        "field": field,
        "pool_size": conn.pool_size,
        "statement_timeout_seconds": conn.statement_timeout_seconds,
        "connect_timeout_seconds": conn.connect_timeout_seconds,
    }


def _step(step: Migration) -> tuple[str, int, str]:
    return step.component, step.version, step.name


class ReplicaLocks:
    """`KeyedLocks` across replicas: the in-process lock first, then PostgreSQL's advisory
    lock of the same key, so at most one connection per key and process waits.

    `exclusive()` (a backup's pause) stays in-process: backups of a PostgreSQL store are the
    database's own (see service/portability/backup/)."""

    def __init__(self, database: Database, namespace: str) -> None:
        self._local = KeyedLocks()
        self._database = database
        self._namespace = namespace

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        name = f"{self._namespace}:{lock_name(key)}"
        async with self._local.hold(key), self._database.advisory(name):
            yield

    @asynccontextmanager
    async def hold_many(self, keys: Sequence[Hashable]) -> AsyncIterator[None]:
        """Every key at once: the in-process locks, then all advisory locks on one
        connection (a request's hundred texts must not take a hundred connections)."""
        names = [f"{self._namespace}:{lock_name(key)}" for key in keys]
        async with self._local.hold_many(keys), self._database.advisory(*names):
            yield

    def exclusive(self) -> AbstractAsyncContextManager[None]:
        return self._local.exclusive()
