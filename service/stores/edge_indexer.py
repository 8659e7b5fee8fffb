"""The child process that builds an embedded shard's HNSW graph (`EdgeVectorStore.build_index`).

Its own process because the engine's `optimize()` holds the GIL for its whole run, and the
shard's WAL lock admits one process: it works on a copy the service made, and the service
swaps the copy in. Imports nothing but the engine, so it costs the pod little memory beside
the graph itself. It dies with the service (PR_SET_PDEATHSIG): a service killed mid-build
leaves no child writing into a copy the next start deletes and a later build remakes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

import qdrant_edge as qe

__all__ = ["main"]


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def main(argv: list[str]) -> int:
    """Optimize the shard at argv[0] for the process argv[1] (its persisted config holds the
    graph's shape)."""
    if len(argv) != 2 or not argv[1].isdigit():
        print(
            "usage: python -m memorystore.service.stores.edge_indexer SHARD_DIR PARENT_PID",
            file=sys.stderr,
        )
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        print(f"prctl: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 1
    if os.getppid() != int(argv[1]):  # the service died before prctl took effect
        return 1
    shard = qe.EdgeShard.load(argv[0])
    try:
        shard.optimize()
        shard.flush()
    finally:
        shard.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
