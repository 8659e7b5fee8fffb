"""What the plugin prints, from what it read (pure: objects in, text out)."""

from __future__ import annotations

from typing import Any

__all__ = ["backup_line", "newest_backup", "status_screen", "tier_of"]


def tier_of(spec: dict[str, Any]) -> str:
    """The store's vector tier, as the spec names it."""
    vector = spec.get("vectorStore") or {}
    for tier in ("managed", "external", "postgres", "embedded"):
        if tier in vector:
            return tier
    return "managed"  # the spec's default


def newest_backup(backups: list[dict[str, Any]], store: str) -> dict[str, Any] | None:
    """The store's newest MemoryStoreBackup by creation time (any phase)."""
    mine = [b for b in backups if (b.get("spec") or {}).get("store") == store]
    return max(mine, key=lambda b: b["metadata"].get("creationTimestamp", ""), default=None)


def backup_line(backup: dict[str, Any] | None) -> str:
    if backup is None:
        return "none"
    status = backup.get("status") or {}
    phase = status.get("phase") or "Pending"
    line = f"{backup['metadata']['name']} {phase}"
    if phase == "Succeeded":
        line += (
            f" at {status.get('finishedAt')}: {status.get('memories')} memories, "
            f"{status.get('sizeBytes')} bytes"
        )
    elif phase == "Failed":
        line += f" at {status.get('finishedAt')}: {status.get('error')}"
    return line


def migration_line(migration: dict[str, Any]) -> str:
    """The last embedder migration the operator saw, in one line."""
    phase, live, other = migration.get("phase"), migration.get("live"), migration.get("other")
    if phase == "Building":
        done, total = migration.get("done") or 0, migration.get("total") or 0
        share = f" ({100 * done // total} %)" if total else ""
        line = f"migrating {live} -> {other}: {done}/{total} memories{share}"
        if migration.get("ratePerSecond"):
            line += f", {migration['ratePerSecond']}/s"
        if migration.get("etaSeconds") is not None:
            line += f", ETA {migration['etaSeconds']} s"
        if migration.get("errors"):
            line += f", {migration['errors']} errors (last: {migration.get('lastError')})"
        return line
    if phase == "Switched":
        return f"{live} (switched; {other} kept for a revert until the grace period ends)"
    return f"{live}" + (f" (last: {migration['lastEvent']})" if migration.get("lastEvent") else "")


def _ready(obj: dict[str, Any] | None) -> str:
    if obj is None:
        return "missing"
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)} ready"


def status_screen(
    store: dict[str, Any],
    workloads: list[tuple[str, str, dict[str, Any] | None]],
    backups: list[dict[str, Any]],
) -> str:
    """One screen: the store, its phase and conditions, endpoint, workloads, last backup and
    service key generation."""
    meta, spec = store["metadata"], store.get("spec") or {}
    status = store.get("status") or {}
    key = status.get("serviceKey") or {}
    lines = [
        f"MemoryStore {meta['namespace']}/{meta['name']}  "
        f"phase: {status.get('phase') or 'Pending'}  tier: {tier_of(spec)}  "
        f"tls: {'on' if (spec.get('tls') or {}).get('enabled', True) else 'off'}",
        f"endpoint:     {status.get('endpoint') or '-'}",
        f"agent pods:   label {status.get('agentPodLabel') or '-'}, mount ConfigMap "
        f"{status.get('clientConfigMap') or '-'} and Secret {status.get('clientSecret') or '-'}",
        f"service key:  generation {key.get('generation', '-')}"
        + (
            f", previous key accepted until {key['previousKeyValidUntil']}"
            if key.get("previousKeyValidUntil")
            else ""
        ),
        f"last backup:  {backup_line(newest_backup(backups, meta['name']))}",
    ]
    migration = status.get("embedderMigration")
    if migration:
        lines.append(f"embedder:     {migration_line(migration)}")
    lines += [
        "workloads:",
    ]
    lines += [f"  {kind} {name}: {_ready(obj)}" for kind, name, obj in workloads]
    lines.append("conditions:")
    for c in status.get("conditions") or []:
        lines.append(f"  {c['type']:<18} {c['status']:<7} {c['reason']}: {c.get('message', '')}")
    return "\n".join(lines)
