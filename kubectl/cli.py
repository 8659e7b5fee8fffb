"""`kubectl memorystore COMMAND`: status, backup, restore, export, import, rotate-key, reindex,
logs. Installed as `kubectl-memorystore` (kubectl finds plugins by that name on PATH); the
krew manifest is kubectl/krew.yaml. Each command says what it did, and the ones that take
time follow it to the end, printing each change."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from memorystore import __version__
from memorystore.kubectl.kube import Kubectl, KubeError
from memorystore.kubectl.report import backup_line, status_screen, tier_of
from memorystore.kubectl.store_api import service_client
from memorystore.operator import names
from memorystore.spec import BACKUP_KIND, GROUP, KIND, VERSION

__all__ = ["build_parser", "main", "restored_store", "rotation_patch"]

API_VERSION = f"{GROUP}/{VERSION}"
STORE = "memorystore"
BACKUP = "memorystorebackup"


class CommandError(RuntimeError):
    """What the user did that cannot be done, said plainly."""


def _follow(
    read: Callable[[], Any], done: Callable[[Any], bool], say: Callable[[Any], str | None],
    timeout: float, every: float = 1.0,
) -> Any:  # fmt: skip
    """Poll `read` until `done`, printing `say`'s line whenever it changes."""
    deadline, last = time.monotonic() + timeout, None
    while True:
        value = read()
        line = say(value)
        if line is not None and line != last:
            print(line, file=sys.stderr, flush=True)
            last = line
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise CommandError(f"gave up after {timeout:.0f} s: {line}")
        time.sleep(every)


def _store(kube: Kubectl, name: str) -> dict[str, Any]:
    store = kube.get(STORE, name)
    if store is None:
        raise CommandError(f"MemoryStore {name} not found in namespace {kube.namespace}")
    return store


# --- status ---------------------------------------------------------------------------------


def status(kube: Kubectl, args: argparse.Namespace) -> int:
    store = _store(kube, args.store)
    workloads = [("Deployment", names.memory_deployment_name(args.store))]
    if tier_of(store.get("spec") or {}) == "managed":  # the one place that reads the tier
        workloads.insert(0, ("StatefulSet", names.qdrant_statefulset_name(args.store)))
    read = [(kind, name, kube.get(kind.lower(), name)) for kind, name in workloads]
    print(status_screen(store, read, kube.list(BACKUP)))
    return 0


# --- backup and restore -------------------------------------------------------------------------


def backup(kube: Kubectl, args: argparse.Namespace) -> int:
    _store(kube, args.store)
    name = args.name or f"{args.store}-{dt.datetime.now(dt.UTC):%Y%m%d%H%M%S}"
    kube.create({
        "apiVersion": API_VERSION, "kind": BACKUP_KIND,
        "metadata": {"name": name}, "spec": {"store": args.store},
    })  # fmt: skip
    print(f"memorystorebackup/{name} created", file=sys.stderr)
    if args.no_wait:
        return 0
    finished = _follow(
        lambda: kube.get(BACKUP, name),
        lambda b: ((b or {}).get("status") or {}).get("phase") in ("Succeeded", "Failed"),
        lambda b: f"backup {backup_line(b)}" if b else None,
        args.timeout,
    )
    return 0 if finished["status"]["phase"] == "Succeeded" else 1


def restored_store(source: dict[str, Any], name: str, backup_name: str) -> dict[str, Any]:
    """A new MemoryStore with `source`'s spec that starts from `backup_name`."""
    spec = dict(source.get("spec") or {})
    spec["restore"] = {"fromBackup": backup_name}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}


def restore(kube: Kubectl, args: argparse.Namespace) -> int:
    taken = kube.get(BACKUP, args.backup)
    if taken is None:
        raise CommandError(f"MemoryStoreBackup {args.backup} not found in {kube.namespace}")
    phase = (taken.get("status") or {}).get("phase")
    if phase != "Succeeded":
        raise CommandError(f"backup {args.backup} is {phase or 'Pending'}, not Succeeded")
    if args.spec is not None:
        loaded = yaml.safe_load(Path(args.spec).read_text())
        source = loaded if "spec" in loaded else {"spec": loaded}
    else:
        store = taken["spec"]["store"]
        found = kube.get(STORE, store)
        if found is None:
            raise CommandError(
                f"store {store}, whose spec the restore would copy, is gone: give one with "
                "--spec FILE (a MemoryStore, or its spec)"
            )
        source = found
    if kube.get(STORE, args.to) is not None:
        raise CommandError(f"MemoryStore {args.to} exists: a restore makes a new store")
    kube.create(restored_store(source, args.to, args.backup))
    print(f"memorystore/{args.to} created from backup {args.backup}", file=sys.stderr)
    if args.no_wait:
        return 0
    ready = _follow(
        lambda: kube.get(STORE, args.to),
        lambda s: _condition(s, "Ready") == "True" or _condition(s, "Restored") == "False",
        lambda s: _conditions_line(s),
        args.timeout,
        every=2,
    )
    return 0 if _condition(ready, "Ready") == "True" else 1


def _condition(store: dict[str, Any] | None, kind: str) -> str | None:
    for c in ((store or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def _conditions_line(store: dict[str, Any] | None) -> str | None:
    status = (store or {}).get("status") or {}
    conditions = status.get("conditions") or []
    if not conditions:
        return None
    shown = ", ".join(f"{c['type']}={c['status']} ({c['reason']})" for c in conditions)
    return f"{status.get('phase') or 'Pending'}: {shown}"


# --- the key -------------------------------------------------------------------------------


def rotation_patch(store: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The merge patch that rotates the service key, and the generation it makes: one above
    both the key's generation and the spec's rotation (it can only grow)."""
    current = ((store.get("status") or {}).get("serviceKey") or {}).get("generation", 0)
    asked = ((store.get("spec") or {}).get("serviceKey") or {}).get("rotation", 0)
    generation = max(int(current), int(asked)) + 1
    return {"spec": {"serviceKey": {"rotation": generation}}}, generation


def _key_status(store: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = (store.get("status") or {}).get("serviceKey") or {}
    return found


def rotate_key(kube: Kubectl, args: argparse.Namespace) -> int:
    patch, generation = rotation_patch(_store(kube, args.store))
    kube.patch(STORE, args.store, patch)
    print(f"spec.serviceKey.rotation set to {generation}", file=sys.stderr)
    rotated = _follow(
        lambda: _store(kube, args.store),
        lambda s: _key_status(s).get("generation", 0) >= generation,
        lambda s: f"service key generation {_key_status(s).get('generation', '-')}",
        args.timeout,
    )
    until = _key_status(rotated).get("previousKeyValidUntil")
    print(f"rotated: generation {generation}"
          + (f"; the previous key is accepted until {until}" if until else ""))  # fmt: skip
    return 0


# --- data, through the service --------------------------------------------------------------


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.is_error:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text[:300]
        raise CommandError(f"the memory service answered {response.status_code}: {detail}")
    body: dict[str, Any] = response.json()
    return body


def export(kube: Kubectl, args: argparse.Namespace) -> int:
    _store(kube, args.store)
    kind = next(s for s in ("user", "agent", "run") if getattr(args, s) is not None)
    scope = {f"{kind}_id": getattr(args, kind)}
    with service_client(kube, args.store) as http:
        # the export format is the service's own; `schema` is only recorded in the document
        made = _answer(http.post("/v1/exports/", json={**scope, "schema": {}}))
        document = _answer(
            http.post("/v1/exports/get/", json={**scope, "memory_export_id": made["id"]})
        )
    text = json.dumps(document, ensure_ascii=False, indent=2)
    if args.output == "-":
        print(text)
    else:
        Path(args.output).write_text(text + "\n")
    count = len(document.get("memories") or [])
    print(f"exported {count} memories of {kind} {scope[f'{kind}_id']}", file=sys.stderr)
    return 0


def import_(kube: Kubectl, args: argparse.Namespace) -> int:
    _store(kube, args.store)
    document = json.loads(Path(args.file).read_text())
    with service_client(kube, args.store) as http:
        imported = _answer(http.post("/v1/imports/", json=document))
    print(json.dumps(imported))
    return 0


def reindex(kube: Kubectl, args: argparse.Namespace) -> int:
    _store(kube, args.store)
    with service_client(kube, args.store) as http:
        started = http.post("/v1/reindex/")
        if started.status_code not in (200, 202, 409):
            _answer(started)
        body = started.json()
        if started.status_code == 200:
            print(f"nothing to re-index: every memory is at {body['version']}")
            return 0
        print(f"re-indexing to {body['version']}", file=sys.stderr)
        final = _follow(
            lambda: http.get("/readyz").json().get("reindex") or {},
            lambda p: bool(p.get("finished")),
            lambda p: f"{p.get('done', 0)}/{p.get('pending', '?')} memories" if p else None,
            args.timeout,
        )
    print(f"re-indexed {final['done']} memories ({final['failed']} failed)")
    return 0 if not final["failed"] else 1


def logs(kube: Kubectl, args: argparse.Namespace) -> int:
    _store(kube, args.store)
    component = names.QDRANT if args.qdrant else names.MEMORY_SERVICE
    selector = ",".join(f"{k}={v}" for k, v in names.selector_labels(args.store, component).items())
    extra = ["-f"] if args.follow else []
    return kube.passthrough("logs", "-l", selector, "--all-containers", "--prefix",
                            f"--tail={args.tail}", *extra)  # fmt: skip


# --- the command line -----------------------------------------------------------------------

COMMANDS: dict[str, Callable[[Kubectl, argparse.Namespace], int]] = {
    "status": status, "backup": backup, "restore": restore, "export": export,
    "import": import_, "rotate-key": rotate_key, "reindex": reindex, "logs": logs,
}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl memorystore", description="Work MemoryStores: see, back up, restore, "
        "move data, rotate keys, re-index, read logs.",
    )  # fmt: skip
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _cluster_flags(parser, None)
    # the same flags after the command too, as kubectl takes them (`status acme -n tenants`)
    common = argparse.ArgumentParser(add_help=False)
    _cluster_flags(common, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, about: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=about, parents=[common])

    command("status", "the store, its workloads, conditions, key and last backup").add_argument(
        "store"
    )
    p = command("backup", "take a MemoryStoreBackup and follow it")
    p.add_argument("store")
    p.add_argument("--name", help="the backup's name (default: STORE-YYYYMMDDhhmmss)")
    p = command("restore", "a new store from a Succeeded backup")
    p.add_argument("backup")
    p.add_argument("--to", required=True, help="the new store's name")
    p.add_argument("--spec", help="a MemoryStore (or spec) file, when the backup's store is gone")
    p = command("export", "one scope's memories to a file (through the service)")
    p.add_argument("store")
    p.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    p = command("import", "an export's memories into the store")
    p.add_argument("store")
    p.add_argument("-f", "--file", required=True, help="an export document (JSON)")
    command("rotate-key", "a new service key; the old one for its grace period").add_argument(
        "store"
    )
    command("reindex", "bring every memory to the index version, with progress").add_argument(
        "store"
    )
    p = command("logs", "the store's memory service (or Qdrant) logs")
    p.add_argument("store")
    p.add_argument("--qdrant", action="store_true", help="the managed Qdrant's pods instead")
    p.add_argument("-f", "--follow", action="store_true")
    p.add_argument("--tail", type=int, default=200)
    for name in ("backup", "restore", "rotate-key", "reindex"):
        chosen = sub.choices[name]
        chosen.add_argument("--timeout", type=float, default=900, help="seconds to follow it")
        if name in ("backup", "restore"):
            chosen.add_argument("--no-wait", action="store_true", help="create it and return")
    for name in ("export",):
        group = sub.choices[name].add_mutually_exclusive_group(required=True)
        for scope in ("user", "agent", "run"):
            group.add_argument(f"--{scope}", dest=scope, metavar="ID",
                               help=f"the {scope} whose memories")  # fmt: skip
    return parser


def _cluster_flags(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("-n", "--namespace", default=default, help="the store's namespace")
    parser.add_argument("--context", default=default, help="the kubeconfig context")
    parser.add_argument("--kubeconfig", default=default, help="the kubeconfig file")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    flags = tuple(
        f"--{flag}={value}" for flag in ("context", "kubeconfig")
        if (value := getattr(args, flag)) is not None
    )  # fmt: skip
    kube = Kubectl(namespace=args.namespace or _current_namespace(flags), flags=flags)
    try:
        return COMMANDS[args.command](kube, args)
    except (CommandError, KubeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _current_namespace(flags: tuple[str, ...]) -> str:
    """kubectl's namespace for the current context (default: `default`)."""
    try:
        found = (
            Kubectl(flags=flags)
            .run("config", "view", "--minify", "-o", "jsonpath={..namespace}")
            .strip()
        )
    except KubeError:
        found = ""
    return found or "default"
