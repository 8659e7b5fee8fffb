"""The cluster, through kubectl (`$KUBECTL`, else the one on PATH): what the plugin reads and
writes, each call one kubectl command, its error output kept for the message."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KubeError", "Kubectl"]

FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+)")


class KubeError(RuntimeError):
    """A kubectl command failed; the message is kubectl's own."""


@dataclass(frozen=True)
class Kubectl:
    """kubectl with the global flags the plugin was given (`--context`, `--kubeconfig`), in
    one namespace."""

    namespace: str | None = None
    flags: tuple[str, ...] = ()
    binary: str = field(default_factory=lambda: os.environ.get("KUBECTL", "kubectl"))

    def _args(self, args: Sequence[str]) -> list[str]:
        ns = ["--namespace", self.namespace] if self.namespace else []
        return [self.binary, *self.flags, *ns, *args]

    def run(self, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        try:
            done = subprocess.run(
                self._args(args), input=stdin, capture_output=True, text=True, timeout=timeout
            )
        except FileNotFoundError:
            raise KubeError(f"kubectl not found ({self.binary}): set KUBECTL or PATH") from None
        if done.returncode != 0:
            raise KubeError(done.stderr.strip() or f"kubectl {' '.join(args)} failed")
        return done.stdout

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        """One object, or None when it does not exist."""
        try:
            return dict(json.loads(self.run("get", kind, name, "-o", "json")))
        except KubeError as exc:
            if "NotFound" in str(exc) or "not found" in str(exc):
                return None
            raise

    def list(self, kind: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["get", kind, "-o", "json", *(["-l", selector] if selector else [])]
        return list(json.loads(self.run(*args))["items"])

    def create(self, obj: dict[str, Any]) -> None:
        self.run("create", "-f", "-", stdin=json.dumps(obj))

    def patch(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        self.run("patch", kind, name, "--type=merge", "-p", json.dumps(patch))

    def passthrough(self, *args: str) -> int:
        """Run kubectl with the terminal as its own (logs, exec); its exit status."""
        return subprocess.run(self._args(args)).returncode

    @contextlib.contextmanager
    def port_forward(self, target: str, port: int, timeout: float = 30) -> Iterator[int]:
        """`kubectl port-forward TARGET :PORT` for the block; yields the local port. The API
        server carries the connection to the pod (a NetworkPolicy does not apply to it)."""
        proc = subprocess.Popen(
            self._args(["port-forward", target, f":{port}", "--address", "127.0.0.1"]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            out = proc.stdout
            lines: queue.Queue[str] = queue.Queue()
            # kubectl prints the port once it listens; read on a thread, so a kubectl that
            # hangs before it (an API server that never answers) costs `timeout`, not forever
            threading.Thread(target=lambda: lines.put(out.readline()), daemon=True).start()
            try:
                line = lines.get(timeout=timeout)
                hung = False
            except queue.Empty:
                line, hung = f"no answer in {timeout:g} s\n", True
            found = FORWARDING.search(line)
            if found is None:
                proc.kill()
                # a kubectl that exited said why on stderr; a hung one said nothing yet
                error = proc.stderr.read() if proc.stderr and not hung else ""
                raise KubeError(f"port-forward to {target} failed: {(line + error).strip()}")
            yield int(found.group(1))
        finally:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if proc.poll() is None:
                proc.kill()
