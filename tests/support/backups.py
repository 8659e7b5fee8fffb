"""What the backup tests share: stores to back up, the backup key, editing a backup the way
an attacker with (or without) the key would, and a restore run in its own process with its
peak memory read back.

A test's stores all sign and verify with one key file (`signing_key_file`), as a cluster's
store and its restore container share the mounted backup-key Secret.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import yaml

from memorystore.config import SecretSource, ServiceBackup, ServiceConfig
from memorystore.service.ops.runner import ServiceThread, embedded_config
from memorystore.service.portability import backup
from memorystore.service.portability.backup import signing

__all__ = [
    "FACTS",
    "QUERIES",
    "Served",
    "answers",
    "backed_up",
    "client",
    "command",
    "fill",
    "fill_raw",
    "read_lines",
    "reseal",
    "restore_args",
    "restore_process",
    "serve",
    "signing_key_file",
    "store_config",
    "write_config",
    "write_lines",
]

FACTS = {
    "alice": [
        "I live in Hangzhou.",
        "I make my charts with matplotlib.",
        "My favourite colour is green.",
        "我每天早上喝一杯美式咖啡。",
    ],
    "bob": ["I work at Initech as a tester.", "I prefer tea to coffee."],
}
QUERIES = {
    "alice": ["where do I live", "charting library", "coffee", "colour"],
    "bob": ["employer", "drinks"],
}


def client(svc: ServiceThread) -> httpx.Client:
    headers = {"Authorization": f"Token {svc.api_key}"}
    return httpx.Client(base_url=svc.url, headers=headers, timeout=120)


def signing_key_file(tmp: Path) -> Path:
    """The backup key every store of one test signs and verifies with, made once."""
    path = tmp / "backup-signing-key"
    if not path.exists():
        path.write_text("test-backup-signing-key-0123456789abcdef\n")
    return path


def store_config(tmp: Path, name: str, target: Path | None = None, **extra: Any) -> ServiceConfig:
    """The embedded default in `tmp/name`; with `target`, backups go there, signed with
    the test's key."""
    key = tmp / "api-key"
    if not key.exists():
        key.write_text("backup-test-key-0123456789abcdef\n")
    cfg = embedded_config(tmp / name, key_file=key, **extra)
    if target is not None:
        signing_key = SecretSource(file=str(signing_key_file(tmp)))
        cfg.backup = ServiceBackup(path=str(target), signing_key=signing_key)
    return cfg


def write_config(cfg: ServiceConfig, path: Path) -> Path:
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return path


def fill(http: httpx.Client) -> None:
    """Facts of two users, a conversation turn pair, a retirement, an update and a pending
    session exchange: every kind of record a backup holds."""
    for user, facts in FACTS.items():
        for fact in facts:
            body = {"messages": [{"role": "user", "content": fact}], "user_id": user}
            assert http.post("/v1/memories/", json={**body, "infer": False}).status_code == 200
    turn = [
        {"role": "user", "content": "We talked about the Q3 launch plan today."},
        {"role": "assistant", "content": "Yes, the launch moves to October."},
    ]
    body = {"messages": turn, "user_id": "alice", "run_id": "s0", "infer": False}
    assert http.post("/v1/memories/", json=body).status_code == 200
    # a retirement: the newer residence replaces the older one (kept, marked retired)
    moved = {"messages": [{"role": "user", "content": "I moved to Shanghai."}], "user_id": "alice"}
    events = http.post("/v1/memories/", json={**moved, "infer": False}).json()["results"]
    assert any(e["event"] == "DELETE" for e in events), events
    # an update, so a memory has two history events
    listed = http.post("/v3/memories/", json={"user_id": "bob"}).json()["results"]
    tea = next(m for m in listed if "tea" in m["memory"])
    assert http.put(f"/v1/memories/{tea['id']}/", json={"text": "I prefer green tea."}).is_success
    # a session exchange still pending (journalled, not consolidated)
    exchange = {
        "messages": [{"role": "user", "content": "My dog is called Biscuit."}],
        "user_id": "carol",
    }
    assert http.post("/v1/sessions/walk/exchanges/", json=exchange).status_code == 200


def backed_up(tmp: Path, name: str = "base") -> Path:
    """A store in `tmp` filled (`fill`) and backed up as `name` through the API: the
    backup's directory (signed with `signing_key_file(tmp)`)."""
    target = tmp / "backups"
    target.mkdir()
    with ServiceThread(store_config(tmp, "store", target)) as svc, client(svc) as http:
        fill(http)
        assert http.post("/v1/backups/", json={"name": name}).status_code == 200
    return target / name


def fill_raw(cfg: ServiceConfig, n: int) -> None:
    """`n` memories of 50 users written straight into the stopped store (as the backup
    benchmark does: a few hundred texts embedded for real, reused with noise), so a backup
    or a restore takes long enough to be interrupted."""
    from memorystore.service.engine.core import MemoryEngine
    from memorystore_dev.bench.backup import fill as bench_fill

    engine = MemoryEngine(cfg)
    try:
        bench_fill(engine, n)
    finally:
        engine.close()


def answers(http: httpx.Client) -> dict[str, Any]:
    """What the store answers: searches (ids and scores), listings, retired ones, history."""
    seen: dict[str, Any] = {"search": {}, "list": {}, "history": {}}
    for user, queries in QUERIES.items():
        for query in queries:
            hits = http.post(
                "/v3/memories/search/", json={"query": query, "user_id": user, "top_k": 5}
            ).json()["results"]
            seen["search"][(user, query)] = [(h["id"], round(h["score"], 5)) for h in hits]
        for retired in (False, True):
            rows = http.post(
                "/v3/memories/", json={"user_id": user, "include_retired": retired}
            ).json()["results"]
            seen["list"][(user, retired)] = sorted(
                (r["id"], r["memory"], r["created_at"], r["updated_at"]) for r in rows
            )
            for r in rows:
                history = http.get(f"/v1/memories/{r['id']}/history/").json()
                seen["history"][r["id"]] = [(h["event"], h["created_at"]) for h in history]
    return seen


# --- editing a backup ---------------------------------------------------------------------------


def read_lines(backup_dir: Path) -> list[bytes]:
    with gzip.open(backup_dir / backup.MEMORIES, "rb") as lines:
        return list(lines)


def write_lines(backup_dir: Path, lines: list[bytes]) -> None:
    with gzip.open(backup_dir / backup.MEMORIES, "wb") as out:
        for line in lines:
            out.write(line)


def reseal(backup_dir: Path, key_file: Path | None, **manifest: Any) -> None:
    """Make the manifest agree with the files as they now are (sizes, checksums, `manifest`
    fields given), then sign it with `key_file`, or leave it unsigned (None): what someone
    who edited the files and holds (or does not hold) the key would do."""
    import hashlib

    path = backup_dir / backup.MANIFEST
    body = json.loads(path.read_text())
    for name in body["files"]:
        data = (backup_dir / name).read_bytes()
        body["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    body.update(manifest)
    text = (json.dumps(body, indent=2) + "\n").encode()
    path.write_bytes(text)
    signature = backup_dir / backup.SIGNATURE
    if key_file is None:
        signature.unlink(missing_ok=True)
    else:
        signature.write_bytes(signing.sign(text, key_file.read_text().strip().encode()))


# --- a restore in its own process -------------------------------------------------------------

_PEAK = """
import sys
from memorystore.cli import main
try:
    code = main(sys.argv[1:])
finally:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print("PEAK-RSS", int(line.split()[1]) * 1024, file=sys.stderr)
sys.exit(code)
"""


def restore_args(config: Path, source: Path, key: Path, *extra: str) -> list[str]:
    """`memorystore restore`'s arguments for this config, backup and key."""
    return ["restore", "--config", str(config), "--from", str(source), "--key", str(key), *extra]


def restore_cli(
    config: Path, source: Path, key: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`memorystore restore` as an operator's init container runs it (output captured)."""
    return subprocess.run(
        command(*restore_args(config, source, key, *extra)),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MEM0_TELEMETRY": "False"},
    )


def every(http: httpx.Client, **scope: str) -> dict[str, dict[str, Any]]:
    """Every memory of a scope, retired ones too, by id."""
    body = {**scope, "include_retired": True}
    page = http.post("/v3/memories/?page_size=100", json=body).raise_for_status().json()
    return {m["id"]: m for m in page["results"]}


def restore_process(
    config: Path, source: Path, key: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], int]:
    """`memorystore restore` in a process of its own; (the run, its peak resident set)."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *restore_args(config, source, key, *extra)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MEM0_TELEMETRY": "False"},
    )
    peaks = [
        int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("PEAK-RSS")
    ]
    return done, peaks[-1] if peaks else 0


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memorystore", *args]


class Served:
    """`memorystore serve` in its own process (to be killed with SIGKILL)."""

    def __init__(self, cfg: ServiceConfig, config: Path, log: Path) -> None:
        self.cfg = cfg
        self.url = f"http://127.0.0.1:{cfg.listen.port}"
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                command("serve", "--config", str(config)),
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "MEM0_TELEMETRY": "False"},
            )

    def wait_ready(self) -> None:
        from memorystore.service.ops.runner import wait_until_ready

        try:
            wait_until_ready(self.url, self.process, 180)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{self.log.read_text()[-3000:]}") from None

    def http(self) -> httpx.Client:
        key = self.cfg.api_key.resolve("apiKey").get_secret_value()
        headers = {"Authorization": f"Token {key}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def serve(cfg: ServiceConfig, tmp: Path, name: str) -> Served:
    """Start `memorystore serve` for `cfg` on a free port (not waiting for it)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cfg = cfg.model_copy(update={"listen": cfg.listen.model_copy(update={"port": port})})
    return Served(cfg, write_config(cfg, tmp / f"{name}.yaml"), tmp / f"{name}.log")
