"""The operator as a child process (benchmarks and tests run it exactly as users do)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memorystore.operator.settings import RESYNC_SECONDS
from memorystore_dev.devcluster.cluster import free_port


def start_operator(
    kubeconfig: Path,
    namespace: str | None,
    log: Path,
    resync_seconds: float | None = None,
    metrics_port: int = 0,
    liveness_port: int | None = None,
    base_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`memorystore operator --namespace NS` (`--all-namespaces` for None), output appended to
    `log` (never a pipe: a pipe nobody drains blocks the operator once it fills). `base_env`
    replaces this process's environment (a previous release's: `previous_release`)."""
    env = {**(os.environ if base_env is None else base_env), "KUBECONFIG": str(kubeconfig)}
    if resync_seconds is not None:
        env[RESYNC_SECONDS] = str(resync_seconds)
    argv = [
        sys.executable,
        "-m",
        "memorystore",
        "operator",
        *(["--all-namespaces"] if namespace is None else ["--namespace", namespace]),
        "--metrics-port",
        str(metrics_port),
        "--liveness",
        f"http://127.0.0.1:{liveness_port or free_port()}/healthz",
    ]
    with log.open("a") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop_operator(proc: subprocess.Popen[bytes], grace: float = 30) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace)
