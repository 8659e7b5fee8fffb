"""What the erasure tests share: marker texts, searching a data directory and a PostgreSQL
database for them byte by byte, and a real `memorystore serve` process to erase in and kill.

A marker is a made-up word (some with a non-ASCII letter) that appears nowhere but in what a
test wrote, so finding its bytes anywhere means a copy survived. Each is searched in every
form a store may have written it: UTF-8, UTF-16 (either byte order), JSON-escaped
(`\\u00f6`), lower-cased, and as PostgreSQL prints a row (backslashes doubled).
"""

from __future__ import annotations

import contextlib
import json
import random
import string
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import yaml
from psycopg import sql

from memorystore.config import ServiceLLM
from memorystore_dev.replicas import ServiceProcess, Tier, write_config

__all__ = [
    "Served",
    "forms",
    "in_database",
    "killed_during",
    "marker",
    "on_disk",
    "served",
    "service_config",
]


def marker(rng: random.Random, accented: bool = False) -> str:
    """A made-up lower-case word, 12 letters (one of them `ö` when `accented`)."""
    letters = "".join(rng.choice(string.ascii_lowercase) for _ in range(12))
    return f"{letters[:6]}ö{letters[6:]}" if accented else letters


def forms(text: str) -> set[bytes]:
    """Every byte form a store may have kept `text` in."""
    found: set[bytes] = set()
    for variant in {text, text.lower(), text.casefold()}:
        escaped = json.dumps(variant)[1:-1]
        found |= {
            variant.encode("utf-8"),
            variant.encode("utf-16-le"),
            variant.encode("utf-16-be"),
            escaped.encode("ascii"),
            escaped.replace("\\", "\\\\").encode("ascii"),
        }
    return found


_CHUNK = 1 << 16
_ZEROS = bytes(_CHUNK)
_MARGIN = 256  # longer than any form: a form that ends in a page of zeros is still whole


def _written(data: bytes) -> bytes:
    """`data` without its pages of zeros (the engine's files are mostly preallocated zeros),
    the written parts joined by 0xFF, a byte no form of a marker holds."""
    parts = []
    for start in range(0, len(data), _CHUNK):
        if data[start : start + _CHUNK] != _ZEROS[: len(data) - start]:
            parts.append(data[max(0, start - _MARGIN) : start + _CHUNK + _MARGIN])
    return b"\xff".join(parts)


def on_disk(root: Path, texts: Iterable[str]) -> dict[str, list[str]]:
    """Which of `texts` some file under `root` holds, and where (paths relative to root)."""
    wanted = {text: forms(text) for text in texts}
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        data = _written(path.read_bytes())
        for text, variants in wanted.items():
            if any(v in data for v in variants):
                found.setdefault(text, []).append(str(path.relative_to(root)))
    return found


def in_database(dsn: str, texts: Iterable[str]) -> dict[str, list[str]]:
    """Which of `texts` a row of any table of the database holds, and in which tables."""
    wanted = {text: [v.decode("utf-8", "ignore") for v in forms(text)] for text in texts}
    found: dict[str, list[str]] = {}
    with psycopg.connect(dsn) as db:
        tables = db.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
            "AND table_type = 'BASE TABLE'"
        ).fetchall()
        for schema, table in tables:
            query = sql.SQL("SELECT t::text FROM {}.{} t").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            rows = [str(row[0]) for row in db.execute(query).fetchall()]
            for text, variants in wanted.items():
                if any(v and v in row for row in rows for v in variants):
                    found.setdefault(text, []).append(f"{schema}.{table}")
    return found


def service_config(
    directory: Path, dsn: str | None, tier: Tier = "embedded", llm: ServiceLLM | None = None
) -> Path:
    """A `memorystore serve` config (replicas.write_config's), with an extraction model."""
    path = write_config(directory, dsn, tier)
    if llm is not None:
        config = yaml.safe_load(path.read_text())
        config["llm"] = llm.model_dump(mode="json", by_alias=True, exclude_none=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class Served:
    """One `memorystore serve` process and a client of it; `restart()` after a kill."""

    def __init__(self, config: Path, directory: Path, name: str = "svc") -> None:
        self.process = ServiceProcess(config, directory, "k-" + "x" * 30, name)
        self.data = directory / name
        self.http = httpx.Client(
            base_url=self.process.url,
            headers={"Authorization": f"Token {self.process.api_key}"},
            timeout=120,
        )

    def restart(self) -> None:
        self.process.kill()
        self.process.start()

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.http.request(method, path, **kwargs)


@contextmanager
def served(config: Path, directory: Path, name: str = "svc") -> Iterator[Served]:
    service = Served(config, directory, name)
    service.process.start()
    try:
        yield service
    finally:
        service.http.close()
        service.process.stop()


def killed_during(
    svc: Served,
    work: Callable[[], object],
    moment: Callable[[], bool],
    limit_s: float = 60,
    poll_s: float = 0.0005,
) -> bool:
    """Run `work` (requests to the service) in a thread and SIGKILL the service the moment
    `moment()` holds (polled every `poll_s`; an error while polling counts as not yet);
    False when `work` finished first. `work`'s own failure (the kill) is swallowed."""
    finished = threading.Event()

    def run() -> None:
        with contextlib.suppress(Exception):  # the connection the kill cut, or its answer
            work()
        finished.set()

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + limit_s
    killed = False
    while not finished.is_set() and time.monotonic() < deadline:
        try:
            hit = moment()
        except Exception:
            hit = False
        if hit and not finished.is_set():
            svc.process.kill()
            killed = True
            break
        time.sleep(poll_s)
    thread.join(30)
    return killed
