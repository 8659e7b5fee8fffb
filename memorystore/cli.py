"""`memorystore`: one command for every component (serve, demo, bench, …)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

from memorystore import __version__
from memorystore.config import ConfigError, ServiceConfig, load_model

EPILOG = """\
examples:
  memorystore serve --config examples/service.yaml     run the memory service
  memorystore demo                                      cross-session memory, offline
  memorystore reindex --config examples/service.yaml   re-index after a settings change
  memorystore backup --config service.yaml --to DIR      back a stopped store up
  memorystore restore --config service.yaml --from DIR   restore into a new store
  memorystore bench service --sizes 1000,10000          latency and throughput table
  memorystore bench agent                               middleware overhead per turn
  memorystore bench locomo --data locomo10.json         recall per retrieval configuration
  memorystore dev cluster                               a local Kubernetes control plane

Configuration reference: docs/reference/service-config.md (the service config file).
"""

# Developer tools, provided by the `memorystore.commands` entry point of memorystore-dev
# (dev/ in the checkout): listed in --help everywhere, runnable only where it is installed.
COMMAND_PLUGINS = "memorystore.commands"
TOOL_COMMANDS = {
    "bench": "benchmarks that print tables",
    "dev": "developer tools: a local Kubernetes control plane",
}


def _service_config(command: str, path: str) -> ServiceConfig | None:
    """The service config file, or None after saying why it is invalid; mem0 is pointed
    at a directory inside the data dir (it reads MEM0_DIR when it is imported)."""
    try:
        cfg = load_model(ServiceConfig, path)
    except ConfigError as exc:
        print(f"memorystore {command}: invalid config: {exc}", file=sys.stderr)
        return None
    os.environ["MEM0_DIR"] = str(Path(cfg.data_dir) / "mem0")
    return cfg


def _serve(args: argparse.Namespace) -> int:
    cfg = _service_config("serve", args.config)
    if cfg is None:
        return 2
    if args.host:
        cfg.listen.host = args.host
    if args.port is not None:
        cfg.listen.port = args.port
    import uvicorn

    from memorystore.service.app import create_app
    from memorystore.service.ops.http_limits import server_options
    from memorystore.service.ops.tls import CertificateReloader

    try:
        # the certificate first: a bad one fails in a moment, not after the model loads
        reloader = CertificateReloader(cfg.tls) if cfg.tls else None
        app = create_app(cfg)
    except ConfigError as exc:
        print(f"memorystore serve: invalid config: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a store or model endpoint that cannot be opened: say which
        print(f"memorystore serve: cannot start: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if reloader is not None:
        reloader.start()  # a renewed certificate (kubelet updates the mount) without restart
    uvicorn.run(
        app,
        host=cfg.listen.host,
        port=cfg.listen.port,
        log_level=args.log_level.lower(),
        access_log=args.access_log,
        ssl_context_factory=(lambda *_: reloader.context) if reloader else None,
        **server_options(cfg.limits),
    )
    return 0


def _reindex(args: argparse.Namespace) -> int:
    cfg = _service_config("reindex", args.config)
    if cfg is None:
        return 2
    from memorystore.service.retrieval.reindex import reindex_store

    return reindex_store(cfg)


def _backup_command(command: str, refused: str, run: Callable[[], object]) -> int:
    """Run a backup or restore; its result as one JSON line, or its refusal on stderr (2):
    a BackupError, or a ConfigError for a key that cannot be read."""
    import json

    from memorystore.service.portability.backup import BackupError

    try:
        result = run()
    except (BackupError, ConfigError) as exc:
        message = str(exc).removeprefix("refused: ")
        print(f"memorystore {command}: {refused}{message}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


def _backup(args: argparse.Namespace) -> int:
    cfg = _service_config("backup", args.config)
    if cfg is None:
        return 2
    import time

    from memorystore.service.portability.backup import take_stopped

    name = args.name or time.strftime("backup-%Y%m%d-%H%M%S", time.gmtime())
    return _backup_command("backup", "", lambda: take_stopped(cfg, Path(args.to), name))


def _restore(args: argparse.Namespace) -> int:
    cfg = _service_config("restore", args.config)
    if cfg is None:
        return 2
    # mem0 makes its directory when imported: not in the data directory, which a refused
    # restore must leave as it was (the service makes it there when it starts)
    import atexit
    import shutil
    import tempfile

    os.environ["MEM0_DIR"] = mem0_dir = tempfile.mkdtemp(prefix="memorystore-restore-")
    atexit.register(shutil.rmtree, mem0_dir, True)
    from memorystore.service.portability.backup import restore

    key = Path(args.key) if args.key else None
    return _backup_command(
        "restore",
        "refused: ",
        lambda: restore(Path(args.source), cfg, key_file=key, trust_unsigned=args.trust_unsigned),
    )


def _demo(args: argparse.Namespace) -> int:
    from memorystore.demo import run_demo

    return run_demo(language=args.lang)


def _operator(args: argparse.Namespace) -> int:
    import kopf
    from prometheus_client import start_http_server

    import memorystore.operator.handlers  # noqa: F401  (registers the handlers)
    from memorystore.operator.settings import OperatorSettings, SettingsError

    if args.all_namespaces == bool(args.namespace):
        print(
            "memorystore operator: give --namespace (repeatable) or --all-namespaces",
            file=sys.stderr,
        )
        return 2
    try:  # checked here too, so a bad value is one line, not kopf's traceback
        OperatorSettings.from_env(os.environ)
    except SettingsError as exc:
        print(f"memorystore operator: {exc}", file=sys.stderr)
        return 2
    if args.metrics_port:
        start_http_server(args.metrics_port)
    # Structured logs: one JSON object per line, with the object's namespace/name.
    logging.getLogger().handlers.clear()
    kopf.configure(log_format=kopf.LogFormat.JSON, log_refkey="object", quiet=not args.verbose)
    kopf.run(
        standalone=True,
        clusterwide=args.all_namespaces,
        namespaces=args.namespace or [],
        liveness_endpoint=args.liveness,
        memo=kopf.Memo(namespaces=None if args.all_namespaces else args.namespace),
    )
    return 0


def _not_installed(args: argparse.Namespace) -> int:
    print(
        f"memorystore {args.command}: developer tools, not installed here; `make install` "
        "installs them (or `pip install -e dev/` from a checkout)",
        file=sys.stderr,
    )
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memorystore",
        description="Long-term memory for AgentScope agents: memory service, operator, tools.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memorystore {__version__}")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="run a tenant's memory service",
        description="Run the memory service (mem0 + Qdrant) for one tenant. The config file "
        "is validated first; any invalid field stops the start with a message naming it.",
    )
    serve.add_argument("--config", required=True, metavar="FILE", help="service config (YAML)")
    serve.add_argument("--host", help="override listen.host")
    serve.add_argument("--port", type=int, help="override listen.port")
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.set_defaults(func=_serve)

    reindex = sub.add_parser(
        "reindex",
        help="bring a stopped service's store up to its index settings",
        description="Re-index, in place, every memory indexed with other settings than the "
        "config's (retrieval.tokenizer, .context, .languageCentering), with progress shown; "
        "resumable. "
        "`serve` does the same in the background at start-up; run this with the service "
        "stopped (the embedded engine allows one process).",
    )
    reindex.add_argument("--config", required=True, metavar="FILE", help="service config (YAML)")
    reindex.set_defaults(func=_reindex)

    backup = sub.add_parser(
        "backup",
        help="back a stopped service's store up into a directory",
        description="Write a consistent backup of the store the config names (memories with "
        "their vectors, history, session journal, erasure ledger, manifest with checksums, "
        "signed with backup.signingKey or the key generated once in the data directory) to "
        "DIR/NAME. Run it with the service stopped (the embedded engine allows one process); "
        "a running service is backed up with POST /v1/backups/ instead.",
    )
    backup.add_argument("--config", required=True, metavar="FILE", help="service config (YAML)")
    backup.add_argument("--to", required=True, metavar="DIR", help="directory for the backup")
    backup.add_argument("--name", help="backup name (default: backup-<UTC time>)")
    backup.set_defaults(func=_backup)

    restore = sub.add_parser(
        "restore",
        help="restore a backup into a new, empty store",
        description="Check the backup (its signature, checksums, every record and both "
        "databases' schema, embedder and dimensions against the config) and refuse before "
        "writing anything if it is unsigned, damaged or does not match; restore it into the "
        "empty store the config names, leaving out what the erasure ledgers (the backup's, "
        "the one beside it, the store's) say was erased; check the counts. Running it again "
        "after a finished restore of the same backup does nothing; after an interrupted one "
        "it finishes or starts over.",
    )
    restore.add_argument("--config", required=True, metavar="FILE", help="service config (YAML)")
    restore.add_argument(
        "--from", dest="source", required=True, metavar="DIR", help="the backup directory"
    )
    restore.add_argument(
        "--key",
        metavar="FILE",
        help="the backup signing key the backup was signed with (default: backup.signingKey, "
        "else the data directory's backup-signing-key)",
    )
    restore.add_argument(
        "--trust-unsigned",
        action="store_true",
        help="restore a backup that is unsigned or whose signature does not verify (say "
        "which in the result); every file and record is still checked",
    )
    restore.set_defaults(func=_restore)

    demo = sub.add_parser(
        "demo",
        help="show memory flowing across two sessions (offline, no keys)",
        description="Start a memory service on the embedded default (in-process Qdrant, "
        "SQLite, offline embedder) in a temporary directory and play two sessions.",
    )
    demo.add_argument("--lang", choices=["en", "zh"], default="en", help="demo language")
    demo.set_defaults(func=_demo)

    op = sub.add_parser(
        "operator",
        help="run the MemoryStore operator (kopf)",
        description="Reconcile MemoryStore resources into Qdrant, the memory service and "
        "the client config agent pods mount. Uses the in-cluster account, or $KUBECONFIG.",
    )
    op.add_argument("--namespace", action="append", help="watch this namespace (repeatable)")
    op.add_argument("--all-namespaces", action="store_true", help="watch every namespace")
    op.add_argument(
        "--liveness", default="http://0.0.0.0:8080/healthz", help="liveness endpoint URL"
    )
    op.add_argument("--metrics-port", type=int, default=9090, help="Prometheus port (0: off)")
    op.add_argument("--verbose", action="store_true", help="log every handler, not only warnings")
    op.set_defaults(func=_operator)

    for plugin in entry_points(group=COMMAND_PLUGINS):
        plugin.load()(sub)
    for name, text in TOOL_COMMANDS.items():
        if name not in sub.choices:
            missing = sub.add_parser(name, help=text, add_help=False)
            missing.set_defaults(func=_not_installed)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # A developer-tools command that is not installed takes any arguments (--help too).
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.func is not _not_installed:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("httpx", "httpx2"):  # one line per request is noise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
