"""The vector tiers a retrieval bench runs side by side (`--tier embedded,managed,postgres`).

`embedded`: the Qdrant engine in the service's process, the SQLite history. `managed`: the
vectors on a real Qdrant server (the vendored binary, memorystore_dev.qdrant, with an API
key), as the operator's managed tier runs it, a fresh collection per configuration.
`postgres`: the service's state and vectors in a real PostgreSQL (pgvector), a fresh database
per configuration. The servers start once per run. Results are named `<config>@<tier>` when
more than the embedded tier runs, so every table shows the tiers side by side.
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from memorystore.config import (
    PostgresConnection,
    PostgresVectors,
    SecretSource,
    ServiceConfig,
    ServiceHistory,
    ServiceVectorStore,
)
from memorystore.service.ops.runner import embedded_config
from memorystore_dev.postgres import PostgresServer, dsn_file
from memorystore_dev.qdrant import QdrantServer

TIERS = ("embedded", "managed", "postgres")


def tier_problem(tiers: list[str]) -> str | None:
    unknown = [t for t in tiers if t not in TIERS]
    if unknown:
        return f"--tier: unknown tier(s) {unknown}: choose from {', '.join(TIERS)}"
    if not tiers:
        return "--tier: name at least one tier"
    return None


class Tiers:
    """`with Tiers(["embedded", "postgres"]) as tiers:` → `tiers.config(tier, dir, …)`."""

    def __init__(self, tiers: list[str]) -> None:
        self.names = list(dict.fromkeys(tiers))
        self._stack = ExitStack()
        self._server: PostgresServer | None = None
        self._qdrant: QdrantServer | None = None

    def __enter__(self) -> Self:
        try:
            if "postgres" in self.names:
                self._server = self._stack.enter_context(PostgresServer())
            if "managed" in self.names:
                self._qdrant = self._stack.enter_context(QdrantServer())
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.close()

    def label(self, config: str, tier: str) -> str:
        return config if self.names == ["embedded"] else f"{config}@{tier}"

    def config(self, tier: str, data_dir: Path, **fields: Any) -> ServiceConfig:
        """The service config of one run on `tier` (the embedded default, a Qdrant server,
        or PostgreSQL)."""
        if tier == "embedded":
            return embedded_config(data_dir, **fields)
        if tier == "managed" and self._qdrant is not None:
            collection = f"bench_{uuid.uuid4().hex[:12]}"
            vectors = ServiceVectorStore(
                server=self._qdrant.service_config(), collection=collection
            )
            return embedded_config(data_dir, vector_store=vectors, **fields)
        if tier != "postgres" or self._server is None:
            raise ValueError(f"tier {tier!r} is not among this run's tiers {self.names}")
        secret = dsn_file(data_dir, self._server.database(f"bench_{uuid.uuid4().hex[:12]}"))
        state = PostgresConnection(dsn=SecretSource(file=str(secret)))
        return embedded_config(
            data_dir,
            history=ServiceHistory(postgres=state),
            vector_store=ServiceVectorStore(postgres=PostgresVectors()),
            **fields,
        )
