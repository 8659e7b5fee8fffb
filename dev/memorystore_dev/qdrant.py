"""A real Qdrant server (and a three-node cluster) for the tests and benches, from the vendored
binary (`../shared/vendor/qdrant/`, memorystore_dev.vendor).

Why run it this way: it is the managed tier's engine, started as the operator's StatefulSet
starts it (operator/builders/qdrant.py): always distributed (`cluster.enabled`, a peer-to-peer
port), the first peer with `--uri` alone and every other one with `--bootstrap <first> --uri
<self>`, the API key in a `--config-path` file (never a variable), storage and snapshots in
directories of its own. Optionally TLS from a throwaway CA on the REST, gRPC and peer ports.

- on 127.0.0.1, free ports, a fresh root directory per server (removed when it stops);
- stopped by PID: SIGTERM, then SIGKILL after a timeout; `kill()` is the SIGKILL of a crash
  and `start()` again restarts it on the same ports and storage;
- `QdrantCluster(3)`: three peers bootstrapped from the first, for replication tests.

Not a product component: the service only ever receives a URL, a key file and a CA file.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from memorystore.config import SecretSource, ServerQdrant
from memorystore_dev.devcluster.cluster import free_port
from memorystore_dev.devcluster.pki import PKI, Pair
from memorystore_dev.vendor import qdrant_binary

__all__ = ["QdrantCluster", "QdrantError", "QdrantServer"]

READY_TIMEOUT = 60.0
PORT_RETRIES = 3


class QdrantError(RuntimeError):
    """The server could not start or stop; the message holds its log's tail."""


class _Running:
    """`with` starts it and closes it; a start that fails closes what it started."""

    def _start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class QdrantServer(_Running):
    """`with QdrantServer() as qdrant:` → `qdrant.url`, `qdrant.api_key`, `qdrant.ca`
    (the CA file when `tls`), `qdrant.client()`. `bootstrap` is the first peer's `p2p_uri`
    (QdrantCluster passes it); `pki` a CA shared by a cluster's peers; `reissue` rotates the
    certificate in place."""

    def __init__(
        self,
        *,
        tls: bool = False,
        api_key: str | None = None,
        bootstrap: str | None = None,
        pki: PKI | None = None,
        root: Path | None = None,
        name: str = "qdrant",
        cert_ttl: int = 3600,
    ) -> None:
        self.name = name
        self.cert_ttl = cert_ttl  # how often Qdrant re-reads its certificate files, seconds
        self.tls_pair: Pair | None = None
        self.api_key = api_key if api_key is not None else secrets.token_urlsafe(24)
        self.tls = tls
        self.bootstrap = bootstrap
        self._own_root = root is None
        self.root = root if root is not None else Path(tempfile.mkdtemp(prefix="ms-qdrant-"))
        self.http_port, self.grpc_port, self.p2p_port = free_port(), free_port(), free_port()
        self._pki = pki if pki is not None or not tls else PKI(self.root / "pki")
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0  # where this start's lines begin in the log
        self._ever_ready = False
        self._port_retries = 0
        self._write_config()

    # --- where it is ---------------------------------------------------------------------

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.http_port}"

    @property
    def p2p_uri(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.p2p_port}"

    @property
    def ca(self) -> Path | None:
        return self._pki.ca.cert if self._pki is not None else None

    @property
    def log_file(self) -> Path:
        return self.root / "qdrant.log"

    @property
    def storage(self) -> Path:
        return self.root / "storage"

    @property
    def snapshots(self) -> Path:
        return self.root / "snapshots"

    def key_file(self) -> Path:
        """The API key as a file, the way the service reads it (a mounted Secret)."""
        path = self.root / "api-key"
        if not path.exists():
            path.write_text(self.api_key + "\n")
            path.chmod(0o600)
        return path

    def service_config(self, ca: Path | None = None, **fields: Any) -> ServerQdrant:
        """What the memory service is given to reach this server (`vectorStore.server`): its
        URL, the key as a file and, with TLS, the CA as a file (`ca` another one); `fields`
        are the layout's (shard_number, replication_factor)."""
        ca = ca if ca is not None else self.ca
        return ServerQdrant(
            url=self.url,
            api_key=SecretSource(file=str(self.key_file())),
            ca=SecretSource(file=str(ca)) if ca is not None else None,
            **fields,
        )

    @functools.cached_property
    def _context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=str(self.ca)) if self.ca is not None else None

    def verify(self) -> ssl.SSLContext | bool:
        """What a client verifies the server with: the CA when `tls` (one context, built once:
        `ready` polls with it)."""
        return self._context or True

    def client(self, timeout: float = 30.0) -> Any:
        """A qdrant-client QdrantClient for this server (REST, the key, the CA)."""
        from qdrant_client import QdrantClient

        verify = self.verify()
        return QdrantClient(url=self.url, api_key=self.api_key, timeout=int(timeout), verify=verify)

    def http(self, timeout: float = 10.0) -> httpx.Client:
        """An httpx client with the key and the CA, for REST calls qdrant-client lacks."""
        verify = self.verify()
        return httpx.Client(
            base_url=self.url, headers={"api-key": self.api_key}, verify=verify, timeout=timeout
        )

    def drop_collections(self) -> None:
        """Delete every collection, so tests sharing one server start alike."""
        with self.http() as http:
            listed = http.get("/collections").raise_for_status().json()["result"]["collections"]
            for collection in listed:
                http.delete(f"/collections/{collection['name']}").raise_for_status()

    # --- life ---------------------------------------------------------------------------

    def _write_config(self) -> None:
        """The config file `--config-path` reads: the StatefulSet's settings, plus the ports
        and paths this machine needs (the pod has fixed ones)."""
        config: dict[str, Any] = {
            "log_level": "WARN",
            "telemetry_disabled": True,
            "storage": {"storage_path": str(self.storage), "snapshots_path": str(self.snapshots)},
            "service": {
                "host": "127.0.0.1",
                "http_port": self.http_port,
                "grpc_port": self.grpc_port,
                "api_key": self.api_key,
                "enable_tls": self.tls,
            },
            "cluster": {"enabled": True, "p2p": {"port": self.p2p_port, "enable_tls": self.tls}},
        }
        if self._pki is not None and self.tls:
            pair = self._issue(self._pki)
            self.tls_pair = pair
            config["tls"] = {
                "cert": str(pair.cert),
                "key": str(pair.key),
                "ca_cert": str(self._pki.ca.cert),
                "cert_ttl": self.cert_ttl,
            }
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "config.yaml"  # JSON is YAML; Qdrant reads .yaml, not .json
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)

    def _issue(self, pki: PKI) -> Pair:
        names = ["127.0.0.1", "localhost"]
        stem = f"{self.name}-{self.http_port}"
        return pki.issue(stem, self.name, server_names=names, client_too=True)

    def reissue(self, pki: PKI) -> None:
        """Replace the certificate and key files in place with ones `pki` issues, as kubelet
        updates a mounted Secret: the running server picks them up within `cert_ttl`."""
        assert self.tls_pair is not None, "reissue needs a TLS server"
        fresh = self._issue(pki)
        for source, target in ((fresh.key, self.tls_pair.key), (fresh.cert, self.tls_pair.cert)):
            staged = target.with_suffix(".new")
            staged.write_bytes(source.read_bytes())
            staged.chmod(0o600)
            staged.replace(target)

    def start(self, wait: bool = True) -> None:
        """Start (or restart on the same ports and storage); wait for /readyz unless told not."""
        if self.proc is not None and self.proc.poll() is None:
            raise QdrantError(f"{self.name} already runs (pid {self.proc.pid})")
        argv = [
            str(qdrant_binary()),
            "--config-path",
            str(self.root / "config.yaml"),
            "--uri",
            self.p2p_uri,
        ]
        if self.bootstrap is not None:
            argv += ["--bootstrap", self.bootstrap]
        env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT")}
        env["QDRANT_INIT_FILE_PATH"] = str(self.root / ".qdrant-initialized")
        self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("a") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if wait:
            self.wait_ready()

    def ready(self) -> bool:
        """/readyz answers 200 (it needs no key, as the probes rely on)."""
        verify = self.verify()
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1, verify=verify).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until /readyz answers. A port another process took between `free_port` and the
        first start (Qdrant logs it and keeps running without that listener) is picked
        again, up to PORT_RETRIES times; a restart keeps its ports (peers know them)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._port_taken() and not self._ever_ready and self._port_retries < PORT_RETRIES:
                self._port_retries += 1
                self.kill()
                # it never served: its consensus state names the old peer port, start afresh
                for made in (self.storage, self.snapshots):
                    shutil.rmtree(made, ignore_errors=True)
                (self.root / ".qdrant-initialized").unlink(missing_ok=True)
                self.http_port, self.grpc_port, self.p2p_port = (
                    free_port(),
                    free_port(),
                    free_port(),
                )
                self._write_config()
                self.start(wait=False)
                continue
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise QdrantError(f"{self.name} exited ({code}):\n{self.log_tail()}")
            if self.ready():
                self._ever_ready = True
                return
            time.sleep(0.1)
        raise QdrantError(f"{self.name} not ready in {timeout:.0f} s:\n{self.log_tail()}")

    def _port_taken(self) -> bool:
        try:
            with self.log_file.open("rb") as log:
                log.seek(self._log_offset)
                return b"Address already in use" in log.read()
        except OSError:
            return False

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM by PID, SIGKILL if it has not exited after `timeout`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to flush anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _start(self) -> None:
        self.start()

    def close(self) -> None:
        self.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)


class QdrantCluster(_Running):
    """Three (or `size`) peers on loopback, bootstrapped as the StatefulSet bootstraps pod 0
    and the others; one key and, with `tls`, one CA for all of them."""

    def __init__(self, size: int = 3, *, tls: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ms-qdrant-cluster-"))
        self.api_key = secrets.token_urlsafe(24)
        pki = PKI(self.root / "pki") if tls else None
        first = QdrantServer(
            tls=tls, api_key=self.api_key, pki=pki, root=self.root / "node-0", name="qdrant-0"
        )
        self.nodes = [first] + [
            QdrantServer(
                tls=tls,
                api_key=self.api_key,
                pki=pki,
                bootstrap=first.p2p_uri,
                root=self.root / f"node-{i}",
                name=f"qdrant-{i}",
            )
            for i in range(1, size)
        ]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def service_config(self, **fields: Any) -> ServerQdrant:
        """`QdrantServer.service_config` of the first peer (the others share its key and CA)."""
        return self.nodes[0].service_config(**fields)

    def peers(self, node: int = 0) -> int:
        """How many peers `node` sees in the cluster (its /cluster answer)."""
        with self.nodes[node].http() as http:
            return len(http.get("/cluster").raise_for_status().json()["result"]["peers"])

    def wait_peers(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(self.peers(i) == len(self.nodes) for i in range(len(self.nodes))):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise QdrantError(
            f"the cluster did not form in {timeout:.0f} s:\n"
            + "\n".join(n.log_tail(10) for n in self.nodes)
        )

    def _start(self) -> None:
        self.nodes[0].start()
        for node in self.nodes[1:]:
            node.bootstrap = self.nodes[0].p2p_uri  # its ports, as finally taken
            node.start(wait=False)
        for node in self.nodes[1:]:
            node.wait_ready()
        self.wait_peers()

    def close(self) -> None:
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)
