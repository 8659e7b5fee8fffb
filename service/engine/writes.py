"""The write pipeline: how an add becomes memories, each step written once for every path.

Why one pipeline: a conversation turn, a fact written on its own and the facts mem0's
extraction wrote all go through the same steps. A fact is compared with its scope's nearest
active memories (`_neighbours`), dropped when it repeats one by the text rules (`_repeat_of`),
written with the service's index texts (`_write`), and retires what it makes outdated
(`_supersessions`, then `_retire_all`). The paths differ only where they must: a turn is
kept as said (deduplicated by its exact text only), a fact also counts a restatement as a
repeat, and after extraction the model judges supersession, the text rules deciding when its
answer cannot be used. A new memory is always written before anything it retires, so a
failure in between leaves both (never neither).

A caller that must write exactly once across crashes (session consolidation) names each
memory's id (`memory_ids`): a re-run finds what the interrupted run wrote by id, and
`complete_fact` finishes the one fact it may have left half-done (written, its retirements
not yet); `settle` settles again the facts an interrupted extraction wrote.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from mem0 import AsyncMemory

from memorystore.config import ServiceConfig
from memorystore.keyed_locks import KeyedLocks
from memorystore.rules.dedup import Duplicate, find_duplicate, same_guards
from memorystore.rules.supersede import restates, retired_by
from memorystore.scope import EntityIds
from memorystore.service.engine.mem0_seam import (
    chat,
    create_memory,
    memory_hash,
    record_added,
    retire_memory,
)
from memorystore.service.engine.results import WriteResult
from memorystore.service.lifecycle import judge
from memorystore.service.lifecycle.retirement import (
    LIFECYCLE_KEY,
    RETIRED,
    active_only,
    retirement_fields,
)
from memorystore.service.ops.stages import stage
from memorystore.service.retrieval.indexing import PREV_KEY, IndexTexts, index_texts, line
from memorystore.service.retrieval.reindex import INDEX_KEY
from memorystore.service.state import scope_chain
from memorystore.service.state.postgres import ReplicaLocks
from memorystore.service.stores.protocol import VectorStore

__all__ = ["NEIGHBOURS", "ScopeChain", "ScopeLocks", "WritePipeline", "passage_vectors"]

NEIGHBOURS = 16  # nearest memories a new fact is compared with (duplicates, outdated ones)

# the write locks (per scope; across replicas with PostgreSQL) and the scope's write order
ScopeLocks = KeyedLocks | ReplicaLocks
ScopeChain = scope_chain.LocalChain | scope_chain.PgChain
# old memory id -> (the memory that makes it outdated, why)
Outdated = dict[str, tuple[str, str]]

log = logging.getLogger("memorystore.service")


def _repeat(kept_id: str, text: str, rule: str) -> WriteResult:
    """The answer for a new fact that was not stored: it repeats the kept memory."""
    return {"id": kept_id, "memory": text, "event": "NONE", "duplicate_of": kept_id, "rule": rule}


def _merged(duplicate: Duplicate) -> str:
    """Why an old memory is retired for a new one that holds it and more."""
    return f"merged into a fuller version ({duplicate.rule})"


def _offline_verdicts(
    new: Iterable[tuple[str, str]], existing: Iterable[tuple[str, str]]
) -> list[judge.Verdict]:
    """The text rules' supersessions: which existing memories each new one makes outdated."""
    existing = list(existing)
    return [
        judge.Verdict(old_id, new_id, reason)
        for new_id, text in new
        for old_id, reason in retired_by(text, existing)
    ]


async def passage_vectors(memory: AsyncMemory, texts: list[str]) -> list[list[float]]:
    """The vectors `memory`'s embedder stores `texts` under, in one call (one batch)."""
    if not texts:
        return []
    with stage("embed"):
        vectors: list[list[float]] = await asyncio.to_thread(
            memory.embedding_model.embed_batch, texts, "add"
        )
    return vectors


class WritePipeline:
    """The engine's writes, on its AsyncMemory, under its scope locks and scope chain."""

    def __init__(
        self,
        cfg: ServiceConfig,
        memory: AsyncMemory,
        locks: ScopeLocks,
        chain: ScopeChain,
        index_version: str,
    ) -> None:
        self.cfg = cfg
        self.memory = memory
        self._locks = locks
        self._chain = chain
        self._index_version = index_version

    @property
    def store(self) -> VectorStore:
        store: VectorStore = self.memory.vector_store
        return store

    # --- the two ways in -------------------------------------------------------------------

    async def extract(
        self, messages: list[dict[str, Any]], scope: EntityIds, metadata: dict[str, Any] | None
    ) -> list[WriteResult]:
        """mem0's extraction (one at a time per scope: its facts are unknown in advance),
        then the facts settled like any other (`_settle_extracted`)."""
        async with self._locks.hold(scope):
            result = await self.memory.add(
                messages, **scope.filters(), metadata=metadata, infer=True
            )
            # mem0 wrote these with the current settings: record it, or the next start
            # would take them for memories from before versions and re-index them
            for item in result["results"]:
                if item.get("event") in ("ADD", "UPDATE") and item.get("id"):
                    stamp = {INDEX_KEY: self._index_version}
                    await asyncio.to_thread(self.store.update, item["id"], None, stamp)
            return await self._settle_extracted(result["results"], scope)

    async def settle(self, items: list[WriteResult], scope: EntityIds) -> list[WriteResult]:
        """`_settle_extracted` again, under the scope's lock, for facts an interrupted run of
        `extract` wrote (their repeats dropped, what they make outdated retired)."""
        async with self._locks.hold(scope):
            return await self._settle_extracted(items, scope)

    async def complete_fact(self, memory_id: str, scope: EntityIds) -> list[WriteResult]:
        """Finish a fact an interrupted run wrote: retire what it makes outdated, as
        `_add_fact` does right after writing it. Idempotent: what it retired already is no
        longer among the active neighbours; a fact retired since has nothing left to do."""
        async with self._locks.hold(scope):
            record = await asyncio.to_thread(self.store.get, vector_id=memory_id)
            payload = dict(record.payload or {}) if record is not None else {}
            if record is None:
                return []
            await asyncio.to_thread(record_added, self.memory, memory_id, payload)
            if payload.get(LIFECYCLE_KEY) == RETIRED:
                return []
            content = str(payload.get("data") or "")
            texts = self._texts({"content": content}, payload, None)  # a fact stands alone
            near = await self._neighbours(
                scope, await self._embed(texts.dense), exclude={memory_id}
            )
            duplicate = self._repeat_of(content, near, restated=True)
            if duplicate is not None and duplicate.keep == "old":
                duplicate = None  # written before the repeat it now meets: both stay
            outdated = self._outdated(memory_id, content, near, duplicate)
            return await self._retire_all(outdated, near)

    async def add_raw(
        self,
        messages: list[dict[str, Any]],
        scope: EntityIds,
        metadata: dict[str, Any] | None,
        memory_ids: Sequence[str | None] | None = None,
        exchange: bool | None = None,
    ) -> list[WriteResult]:
        """Store each non-system message as one memory; an identical text in scope is kept once.

        Only conversation turns are chained for context: a message with a speaker (`name`),
        or any message of a request that holds both sides of an exchange. A fact written on
        its own (an agent's add_memory, a list of notes) stands alone: embedding it with an
        unrelated fact written before it ranked that neighbour's topic onto it. Facts are
        also kept true (`_add_fact`); turns are records of what was said, kept as said.
        `memory_ids[i]`, when given, is the id message i is written under; `exchange`, when
        given, whether the messages are part of a larger request holding both sides.
        """
        if exchange is None:
            exchange = {"user", "assistant"} <= {msg["role"] for msg in messages}
        settings = self.cfg.consolidation
        results: list[WriteResult] = []
        plain: list[tuple[dict[str, Any], str | None, bool]] = []  # kept as said, in order
        for i, msg in enumerate(messages):
            if msg["role"] == "system":
                continue
            memory_id = memory_ids[i] if memory_ids is not None else None
            turn = exchange or bool(msg.get("name"))
            if not turn and (settings.deduplicate or settings.supersede):
                results.extend(await self._add_as_said(plain, scope, metadata or {}))
                plain = []
                async with self._locks.hold(scope):  # the comparison and the write are one step
                    results.extend(await self._add_fact(msg, scope, metadata or {}, memory_id))
                continue
            plain.append((msg, memory_id, turn))
        results.extend(await self._add_as_said(plain, scope, metadata or {}))
        return results

    async def add_many(
        self,
        messages: list[dict[str, Any]],
        scope: EntityIds,
        metadata: dict[str, Any] | None,
        chunk: int,
    ) -> AsyncIterator[tuple[int, list[WriteResult]]]:
        """`add_raw` of `messages` in chunks of `chunk`, stored as one add_raw of them all
        would store them (the chain runs on; turns or facts judged on the whole request);
        yields after each chunk the messages done and that chunk's results. A chunk begun
        is finished even when the caller stops listening (its client went away)."""
        exchange = {"user", "assistant"} <= {msg["role"] for msg in messages}
        for start in range(0, len(messages), chunk):
            part = messages[start : start + chunk]
            write = asyncio.ensure_future(self.add_raw(part, scope, metadata, None, exchange))
            yield start + len(part), await asyncio.shield(write)

    async def _add_as_said(
        self,
        items: list[tuple[dict[str, Any], str | None, bool]],
        scope: EntityIds,
        metadata: dict[str, Any],
    ) -> list[WriteResult]:
        """Messages (message, id, is a turn) kept as said: a text already in the scope, or
        earlier in `items`, is kept once (NONE naming the kept id); the others are embedded
        in one batch and written in order. Each distinct text's lock is held throughout
        (`hold_many`: one order, so two requests sharing texts cannot deadlock; across
        replicas, one connection for them all)."""
        if not items:
            return []
        digests = [memory_hash(msg["content"]) for msg, _, _ in items]
        async with self._locks.hold_many([(scope, digest) for digest in digests]):
            kept: dict[str, str] = {}
            with stage("dedup"):
                for digest in dict.fromkeys(digests):
                    existing = await asyncio.to_thread(
                        self.store.list, filters={**scope.filters(), "hash": digest}, top_k=1
                    )
                    if existing[0]:
                        kept[digest] = str(existing[0][0].id)
            results: list[WriteResult | None] = []
            fresh: list[tuple[dict[str, Any], str, bool]] = []
            for (msg, memory_id, turn), digest in zip(items, digests, strict=True):
                if digest in kept:
                    results.append({"id": kept[digest], "memory": msg["content"], "event": "NONE"})
                    continue
                kept[digest] = memory_id = memory_id or str(uuid.uuid4())
                fresh.append((msg, memory_id, turn))
                results.append(None)
            written = iter(await self._insert_many(fresh, scope, metadata))
            return [r if r is not None else next(written) for r in results]

    # --- facts: written by the caller, or by mem0's extraction ----------------------------

    async def _add_fact(
        self,
        msg: dict[str, Any],
        scope: EntityIds,
        metadata: dict[str, Any],
        memory_id: str | None = None,
    ) -> list[WriteResult]:
        """Write one fact unless it repeats a kept one; retire what it makes outdated (by
        the text rules). The caller holds the scope's lock."""
        content = msg["content"]
        texts = self._texts(msg, metadata, None)  # a fact stands alone: no turn as context
        vector = await self._embed(texts.dense)
        with stage("dedup"):
            near = await self._neighbours(scope, vector)
            duplicate = self._repeat_of(content, near, restated=True)
        if duplicate is not None and duplicate.keep == "old":
            return [_repeat(duplicate.id, near[duplicate.id], duplicate.rule)]
        new_id = memory_id or str(uuid.uuid4())
        added = await self._write(msg, scope, metadata, new_id, texts, vector)
        with stage("dedup"):
            outdated = self._outdated(added["id"], content, near, duplicate)
        return [added, *await self._retire_all(outdated, near)]

    def _outdated(
        self, new_id: str, content: str, near: Mapping[str, str], duplicate: Duplicate | None
    ) -> Outdated:
        """What a new fact retires: the memory it holds and more, and (by the text rules)
        those it makes outdated."""
        outdated: Outdated = {}
        if duplicate is not None:  # the new text holds the old one and more
            outdated[duplicate.id] = (new_id, _merged(duplicate))
        if self.cfg.consolidation.supersede:
            for verdict in _offline_verdicts([(new_id, content)], near.items()):
                outdated.setdefault(verdict.old_id, (verdict.new_id, verdict.reason))
        return outdated

    async def _settle_extracted(
        self, items: list[WriteResult], scope: EntityIds
    ) -> list[WriteResult]:
        """After mem0's add-only extraction: drop repeats, then let the model retire.

        mem0 writes its facts before the service sees them, so a fact that repeats a kept one
        is deleted again (its history shows ADD, DELETE) and reported as NONE naming the kept
        one. The model then judges, in one call for all new facts, which nearest memories they
        make outdated and which new facts only repeat one in other words (those are deleted
        again too); an answer that cannot be read falls back to the offline rules."""
        settings = self.cfg.consolidation
        added = [i for i in items if i.get("event") == "ADD" and i.get("id")]
        if not added or not (settings.deduplicate or settings.supersede):
            return items
        fresh = {str(i["id"]) for i in added}
        near: dict[str, str] = {}
        kept: list[tuple[str, str]] = []
        results = [i for i in items if i not in added]
        outdated: Outdated = {}
        for item in added:
            new_id, text = str(item["id"]), str(item.get("memory") or "")
            mine = await self._neighbours(scope, await self._embed(text), exclude=fresh)
            near.update(mine)
            duplicate = self._repeat_of(text, mine, restated=False)
            if duplicate is not None and duplicate.keep == "old":
                await self.memory.delete(new_id)
                results.append(_repeat(duplicate.id, mine[duplicate.id], duplicate.rule))
                continue
            results.append(item)
            kept.append((new_id, text))
            if duplicate is not None:
                outdated.setdefault(duplicate.id, (new_id, _merged(duplicate)))
        dropped: set[str] = set()
        if settings.supersede and kept and near:
            existing = [(i, t) for i, t in near.items() if i not in outdated]
            for verdict in await self._judge(kept, existing):
                if verdict.kind == "same":  # the model found a repeat the text rules missed
                    dropped.add(verdict.new_id)
                    await self.memory.delete(verdict.new_id)
                    results = [r for r in results if r.get("id") != verdict.new_id]
                    results.append(_repeat(verdict.old_id, near[verdict.old_id], "model"))
                else:
                    outdated.setdefault(verdict.old_id, (verdict.new_id, verdict.reason))
        return [*results, *await self._retire_all(outdated, near, gone=dropped)]

    async def _judge(
        self, new: list[tuple[str, str]], existing: list[tuple[str, str]]
    ) -> list[judge.Verdict]:
        """The extraction model's verdicts, or the text rules' when it fails."""
        try:
            return await asyncio.to_thread(
                judge.judge, lambda messages: chat(self.memory, messages), new, existing
            )
        except Exception as exc:  # a model that fails or rambles must not fail the write
            log.warning(
                "the model's judgement of outdated memories failed (%s): offline rules decide",
                type(exc).__name__,
            )
        return _offline_verdicts(new, existing)

    # --- the steps every path shares --------------------------------------------------------

    async def _embed(self, text: str) -> list[float]:
        return (await passage_vectors(self.memory, [text]))[0]

    async def _neighbours(
        self,
        scope: EntityIds,
        vector: list[float],
        exclude: set[str] | frozenset[str] = frozenset(),
    ) -> dict[str, str]:
        """The scope's nearest memories that are not retired: id → text."""
        hits = await asyncio.to_thread(
            self.store.search,
            query="",
            vectors=vector,
            top_k=NEIGHBOURS,
            filters=active_only(scope.filters()),
        )
        return {
            str(h.id): str((h.payload or {}).get("data") or "")
            for h in hits
            if str(h.id) not in exclude
        }

    def _repeat_of(self, text: str, near: Mapping[str, str], restated: bool) -> Duplicate | None:
        """The near memory `text` repeats (keep "old"), or holds and more (keep "new"), by
        the text rules; with `restated`, also one it states again in other words."""
        if not self.cfg.consolidation.deduplicate:
            return None
        duplicate = find_duplicate(text, near.items())
        if duplicate is None and restated:
            comparable = [(i, t) for i, t in near.items() if same_guards(text, t)]
            same = restates(text, comparable)
            duplicate = Duplicate(same, "restated", "old") if same is not None else None
        return duplicate

    async def _retire_all(
        self, outdated: Outdated, near: Mapping[str, str], gone: set[str] | None = None
    ) -> list[WriteResult]:
        """Retire each outdated memory, in order; never for a successor that is `gone`."""
        return [
            await self._retire(old_id, near[old_id], successor, reason)
            for old_id, (successor, reason) in outdated.items()
            if successor not in (gone or ())
        ]

    async def _retire(self, memory_id: str, text: str, successor: str, reason: str) -> WriteResult:
        now = datetime.now(UTC).isoformat()
        await retire_memory(
            self.memory, memory_id, text, retirement_fields(now, successor, reason), now
        )
        return {
            "id": memory_id,
            "memory": text,
            "event": "DELETE",
            "superseded_by": successor,
            "reason": reason,
        }

    async def _insert_many(
        self,
        items: list[tuple[dict[str, Any], str, bool]],
        scope: EntityIds,
        metadata: dict[str, Any],
    ) -> list[WriteResult]:
        """Write messages (message, id, is a turn) in order (`_write`), embedded in one
        batch: each turn's link is claimed first, so the batch forms one chain with what
        others write in the scope meanwhile."""
        prepared: list[tuple[IndexTexts, tuple[str, str] | None]] = []
        for msg, memory_id, turn in items:
            content, name = msg["content"], msg.get("name")
            previous = None
            if turn:
                previous = await self._chain.claim(scope, memory_id, line(content, name))
            prepared.append((self._texts(msg, metadata, previous), previous))
        vectors = await passage_vectors(self.memory, [texts.dense for texts, _ in prepared])
        return [
            await self._write(msg, scope, metadata, memory_id, texts, vector, previous)
            for (msg, memory_id, _), (texts, previous), vector in zip(
                items, prepared, vectors, strict=True
            )
        ]

    def _texts(
        self,
        msg: Mapping[str, Any],
        metadata: Mapping[str, Any],
        previous: tuple[str, str] | None,
    ) -> IndexTexts:
        """What a message is indexed with: its text, speaker and date, and the turn written
        before it (`previous`: id, line) as context."""
        date = metadata.get("date")
        return index_texts(
            msg["content"],
            msg.get("name"),
            str(date) if date else None,
            previous[1] if previous else None,
            self.cfg.retrieval,
        )

    async def _write(
        self,
        msg: dict[str, Any],
        scope: EntityIds,
        metadata: dict[str, Any],
        memory_id: str,
        texts: IndexTexts,
        vector: list[float],
        previous: tuple[str, str] | None = None,
    ) -> WriteResult:
        """mem0's `infer=False` insert (`mem0_seam.create_memory`), with our index texts.

        The memory keeps mem0's payload (data, hash, timestamps, role, actor_id) and history
        row; what differs is what is embedded and keyword-indexed (`retrieval/indexing.py`) and
        the link to the memory written just before it in the scope (`prev_id`)."""
        content, name = msg["content"], msg.get("name")
        fields = {**metadata, **scope.filters(), "role": msg["role"]}
        fields[INDEX_KEY] = self._index_version
        if name:
            fields["actor_id"] = name
        if previous:
            fields[PREV_KEY] = previous[0]
        await create_memory(self.memory, memory_id, vector, content, texts.lexical, fields)
        return {
            "id": memory_id,
            "memory": content,
            "event": "ADD",
            "actor_id": name,
            "role": msg["role"],
        }
